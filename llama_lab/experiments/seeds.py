"""Results over several seeds: which seeds a count means, and the median and min–max band of
per-seed lists (a run that stopped early, or a value that is not finite, leaves that seed out
of that position)."""

from __future__ import annotations

import math
import statistics
from typing import Callable, Sequence

from ..errors import ExperimentError
from ..train.budgets import MAX_SEED, MAX_SEEDS, check_count
from ..units import sub_progress

DEFAULT_SEEDS = 5  # the default count of the small default sizes


def seed_list(first: int, count: int) -> list[int]:
    """``count`` consecutive seeds from ``first`` (both checked: ExperimentError)."""
    check_count("seeds", count, 1, MAX_SEEDS)
    check_count("seed", first, 0, MAX_SEED - count + 1)
    return list(range(first, first + count))


def _finite(values) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]


def elementwise(
    lists: Sequence[Sequence[float | None]], reduce: Callable[[list[float]], float]
) -> list[float | None]:
    """``reduce`` of each position over the lists that reach it with a finite value (None
    where none does)."""
    n = max((len(values) for values in lists), default=0)
    out = []
    for i in range(n):
        values = _finite(values[i] for values in lists if i < len(values))
        out.append(reduce(values) if values else None)
    return out


def median_list(lists: Sequence[Sequence[float | None]]) -> list[float | None]:
    return elementwise(lists, statistics.median)


def band(lists: Sequence[Sequence[float | None]]) -> tuple[list, list]:
    """(minimum, maximum) at each position."""
    return elementwise(lists, min), elementwise(lists, max)


def median_of(values: Sequence[float | None]) -> float | None:
    finite = _finite(values)
    return statistics.median(finite) if finite else None


def over_seeds(seeds: Sequence[int], progress, measure: Callable) -> tuple[list[int], list]:
    """(the seeds, ``measure(seed, part)`` for each), where ``part`` is the seed's share of
    ``progress``; the seeds must be one or more different integers (ExperimentError)."""
    seeds = [int(seed) for seed in seeds]
    if not seeds or len(set(seeds)) != len(seeds):
        raise ExperimentError(f"seeds={seeds} must be one or more different seeds")
    results, n = [], len(seeds)
    for i, seed in enumerate(seeds):
        results.append(
            measure(seed, sub_progress(progress, i / n, (i + 1) / n, f"seed {seed} ({i + 1}/{n})"))
        )
    if progress:
        progress(1.0, "done")
    return seeds, results
