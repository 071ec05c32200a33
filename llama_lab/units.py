"""Numbers for people: SI prefixes, binary byte units, parameter-count suffixes, and plain
numbers in tables. One copy, used by the CLI table, error messages, figures, pages and the
report.

One rule for every unit family: a number is written in the largest unit it reaches once
rounded to 3 significant digits (``7.15 GFLOP``, ``6.74 bn``, ``1.5 KiB``), with 3 significant
digits; from 1,000 of a unit on — only the binary units leave room for that, 1000–1023 of a
unit, and the largest unit of a family, past 999 — it is a whole number with thousands
separators (``1,020 GiB``, ``1,024 YiB``, ``40,100 YFLOP``). Never scientific notation. "B" is a
byte, never a billion: parameter counts say k, M, bn, tn.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import re
from typing import Any, Callable, Sequence

SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def significant(x: float, digits: int = 3) -> str:
    """``x`` to ``digits`` significant digits in fixed notation, trailing zeros dropped
    (1.50 → '1.5'); from 1,000 on a whole number with thousands separators (1020.4 →
    '1,020'); NaN → '—', infinities → '∞' / '−∞'."""
    x = float(x)
    if math.isnan(x):
        return "—"
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    rounded = float(f"{x:.{digits}g}")
    if abs(rounded) >= 1000:
        return f"{x:,.0f}"
    if rounded == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(rounded))))
    text = f"{x:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _scaled(n: float, units: Sequence[tuple[float, str]], small: Callable[[float], str]) -> str:
    """``n`` in the largest unit (factor, suffix; largest first) it reaches once rounded to 3
    significant digits, written by ``significant``; ``small`` formats what stays below the
    smallest unit."""
    for factor, suffix in units:
        if abs(float(f"{n / factor:.3g}")) >= 1:
            return f"{significant(n / factor)} {suffix}"
    return small(n)


# A long run's progress callback: (fraction done, what is running now). Runs call it at least
# once per step: the app's callback is also where a stopped run is interrupted.
Progress = Callable[[float, str], None]


def sub_progress(progress: Progress | None, start: float, end: float, prefix: str) -> Progress | None:
    """The part [start, end] of ``progress`` for one piece of a longer run, its texts behind
    ``prefix`` ("run 2/4 (Pre-LN): step 37/200, loss 3.1"); None stays None."""
    if progress is None:
        return None

    def part(fraction: float, text: str) -> None:
        progress(start + (end - start) * fraction, f"{prefix}: {text}" if prefix else text)

    return part


SI_PREFIXES = (
    (1e24, "Y"),
    (1e21, "Z"),
    (1e18, "E"),
    (1e15, "P"),
    (1e12, "T"),
    (1e9, "G"),
    (1e6, "M"),
    (1e3, "k"),
)
BINARY_UNITS = (
    (2**80, "YiB"),
    (2**70, "ZiB"),
    (2**60, "EiB"),
    (2**50, "PiB"),
    (2**40, "TiB"),
    (2**30, "GiB"),
    (2**20, "MiB"),
    (2**10, "KiB"),
)
PARAM_SUFFIXES = ((1e12, "tn"), (1e9, "bn"), (1e6, "M"), (1e3, "k"))


def human_count(n: float, unit: str = "") -> str:
    """SI prefixes up to yotta: 1234567 → '1.23 M'; 7.15e9 FLOP → human_count(x, 'FLOP') =
    '7.15 GFLOP'; past 999 Y, a whole number of Y ('40,100 YFLOP')."""
    text = _scaled(n, SI_PREFIXES, significant)
    if not unit:
        return text
    return text + unit if text[-1].isalpha() else f"{text} {unit}"


def human_params(n: float) -> str:
    """Parameter counts: 6738415616 → '6.74 bn', 405853388800 → '406 bn', 1.6e15 → '1,600 tn';
    below 1,000 the count itself ('999')."""
    return _scaled(n, PARAM_SUFFIXES, significant)


def human_bytes(n: float | None) -> str:
    """Binary units up to YiB: 1536 → '1.5 KiB', 1020 GiB → '1,020 GiB'; None → '—'."""
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "—"
    return _scaled(n, BINARY_UNITS, lambda b: f"{significant(b)} B")


def human_number(x: Any, digits: int = 4) -> str:
    """A number in a table: an integer exactly, with thousands separators (7,146,569,728, even
    past int64); a float to ``digits`` significant digits (``significant``: 5.545, 0.01234,
    12,346), as m×10ⁿ below 10⁻⁶ or from 10¹⁵ on; None and NaN → '—'."""
    if x is None:
        return "—"
    if isinstance(x, numbers.Integral):
        return f"{int(x):,}"
    x = float(x)
    if math.isfinite(x) and x != 0 and not 1e-6 <= abs(x) < 1e15:
        mantissa, exponent = f"{x:.{digits - 1}e}".split("e")
        mantissa = mantissa.rstrip("0").rstrip(".")
        return f"{mantissa}×10{str(int(exponent)).translate(SUPERSCRIPT)}"
    return significant(x, digits)


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
    return {f.name: plain(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.name not in exclude}


# ---- untrusted text ------------------------------------------------------------------------------
# Every ASCII punctuation character may be backslash-escaped in CommonMark; escaping them all
# makes a user's string render as itself: no links, images, emphasis, HTML, `:color[…]`
# directives or $math$. GFM's autolink literals (http://…, www.…, user@host) still fire on the
# escaped text, as a real browser shows, so an invisible WORD JOINER (U+2060) breaks each
# trigger: after every ":", after "www" and after "@".
_MARKDOWN_SPECIAL = frozenset("\\`*_{}[]()<>#+-.!|~$:&=\"'/,;?@^%")
_JOINER = "\u2060"
_AUTOLINK_TRIGGER = re.compile(r"(?i)(www)(?=\\\.)")
_CONTROLS = frozenset(
    [
        *map(chr, range(0x00, 0x09)),
        *map(chr, range(0x0B, 0x20)),
        "\x7f",
        *map(chr, range(0x80, 0xA0)),
        *map(chr, range(0x202A, 0x202F)),
        *map(chr, range(0x2066, 0x206A)),
    ]
)


def strip_control(text: Any) -> str:
    """``str(text)`` without control characters (tab and newline kept), lone surrogates
    replaced by "?": safe to print on a terminal or put in a file."""
    text = str(text).encode("utf-8", "replace").decode("utf-8")
    return "".join(ch for ch in text if ch not in _CONTROLS)


def escape_markdown(text: Any) -> str:
    """``text`` as Markdown that renders literally (st.markdown, st.error, a .md report):
    controls stripped, every Markdown-significant character backslash-escaped, autolink
    triggers broken by an invisible joiner, newlines kept as line breaks."""
    escaped = "".join(
        "\\" + ch + (_JOINER if ch in ":@" else "") if ch in _MARKDOWN_SPECIAL else ch
        for ch in strip_control(text)
    )
    return _AUTOLINK_TRIGGER.sub(r"\1" + _JOINER, escaped)


def json_line(obj: Any) -> str:
    """One line of strict JSON: NaN and ±inf (which JSON lacks) become null, and each one is
    named with its reason under "non_finite" ({"mfu": "was nan: …"})."""
    found: dict[str, str] = {}

    def clean(value: Any, path: str) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            found[path] = f"was {value}: not a number JSON can hold (see the text output)"
            return None
        if isinstance(value, dict):
            return {k: clean(v, f"{path}.{k}" if path else str(k)) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(v, f"{path}[{i}]") for i, v in enumerate(value)]
        return value

    cleaned = clean(obj, "")
    if found and isinstance(cleaned, dict):
        cleaned["non_finite"] = found
    return json.dumps(cleaned, allow_nan=False)


def plural(count: int, word: str, many: str | None = None) -> str:
    """``count`` and ``word``, plural unless it is one: "1 training step", "2 training steps";
    ``many`` is an irregular plural ("1 entry", "2 entries")."""
    return f"{count:,} {word if count == 1 else many or word + 's'}"


def each_of(count: int, word: str, many: str | None = None) -> str:
    """ "each of the 4 layers", or "the one layer" when there is one."""
    return f"the one {word}" if count == 1 else f"each of the {count:,} {many or word + 's'}"
