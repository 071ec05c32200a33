"""How values from a file or a link appear in messages: cut, escaped, counted — and the one
integer check the readers share."""

from __future__ import annotations

import difflib
from typing import Any, Iterable

from ..errors import ConfigError

MAX_NOTES = 5  # notes and key names a message lists one by one; the rest are counted
MAX_SHOWN = 60  # characters of one value or key name in a message


def cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def shown(value: Any, limit: int = MAX_SHOWN) -> str:
    """``value`` as a message shows it: its repr (controls and lone surrogates escaped), cut to
    ``limit`` characters with "…"; a huge integer by its size, never by its digits."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return f"<an integer of about {int(value.bit_length() * 0.30103) + 1:,} digits>"
    if isinstance(value, str):
        return repr(value[:limit]) + ("…" if len(value) > limit else "")
    return cut(repr(value), limit)


def name_keys(keys, limit: int = MAX_NOTES) -> str:
    """The first ``limit`` key names (sorted, each cut), then how many more."""
    keys = sorted(keys, key=str)
    text = ", ".join(shown(key) for key in keys[:limit])
    return text + (f" and {len(keys) - limit:,} more" if len(keys) > limit else "")


def cap_notes(notes: list[str], limit: int = MAX_NOTES) -> list[str]:
    """At most ``limit`` notes (each cut to 300 characters), then one summary of the rest."""
    kept = [cut(note, 300) for note in notes[:limit]]
    if len(notes) > limit:
        kept.append(f"… and {len(notes) - limit:,} more notes")
    return kept


def check_int(name: str, value: Any, low: int, high: int) -> None:
    """``value`` is an integer in [low, high], else a ConfigError naming ``name`` and the rule
    (ModelConfig's fields and the counts the reader computes with)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name}={shown(value)} must be an integer", field=name)
    if value < low:
        raise ConfigError(f"{name}={shown(value)} must be at least {low}", field=name)
    if value > high:
        raise ConfigError(
            f"{name}={shown(value)} exceeds the upper bound {high:,} (beyond any "
            f"published model; probably a typo)",
            field=name,
        )


def known_names(unknown: Any, known: Iterable[str], what: str = "fields") -> str:
    """What to say after an unknown name: the closest known ones ("did you mean 'n_heads'?"),
    else the known ones, cut to a readable length."""
    close = (
        difflib.get_close_matches(unknown, list(known), n=3, cutoff=0.7) if isinstance(unknown, str) else []
    )
    if close:
        return "did you mean " + " or ".join(map(repr, close)) + "?"
    return f"known {what}: {cut(', '.join(sorted(known)), 420)}"
