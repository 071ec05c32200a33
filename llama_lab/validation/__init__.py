"""Predictions held against the world: public measurements (``measurements.json``, each with its
source and quoted line), LLaMA Lab's roofline bound and calibrated estimate for each, and the
efficiency parameters fitted on a declared half and reported on the other."""

from .efficiency import (
    Efficiency,
    Prediction,
    decode_tokens_per_s,
    prefill_seconds,
    train_tokens_per_s_per_gpu,
)
from .rows import KINDS, Row, load_rows
from .validate import fit, predict_row, results, summary, validate

__all__ = [
    "KINDS",
    "Efficiency",
    "Prediction",
    "Row",
    "decode_tokens_per_s",
    "fit",
    "load_rows",
    "predict_row",
    "prefill_seconds",
    "results",
    "summary",
    "train_tokens_per_s_per_gpu",
    "validate",
]
