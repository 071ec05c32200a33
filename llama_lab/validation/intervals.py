"""The interval of a calibrated estimate: where a measurement is expected to fall, at a stated
level, and how often the held-out rows fall there.

A row's ratio is r = ln(measured / estimate) of a rate or an amount (tokens/s, bytes, tokens); a
time's is the rate's, ln(estimate / measured). A kind's interval is the ratio's range over the
``fit`` half's rows with the ``floor(n · (1 − level) / 2)`` lowest and as many highest left out
(equal tails: two-sided, and it holds ≥ level of those rows by construction), widened to hold 0
(the estimate itself). Each fit row's ratio is taken under the parameters fitted without it
(leave one out, ``validate.cross_validated``: what the calibration says of a row it has not
seen — a row's error under parameters fitted to it is smaller than a new run's). It is built on
the fit half only, so the held-out half measures it: its ``held_out_coverage`` is the share of
the kind's predicted held-out rows inside.

A kind's own fit rows are used where their extremes could hold a new row at the level — the
chance a new row falls between n rows' extremes is (n − 1) / (n + 1), ≥ level from n = 9 at 0.8;
a kind with fewer takes the pool of every kind's fit rows (the lab's spread over all it predicts:
this kind's own is not yet known).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .validate import Result

INTERVAL_LEVEL = 0.8  # the share of measurements the interval is built to hold


def log_ratio(measured: float, estimate: float, metric: str) -> float:
    """ln(measured / estimate); for a time, of the rate (ln(estimate / measured))."""
    ratio = math.log(measured / estimate)
    return -ratio if metric == "seconds" else ratio


def own_rows_suffice(n: int, level: float = INTERVAL_LEVEL) -> bool:
    """Whether n rows' extremes hold a new row at ``level``: (n − 1) / (n + 1) ≥ level."""
    return n - 1 >= level * (n + 1)


def equal_tails(ratios: Iterable[float], level: float = INTERVAL_LEVEL) -> tuple[float, float]:
    """The range of ``ratios`` less the k lowest and k highest, k = floor(n · (1 − level) / 2)
    (so n − 2k ≥ level · n stay inside), widened to hold 0; (0, 0) for none."""
    ordered = sorted(ratios)
    if not ordered:
        return 0.0, 0.0
    k = math.floor(round(len(ordered) * (1 - level), 9) / 2)  # round: 10 × 0.2 is 1.99…96
    return min(0.0, ordered[k]), max(0.0, ordered[-1 - k])


@dataclass(frozen=True)
class Interval:
    """A kind's interval: its ends as ``log_ratio``s, low ≤ 0 ≤ high."""

    kind: str
    low: float
    high: float
    built_from: str  # which rows, in words
    level: float = INTERVAL_LEVEL

    @property
    def ratios(self) -> list[float]:
        """[low, high] as measured / estimate (of a rate or an amount)."""
        return [math.exp(self.low), math.exp(self.high)]

    def around(self, estimate: float) -> tuple[float, float]:
        """(low, high) of what would be measured, for an estimate of a rate or an amount."""
        low, high = self.ratios
        return estimate * low, estimate * high

    def holds(self, ratio: float) -> bool:
        """Whether a row of ``log_ratio`` = ``ratio`` is inside (at the estimate: inside)."""
        return self.low <= ratio <= self.high


def fit_ratios(
    found: Iterable[Result], kind: str | None = None, unseen: Mapping[str, float] | None = None
) -> list[float]:
    """The ``fit`` half's ratios of ``kind``'s predicted rows (None: of every kind): each row's
    ``unseen`` ratio where given (under the parameters fitted without it), else its own."""
    return [
        unseen[r.row.id] if unseen is not None and r.row.id in unseen else r.log_ratio
        for r in found
        if r.log_ratio is not None and r.row.half == "fit" and kind in (None, r.row.kind)
    ]


def kind_interval(
    found: list[Result],
    kind: str,
    level: float = INTERVAL_LEVEL,
    unseen: Mapping[str, float] | None = None,
) -> Interval:
    """``kind``'s interval from ``found``'s fit half (its rows' ``unseen`` ratios where given,
    ``validate.cross_validated``): its own rows, or the pool of every kind's."""
    own = fit_ratios(found, kind, unseen)
    which = "rows, each left out of the fit" if unseen is not None else "rows"
    if own_rows_suffice(len(own), level):
        ratios, built_from = own, f"the fit half's {len(own)} {kind} {which}"
    else:
        ratios = fit_ratios(found, None, unseen)
        built_from = (
            f"the fit half's {len(ratios)} {which} of every kind, pooled ({kind} has {len(own)}: "
            f"fewer than its own interval needs)"
        )
    return Interval(kind, *equal_tails(ratios, level), built_from, level)


def held_out_coverage(found: list[Result], interval: Interval) -> float | None:
    """The share of the interval's kind's predicted held-out rows inside it (None: none)."""
    held = [
        r.log_ratio
        for r in found
        if r.log_ratio is not None and r.row.half == "held_out" and r.row.kind == interval.kind
    ]
    return sum(interval.holds(ratio) for ratio in held) / len(held) if held else None
