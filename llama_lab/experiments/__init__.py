"""Live experiments: run the model for real and measure what ``analysis`` predicts. One module
per experiment kind, each registering an ``ExperimentKind`` (``registry``): gradient norms
Post-LN vs Pre-LN, the depth sweep, training runs, the architecture table's training
contrasts, the live pass and KV-cache decoding. Every module in this package is imported here,
so a new kind only needs its own file.

Everything runs on the GPU when there is one (CUDA, then Apple MPS) and the CPU otherwise.
Every refusal (no such device, a run that will not fit in memory, bad sizes) raises
``ExperimentError`` with the figures; nothing is allocated before the memory guard has passed.
"""

import importlib
import pkgutil

from .ablation import ABLATIONS, CONTRAST_SETTINGS, ablation_runs, ablation_specs
from .decode import DecodeBench, DecodeRow, check_decode_budget, context_choices, decode_benchmark
from .depth import (
    DEPTH_CHOICES,
    WIDTH_CHOICES,
    DepthSweep,
    check_depth_budget,
    depth_sweep,
    loglog_fit,
    loglog_slope,
    sqrt_reference,
    sweep_config,
)
from .gradient_norms import (
    RANDOM_TOKENS,
    GradNormComparison,
    GradNorms,
    GradNormSeeds,
    gradnorms,
    gradnorms_over_seeds,
    measure_grad_norms,
)
from .live import LivePass, LiveSettings, bench, live_pass
from .registry import KINDS, ExperimentEntry, ExperimentKind, experiment_state_key, get_kind
from .seeds import DEFAULT_SEEDS, MAX_SEEDS, seed_list
from .training import (
    RunComparison,
    RunSpec,
    SeedRuns,
    compare_runs,
    compare_runs_over_seeds,
    norm_position_specs,
)
from .warmup import WARMUP_DEFAULTS, WarmupContrast, warmup_contrast, warmup_specs

for _module in pkgutil.iter_modules(__path__):  # registers every kind, in any file
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "ABLATIONS",
    "CONTRAST_SETTINGS",
    "DEPTH_CHOICES",
    "DecodeBench",
    "WIDTH_CHOICES",
    "DecodeRow",
    "DepthSweep",
    "ExperimentEntry",
    "ExperimentKind",
    "WARMUP_DEFAULTS",
    "WarmupContrast",
    "warmup_contrast",
    "warmup_specs",
    "DEFAULT_SEEDS",
    "MAX_SEEDS",
    "RANDOM_TOKENS",
    "GradNormSeeds",
    "SeedRuns",
    "compare_runs_over_seeds",
    "gradnorms_over_seeds",
    "seed_list",
    "sqrt_reference",
    "sweep_config",
    "GradNormComparison",
    "GradNorms",
    "KINDS",
    "LivePass",
    "LiveSettings",
    "RunComparison",
    "RunSpec",
    "ablation_runs",
    "ablation_specs",
    "bench",
    "check_decode_budget",
    "context_choices",
    "check_depth_budget",
    "compare_runs",
    "decode_benchmark",
    "depth_sweep",
    "experiment_state_key",
    "get_kind",
    "gradnorms",
    "live_pass",
    "loglog_fit",
    "loglog_slope",
    "measure_grad_norms",
    "norm_position_specs",
]
