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
