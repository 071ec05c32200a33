"""A derivation's arithmetic written out: its expression (plain Python over named terms) in symbols
and with the terms' numbers put in, as LaTeX (``st.latex``) and as plain text (the report, Markdown,
a message). Both forms are read off the same parsed expression, so the symbols, the numbers and the
value a page prints cannot drift apart: ``evaluate`` computes exactly what ``render`` writes.

    render("2*L*G*b_head", terms, latex=True, numbers=False)  →  2 \\cdot L \\cdot G \\cdot b_\\text{head}
    render("2*L*G*b_head", terms, latex=True, numbers=True)   →  2 \\cdot 61 \\cdot 128 \\cdot 384
    render("2*L*G*b_head", terms, latex=False, numbers=True)  →  2 · 61 · 128 · 384

``//`` is a floor division (⌊a ÷ b⌋), ``/`` an exact one (a fraction); the functions are those of
``FUNCTIONS``. Thousands separators are plain commas (the pages have always written them so); a
function's arguments are separated by ``,\\;`` (LaTeX) or ``, `` (text), never a bare comma before
three digits.
"""

from __future__ import annotations

import ast
import math
import numbers
import re
from collections.abc import Mapping
from statistics import median

from ..units import significant

NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
FUNCTIONS = {
    "floor": math.floor,
    "max": max,
    "ceil_div": lambda a, b: -(-a // b),
    "median": lambda *values: median(values),
    "ln": math.log,
}
GREEK = {
    name: "\\" + name
    for name in ("alpha", "beta", "gamma", "delta", "Delta", "Psi", "theta", "sigma", "lambda")
}
GREEK_TEXT = {"alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "Delta": "Δ", "Psi": "Ψ", "theta": "θ"}


def evaluate(expression: str, terms: Mapping[str, float]) -> float:
    """``expression`` computed from ``terms`` (names beyond the terms and FUNCTIONS refused)."""
    unknown = set(NAME.findall(expression)) - set(terms) - set(FUNCTIONS)
    if unknown:
        raise ValueError(f"expression names {sorted(unknown)} beyond its terms")
    return eval(expression, {"__builtins__": {}, **FUNCTIONS}, dict(terms))


def number(value: float) -> str:
    """A number as an equation writes it: an integer exactly with thousands separators
    (70,272), any other value to six significant digits but never fewer than one decimal, so
    that it never reads as a whole number (3.3616, 0.404449, 10,922.7, 15,123,456.5)."""
    if isinstance(value, numbers.Integral) or (math.isfinite(value) and float(value).is_integer()):
        return f"{int(value):,}"
    if not math.isfinite(value) or abs(value) < 1:
        return significant(value, 6)
    decimals = max(1, 6 - (int(math.log10(abs(value))) + 1))
    return f"{value:,.{decimals}f}".rstrip("0").rstrip(".")


def latex_symbol(name: str) -> str:
    """A term's name as LaTeX: b_head → b_{\\text{head}}, L_w → L_w, L_lin_sparse →
    L_{\\text{lin\\_sparse}}, alpha → \\alpha, untied → \\text{untied}."""
    if name in GREEK:
        return GREEK[name]
    base, _, sub = name.partition("_")
    base = GREEK.get(base, base if len(base) == 1 else rf"\text{{{base}}}")
    if not sub:
        return base
    sub = GREEK.get(sub, sub if len(sub) == 1 else rf"\text{{{sub}}}".replace("_", r"\_"))
    return f"{base}_{sub}" if len(sub) == 1 else f"{base}_{{{sub}}}"


# precedence: the higher binds tighter; an operand of lower precedence than its operator is
# parenthesised (and the right operand of − and ÷ at equal precedence)
_ADD, _MUL, _UNARY, _POW, _ATOM = 1, 2, 3, 4, 5
_BINARY = {ast.Add: (_ADD, "+"), ast.Sub: (_ADD, "−"), ast.Mult: (_MUL, "·"), ast.Pow: (_POW, "^")}


class _Writer:
    """Writes one parsed expression, in LaTeX or plain text, with names or their numbers."""

    def __init__(self, terms: Mapping[str, float], latex: bool, numbers: bool, symbols, labels):
        self.terms, self.latex, self.numbers = terms, latex, numbers
        self.symbols, self.labels = symbols, labels

    def write(self, node: ast.AST) -> tuple[str, int]:
        """(text, precedence) of ``node``."""
        if isinstance(node, ast.Expression):
            return self.write(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return number(node.value), _ATOM
        if isinstance(node, ast.Name):
            return self._name(node.id), _ATOM
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return ("-" if self.latex else "−") + self._operand(node.operand, _UNARY, False), _UNARY
        if isinstance(node, ast.BinOp):
            return self._binary(node)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            return self._call(node.func.id, [self.write(a)[0] for a in node.args]), _ATOM
        raise ValueError(f"cannot write {ast.dump(node)}")

    def _name(self, name: str) -> str:
        if not self.numbers:
            return self.symbols.get(name, latex_symbol(name)) if self.latex else GREEK_TEXT.get(name, name)
        value = number(self.terms[name])
        label = self.labels.get(name)
        if self.latex and label:  # the number with what it is under it
            return rf"\underbrace{{{value}}}_{{{label}}}"
        return value

    def _paren(self, text: str) -> str:
        return rf"\left({text}\right)" if self.latex else f"({text})"

    def _operand(self, node: ast.AST, prec: int, tight: bool) -> str:
        text, own = self.write(node)
        return self._paren(text) if own < prec or (tight and own == prec) else text

    def _binary(self, node: ast.BinOp) -> tuple[str, int]:
        op = type(node.op)
        if op in (ast.Div, ast.FloorDiv):
            if self.latex:
                top, bottom = self.write(node.left)[0], self.write(node.right)[0]
                frac = rf"\frac{{{top}}}{{{bottom}}}"
                return (rf"\left\lfloor {frac} \right\rfloor" if op is ast.FloorDiv else frac), _ATOM
            text = f"{self._operand(node.left, _MUL, False)} ÷ {self._operand(node.right, _MUL, True)}"
            return (f"⌊{text}⌋", _ATOM) if op is ast.FloorDiv else (text, _MUL)
        if op not in _BINARY:
            raise ValueError(f"cannot write the operator {op.__name__}")
        prec, sign = _BINARY[op]
        if op is ast.Pow:
            base = self._operand(node.left, _ATOM, False)
            exponent = self.write(node.right)[0]
            return (f"{base}^{{{exponent}}}" if self.latex else f"{base}^{self._wrap(node.right)}"), _POW
        left = self._operand(node.left, prec, False)
        right = self._operand(node.right, prec, op is ast.Sub)
        if self.latex:
            sign = {"·": r"\cdot", "−": "-"}.get(sign, sign)
        return f"{left} {sign} {right}", prec

    def _wrap(self, node: ast.AST) -> str:
        text, prec = self.write(node)
        return text if prec == _ATOM else f"({text})"

    def _call(self, name: str, args: list[str]) -> str:
        if self.latex:
            joined = r",\; ".join(args)
            if name == "floor":
                return rf"\left\lfloor {args[0]} \right\rfloor"
            if name == "ceil_div":
                return rf"\left\lceil \frac{{{args[0]}}}{{{args[1]}}} \right\rceil"
            if name == "ln":  # ln V, ln(32,000)
                return rf"\ln {args[0]}" if NAME.fullmatch(args[0]) else rf"\ln\left({args[0]}\right)"
            word = {"max": r"\max", "median": r"\operatorname{median}"}[name]
            return rf"{word}\left({joined}\right)"
        if name == "floor":
            return f"⌊{args[0]}⌋"
        if name == "ceil_div":
            return f"⌈{args[0]} ÷ {args[1]}⌉"
        return f"{name}({', '.join(args)})"


def render(
    expression: str,
    terms: Mapping[str, float],
    *,
    latex: bool,
    numbers: bool,
    symbols: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
) -> str:
    """``expression`` written out in LaTeX or plain text, with its names (``symbols``: a term's
    LaTeX where the default of ``latex_symbol`` would not do) or their numbers (``labels``: LaTeX
    set under a term's number, e.g. what the bytes are)."""
    tree = ast.parse(expression, mode="eval")
    return _Writer(terms, latex, numbers, symbols or {}, labels or {}).write(tree)[0]


LINE = 90  # of visible_width's characters, about 720 px: a page's main column at 1280 px wide
NEW_LINE = r" \\[0.4em] "  # KaTeX's line break in display mode, with room for fractions
SIDE_BY_SIDE = r" \qquad "


def _group(latex: str, i: int) -> tuple[str, int]:
    """The brace group opening at ``latex[i]`` (its content) and the index after it."""
    depth = 0
    for j in range(i, len(latex)):
        depth += {"{": 1, "}": -1}.get(latex[j], 0)
        if depth == 0:
            return latex[i + 1 : j], j + 1
    return latex[i + 1 :], len(latex)


def visible_width(latex: str) -> int:
    """About how wide ``latex`` shows, in characters (about 8 px each): commands and braces do
    not count, a symbol (``\\alpha``) one, an operator with its spaces three, a \\qquad four;
    a fraction the wider of its two lines, an underbrace's label nothing."""
    start = latex.find(r"\frac{")
    if start >= 0:
        top, end = _group(latex, start + len(r"\frac"))
        bottom, end = _group(latex, end)
        return (
            visible_width(latex[:start])
            + max(visible_width(top), visible_width(bottom))
            + visible_width(latex[end:])
        )
    latex = re.sub(r"_\{\\text\{[^{}]*\}\}", "", latex)  # \underbrace{…}_{\text{label}}
    spaces = 4 * latex.count(r"\qquad") + 2 * len(re.findall(r"\\quad(?![a-zA-Z])", latex))
    text = re.sub(r"\\(left|right|big|Big|,|;|!|quad|qquad)(?![a-zA-Z])", "", latex)
    text = re.sub(r"\\(text|operatorname)\{([^{}]*)\}", r"\2", text)
    operators = len(re.findall(r"\\cdot|[=+\-]", text))  # each with its space around it
    text = re.sub(r"\\[a-zA-Z]+", "x", text)
    return len(re.sub(r"[{}_^\s]", "", text)) + 2 * operators + spaces


def side_by_side(*equations: str) -> str:
    """Equations on one line when they fit it, else one below the other."""
    one_line = SIDE_BY_SIDE.join(equations)
    if any(NEW_LINE in eq for eq in equations) or visible_width(one_line) > LINE:
        return NEW_LINE.join(equations)
    return one_line


def _terms(side: str) -> list[str]:
    """``side`` cut before each + and − outside every bracket and brace (the first term
    without its sign)."""
    terms, depth, start, i = [], 0, 0, 0
    while i < len(side):
        if side.startswith(r"\left", i) or side[i] == "{":
            depth += 1
        elif side.startswith(r"\right", i) or side[i] == "}":
            depth -= 1
        elif depth == 0 and side.startswith((" + ", " - "), i):
            terms.append(side[start:i])
            start = i + 1
        i += 1
    return [*terms, side[start:]]


def wrapped(side: str, room: int = LINE) -> str:
    """``side`` over several lines, cut before a + or − outside brackets, when it is wider than
    ``room``; each line after the first indented and opening with its sign."""
    if visible_width(side) <= room:
        return side
    lines = [""]
    for term in _terms(side):
        if lines[-1] and visible_width(lines[-1] + " " + term) > room:
            lines.append(term)
        else:
            lines[-1] = f"{lines[-1]} {term}" if lines[-1] else term
    return (NEW_LINE + r"\qquad {}").join(lines)  # {}: the sign stays a binary one


def chain(left: str, symbols: str, numbers: str, value: str) -> str:
    """``left = symbols = numbers = value`` (sides equal to the one before written once; a left
    side ending in a relation, ``\\approx``, not followed by "="), broken before the numbers
    when it would not fit one line, and each side over several lines when it alone does not."""
    sides = [
        side
        for i, side in enumerate((symbols, numbers, value))
        if i == 0 or side != (symbols, numbers)[i - 1]
    ]
    if left:
        left += " " if left.endswith(RELATIONS) else " = "
    text = left + " = ".join(sides)
    if visible_width(text) > LINE and len(sides) == 3:
        first = left + wrapped(symbols, LINE - visible_width(left))
        # the numbers on the next line, after "\qquad = " (about 4 wide)
        return first + NEW_LINE + r"\qquad = " + wrapped(f"{numbers} = {value}", LINE - 4)
    return text


# a left side ending in a relation or a colon ("naive:") is not followed by "="
RELATIONS = (r"\approx", r"\le", r"\ge", ":")
