"""Learning-rate schedules: linear warmup, then constant, cosine or linear decay."""

from __future__ import annotations

import math

from ..errors import ExperimentError

SCHEDULES = ("constant", "cosine", "linear")


def lr_at(
    step: int,
    *,
    base_lr: float,
    warmup_steps: int,
    total_steps: int,
    schedule: str,
    min_lr_ratio: float = 0.1,
) -> float:
    """Learning rate of update ``step`` (0-based): linear warmup to base_lr over warmup_steps
    updates, then constant, or a cosine / linear decay reaching min_lr_ratio·base_lr at the
    last update."""
    if schedule not in SCHEDULES:
        raise ExperimentError(f"schedule={schedule!r} must be one of {', '.join(SCHEDULES)}")
    if step < warmup_steps:
        return base_lr * (step + 1) / warmup_steps
    if schedule == "constant":
        return base_lr
    decay_span = max(1, total_steps - 1 - warmup_steps)
    progress = min(1.0, (step - warmup_steps) / decay_span)  # 0 → 1 over the decay
    if schedule == "cosine":
        coeff = 0.5 * (1 + math.cos(math.pi * progress))
    else:
        coeff = 1 - progress
    min_lr = min_lr_ratio * base_lr
    return min_lr + (base_lr - min_lr) * coeff
