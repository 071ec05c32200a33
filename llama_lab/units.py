"""Numbers for people: SI prefixes, binary byte units, parameter-count suffixes. One copy,
used by the CLI table, error messages, figures and pages."""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Sequence


def _scaled(n: float, units: Sequence[tuple[float, str]], small: str) -> str:
    """``n`` in the largest unit (factor, suffix; largest first) it reaches once rounded to 3
    significant digits; ``small`` formats what stays below the smallest unit; past 999 of the
    largest unit, scientific notation."""
    largest_factor, largest_suffix = units[0]
    if abs(float(f"{n / largest_factor:.3g}")) >= 1000:
        return f"{n:.3g}"
    for factor, suffix in units:
        if abs(float(f"{n / factor:.3g}")) >= 1:
            return f"{n / factor:.3g} {suffix}"
    return small.format(n)


# A long run's progress callback: (fraction done, what is running now).
Progress = Callable[[float, str], None]


SI_PREFIXES = ((1e24, "Y"), (1e21, "Z"), (1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"),
               (1e6, "M"), (1e3, "k"))
BINARY_UNITS = ((2**80, "YiB"), (2**70, "ZiB"), (2**60, "EiB"), (2**50, "PiB"), (2**40, "TiB"),
                (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"))
PARAM_SUFFIXES = ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k"))


def human_count(n: float, unit: str = "") -> str:
    """SI prefixes up to yotta: 1234567 → '1.23 M'; 7.15e9 FLOP → human_count(x, 'FLOP') =
    '7.15 GFLOP'; past 999 Y, scientific ('1.23e+29 FLOP')."""
    text = _scaled(n, SI_PREFIXES, "{:.4g}")
    if not unit:
        return text
    return text + unit if text[-1].isalpha() else f"{text} {unit}"


def human_params(n: float) -> str:
    """Parameter counts the way model names say them: 6738415616 → '6.74 B' (past 999 T,
    scientific)."""
    return _scaled(n, PARAM_SUFFIXES, "{:,}")


def human_bytes(n: float | None) -> str:
    """Binary units up to YiB: 1536 → '1.5 KiB'; None → '—'."""
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "—"
    text = _scaled(n, BINARY_UNITS, "{:,.4g} B")
    return text if text.endswith("B") else f"{text} B"


def json_float(x: float | None) -> float | None:
    """JSON has no NaN/inf: a diverged number is reported as null."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def plain(value: Any) -> Any:
    """A JSON-ready copy of a result: dataclasses field by field (or their own ``to_dict``),
    floats through ``json_float``, tuples as lists, mappings and lists element by element."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        to_dict = getattr(value, "to_dict", None)
        return to_dict() if to_dict is not None else plain_fields(value)
    if isinstance(value, float):
        return json_float(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def plain_fields(obj: Any, exclude: Sequence[str] = ()) -> dict:
    """``plain`` of every field of the dataclass ``obj`` but ``exclude``: a result's ``to_dict``
    derived from its fields, never listed by hand."""
    return {f.name: plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)
            if f.name not in exclude}


def settings_from(cls: type, options: dict, what: str) -> Any:
    """``cls(**options)`` for a settings dataclass; an unknown name is a TypeError that names
    the known ones (as a misspelt keyword argument would)."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise TypeError(f"unknown {what} option(s) {', '.join(unknown)}; known: "
                        f"{', '.join(sorted(known))}")
    return cls(**options)


# ---- untrusted text ------------------------------------------------------------------------------
# Every ASCII punctuation character may be backslash-escaped in CommonMark; escaping them all
# makes a user's string render as itself: no links, images, emphasis, HTML, `:color[…]`
# directives or $math$. A "://" is broken up too, so GFM's autolink of bare URLs does not fire.
_MARKDOWN_SPECIAL = frozenset("\\`*_{}[]()<>#+-.!|~$:&=\"'/,;?@^%")
# C0 and C1 controls (but tab and newline), DEL, and the bidirectional overrides that can make
# a terminal or a page show text in another order than it is.
_CONTROLS = frozenset([*map(chr, range(0x00, 0x09)), *map(chr, range(0x0B, 0x20)), "\x7f",
                       *map(chr, range(0x80, 0xA0)), *map(chr, range(0x202A, 0x202F)),
                       *map(chr, range(0x2066, 0x206A))])


def strip_control(text: Any) -> str:
    """``str(text)`` without control characters (tab and newline kept), lone surrogates
    replaced by "?": safe to print on a terminal or put in a file."""
    text = str(text).encode("utf-8", "replace").decode("utf-8")
    return "".join(ch for ch in text if ch not in _CONTROLS)


def escape_markdown(text: Any) -> str:
    """``text`` as Markdown that renders literally (st.markdown, st.error, a .md report):
    controls stripped, every Markdown-significant character backslash-escaped, newlines kept
    as line breaks."""
    return "".join("\\" + ch if ch in _MARKDOWN_SPECIAL else ch for ch in strip_control(text))
