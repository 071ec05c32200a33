"""How a page states a context answer ("the longest context that fits"): never past the model's
own context length without saying so, and never the search's upper end as if it were a fit."""

from __future__ import annotations

from ..config import LIMITS, ModelConfig


def capped_context(fits: int, cfg: ModelConfig) -> tuple[int, str]:
    """(the context to show, what to say about it): memory's answer ``fits`` up to the model's
    max_seq_len; past it the model's limit, with memory's figure beside it ("" when nothing needs
    saying)."""
    searched = fits == LIMITS["max_seq_len"]  # where the searches stop (2²⁴ tokens)
    memory = (
        f"memory holds at least {fits:,} (the search stops at 2²⁴)"
        if searched
        else f"memory alone holds {fits:,}"
    )
    if fits > cfg.max_seq_len:
        return (
            cfg.max_seq_len,
            f"capped at the model's context length (max_seq_len {cfg.max_seq_len:,}); {memory}",
        )
    return fits, ""


def context_text(fits: int, cfg: ModelConfig) -> str:
    """``capped_context`` in one phrase: "128 (capped at …)" or "4,096"."""
    shown, note = capped_context(fits, cfg)
    return f"{shown:,}" + (f" ({note})" if note else "")
