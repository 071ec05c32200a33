"""Training a live model: token data, one timed step, schedules, divergence, the training loop,
what a run measures, and the budgets a live run must stay within."""

from .budgets import (
    CPU_FLOP_BUDGET,
    check_cpu_budget,
    check_sizes,
    guard,
    random_batch,
    training_bytes_needed,
)
from .data import TokenData, load_builtin, load_user_text, random_tokens
from .loop import TrainRun, TrainSettings, evaluate, iter_train, train
from .measure import LogitStats, SavedTensorMeter, layer_grad_norms, logit_stats, state_bytes
from .schedules import SCHEDULES, lr_at
from .step import StepTimes, Trainee, make_optimizer, next_token_loss, training_step

__all__ = [
    "CPU_FLOP_BUDGET",
    "LogitStats",
    "SCHEDULES",
    "SavedTensorMeter",
    "StepTimes",
    "TokenData",
    "TrainRun",
    "TrainSettings",
    "Trainee",
    "check_cpu_budget",
    "check_sizes",
    "evaluate",
    "guard",
    "iter_train",
    "layer_grad_norms",
    "load_builtin",
    "load_user_text",
    "logit_stats",
    "lr_at",
    "make_optimizer",
    "next_token_loss",
    "random_batch",
    "random_tokens",
    "state_bytes",
    "train",
    "training_bytes_needed",
    "training_step",
]
