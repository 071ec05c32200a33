"""Read an equation as a page shows it and check that it multiplies out to the value printed
after it. Shared by the page tests (one copy).

An equation is a chain ``left = symbols = numbers = value`` (LaTeX of ``st.latex``, or the
plain text of a derivation popover's line ``= numbers = **value**``). The numbers side is turned
back into Python — ``\\cdot`` and ``·`` into ``*``, ``\\frac{a}{b}`` and ``÷`` into ``/``, the
floor and ceiling brackets into ``floor``/``ceil``, ``^`` into ``**``, thousands separators
dropped — and evaluated exactly (every number a ``Fraction``), so a product of large integers
is compared digit for digit.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

LINE_BREAK = re.compile(r"\\\\(?:\[[^\]]*\])?")  # KaTeX's \\ (with its room, \\[0.4em])
CONTINUED = re.compile(r"^(?:\\qquad\s*)?(?:\{\}\s*)?(?=[=+\-]|\\cdot)")  # a line going on with its sign
SEPARATORS = re.compile(r"\\qquad|\\quad")  # equations side by side
NOTE = re.compile(r"\\;\(\\text\{[^{}]*\}\)\s*$")  # words after a value: "\;(\text{80 GiB})"
THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
NUMBER = re.compile(r"\d+(?:\.\d+)?")
FUNCTIONS = {
    "floor": math.floor,
    "ceil": math.ceil,
    "max": max,
    "median": lambda *values: (
        sorted(values)[len(values) // 2]
        if len(values) % 2
        else (sorted(values)[len(values) // 2 - 1] + sorted(values)[len(values) // 2]) / 2
    ),
    "ln": lambda x: Fraction(math.log(x)),
}
LATEX_WORDS = [
    (r"\left\lfloor", "floor("),
    (r"\right\rfloor", ")"),
    (r"\left\lceil", "ceil("),
    (r"\right\rceil", ")"),
    (r"\lfloor", "floor("),
    (r"\rfloor", ")"),
    (r"\left(", "("),
    (r"\right)", ")"),
    (r"\cdot", "*"),
    (r"\max", "max"),
    (r"\operatorname{median}", "median"),
    (r"\ln", "ln"),
    (r",\;", ";"),  # a function's arguments
    (r"\;", " "),
    (r"\,", " "),
    ("−", "-"),
]


class NotNumbers(ValueError):
    """The side holds symbols or words, not only numbers."""


def _group(text: str, i: int) -> tuple[str, int]:
    """The content of the brace group opening at ``text[i]`` and the index after it."""
    if i >= len(text) or text[i] != "{":
        raise NotNumbers(text)
    depth = 0
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i + 1 : j], j + 1
    raise NotNumbers(text)


def _latex_groups(text: str) -> str:
    """\\frac, \\underbrace (its label dropped) and ^{…} as Python."""
    out, i = [], 0
    while i < len(text):
        if text.startswith(r"\frac", i):
            top, i = _group(text, i + len(r"\frac"))
            bottom, i = _group(text, i)
            out.append(f"(({_latex_groups(top)})/({_latex_groups(bottom)}))")
        elif text.startswith(r"\underbrace", i):
            body, i = _group(text, i + len(r"\underbrace"))
            if not text.startswith("_", i):
                raise NotNumbers(text)
            _, i = _group(text, i + 1)
            out.append(f"({_latex_groups(body)})")
        elif text[i] == "^":
            exponent, i = _group(text, i + 1)
            out.append(f"**({_latex_groups(exponent)})")
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _evaluate(python: str) -> Fraction:
    python = THOUSANDS.sub("", python).replace(";", ",")
    if re.sub(r"floor|ceil|max|median|ln", "", python).strip(" 0123456789.+-*/(),") != "":
        raise NotNumbers(python)
    exact = NUMBER.sub(lambda m: f"F('{m.group(0)}')", python)
    return Fraction(eval(exact, {"__builtins__": {}, "F": Fraction, **FUNCTIONS}))


def latex_numbers(side: str) -> Fraction:
    """A LaTeX side made of numbers, evaluated (NotNumbers if it holds anything else)."""
    for word, python in LATEX_WORDS:
        side = side.replace(word, python)
    side = _latex_groups(side)  # \underbrace's label (words) dropped here
    if "\\" in side:
        raise NotNumbers(side)
    return _evaluate(side)


def text_numbers(side: str) -> Fraction:
    """A plain-text side made of numbers (· ÷ − ⌊ ⌋ ⌈ ⌉ ^), evaluated."""
    for word, python in (("·", "*"), ("÷", "/"), ("−", "-"), ("⌊", "floor("), ("⌋", ")")):
        side = side.replace(word, python)
    side = side.replace("⌈", "ceil(").replace("⌉", ")").replace("^", "**")
    return _evaluate(side)


def value_of(side: str) -> Fraction | None:
    """The printed value (a note after it dropped), or None when the side is no number."""
    side = NOTE.sub("", side).strip().strip("*")
    plain = THOUSANDS.sub("", side)
    return Fraction(plain) if re.fullmatch(r"-?\d+(\.\d+)?", plain) else None


def agrees(computed: Fraction, printed: str, shown: Fraction) -> bool:
    """Exactly, for whole numbers; to the six significant digits a fraction is printed with
    (and the numbers it was computed from) otherwise."""
    if "." not in printed and computed.denominator == 1:
        return computed == shown
    return math.isclose(computed, shown, rel_tol=1e-4, abs_tol=1e-9)


def latex_equations(latex: str) -> list[tuple[str, str, str]]:
    """(equation, numbers side, printed value) of every equation of one st.latex whose last
    side is a number; an equation that prints a number without its numbers side (``E = 3.36``)
    comes back with an empty numbers side."""
    found = []
    lines: list[str] = []
    for line in LINE_BREAK.split(latex.strip().strip("$")):
        line = line.strip()
        if lines and CONTINUED.match(line):  # one equation over several lines: join them
            lines[-1] += " " + CONTINUED.sub("", line)
        else:
            lines.append(line)
    for segment in (part for line in lines for part in SEPARATORS.split(line)):
        segment = segment.strip()
        sides = segment.split("=")
        if len(sides) < 2 or value_of(sides[-1]) is None:
            continue  # a statement in symbols (a Jacobian, an identity): nothing to multiply out
        try:
            latex_numbers(sides[-2])
            found.append((segment, sides[-2], sides[-1]))
        except NotNumbers:
            found.append((segment, "", sides[-1]))
    return found


def check_latex(latex: str) -> list[str]:
    """The equations of one st.latex, each checked: AssertionError for one that does not multiply
    out to the value it prints, or prints a value with no numbers before it."""
    checked = []
    for segment, numbers, printed in latex_equations(latex):
        assert numbers, f"a value printed without its numbers: {segment!r}"
        computed, shown = latex_numbers(numbers), value_of(printed)
        assert shown is not None and agrees(computed, printed, shown), (
            f"{segment!r}: the numbers give {float(computed):,} but the page prints {printed.strip()}"
        )
        checked.append(segment)
    return checked


POPOVER_LINE = re.compile(r"^= (.+) = \*\*(.+)\*\*$")  # show_derivation's "= numbers = **value**"


def check_popover_line(markdown: str) -> bool:
    """A derivation popover's line checked (True), or False when the Markdown is no such line."""
    match = POPOVER_LINE.match(markdown.strip())
    if not match:
        return False
    numbers, printed = match.groups()
    computed, shown = text_numbers(numbers), value_of(printed)
    assert shown is not None and agrees(computed, printed, shown), (
        f"{markdown!r}: the numbers give {float(computed):,}"
    )
    return True


def check_text(equation: str) -> None:
    """A derivation's plain text (``Derivation.text``): every '; '-separated equation's
    numbers side equals its value."""
    for part in equation.split("; "):
        sides = part.split(" = ")
        computed, shown = text_numbers(sides[-2]), value_of(sides[-1])
        assert shown is not None and agrees(computed, sides[-1], shown), part
