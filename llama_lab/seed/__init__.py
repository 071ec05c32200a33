"""The seed tutorial, checked: its numeric claims recomputed with verdicts (``claims``) and its
2017-vs-LLaMA table evaluated on any config (``comparison``)."""

from .claims import (
    SEED_SOURCE,
    WARMUP_QUOTE,
    WARMUP_QUOTE_EN,
    Claim,
    checked_claims,
    claims_frame,
    initial_loss,
    seed_claims,
    warmup_claim,
)
from .comparison import ArchitectureComparison, ComparisonRow, architecture_comparison

__all__ = [
    "SEED_SOURCE",
    "ArchitectureComparison",
    "Claim",
    "ComparisonRow",
    "architecture_comparison",
    "checked_claims",
    "claims_frame",
    "initial_loss",
    "seed_claims",
    "WARMUP_QUOTE",
    "WARMUP_QUOTE_EN",
    "warmup_claim",
]
