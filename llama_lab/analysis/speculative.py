"""Speculative decoding's expected gain (Leviathan et al. 2023, "Fast Inference from
Transformers via Speculative Decoding", §3): a draft proposes γ tokens, the target checks them
in one step and keeps the longest prefix it agrees with plus one token of its own. With each
drafted token accepted independently with probability α, a target step yields

    E = (1 − α^(γ+1)) / (1 − α)      tokens (γ + 1 when α = 1),

and costs γ·c + 1 target-steps of time, c = a draft step's time over a target step's:

    speedup = E / (γ·c + 1).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ..errors import AnalysisError

MAX_GAMMA = 64


def _check(alpha: float, gamma: int, cost_ratio: float | None = None) -> None:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 <= alpha <= 1:
        raise AnalysisError(f"alpha={alpha!r} must be an acceptance rate between 0 and 1")
    if isinstance(gamma, bool) or not isinstance(gamma, int) or not 1 <= gamma <= MAX_GAMMA:
        raise AnalysisError(f"gamma={gamma!r} must be a draft length from 1 to {MAX_GAMMA}")
    if cost_ratio is not None and (
        isinstance(cost_ratio, bool)
        or not isinstance(cost_ratio, (int, float))
        or not math.isfinite(cost_ratio)
        or cost_ratio < 0
    ):
        raise AnalysisError(
            f"cost_ratio={cost_ratio!r} must be a finite number ≥ 0 (a draft "
            f"step's time over a target step's)"
        )


def expected_tokens_per_step(alpha: float, gamma: int) -> float:
    """E = (1 − α^(γ+1)) / (1 − α): tokens a target step yields (Leviathan et al., Eq. 1)."""
    _check(alpha, gamma)
    if alpha == 1:
        return float(gamma + 1)
    return (1 - alpha ** (gamma + 1)) / (1 - alpha)


def speedup(alpha: float, gamma: int, cost_ratio: float) -> float:
    """E / (γ·c + 1): the walltime improvement over decoding with the target alone."""
    _check(alpha, gamma, cost_ratio)
    return expected_tokens_per_step(alpha, gamma) / (gamma * cost_ratio + 1)


@dataclass(frozen=True)
class Speculation:
    alpha: float
    gamma: int
    cost_ratio: float
    expected_tokens_per_step: float
    speedup: float
    best_gamma: int  # the draft length with the largest speedup (1 … MAX_GAMMA)
    best_speedup: float
    worth_it: bool  # whether any draft length beats the target alone

    def to_dict(self) -> dict:
        return asdict(self)


def speculation(alpha: float, gamma: int, cost_ratio: float) -> Speculation:
    """``speculate``: E and the speedup at γ, and the best γ for this α and c."""
    _check(alpha, gamma, cost_ratio)
    gains = {g: speedup(alpha, g, cost_ratio) for g in range(1, MAX_GAMMA + 1)}
    best = max(gains, key=lambda g: (gains[g], -g))
    return Speculation(
        alpha=float(alpha),
        gamma=gamma,
        cost_ratio=float(cost_ratio),
        expected_tokens_per_step=expected_tokens_per_step(alpha, gamma),
        speedup=gains[gamma],
        best_gamma=best,
        best_speedup=gains[best],
        worth_it=gains[best] > 1,
    )
