"""Training contrasts of the seed's 2017-vs-LLaMA table (Architecture comparison page): pairs of
runs that differ in one row of the table, everything else equal.
"""

from __future__ import annotations

from ..config import ModelConfig, recipe_2017, recipe_llama, seed_ffn_hidden
from ..errors import ExperimentError
from ..train.loop import TrainSettings
from ..units import Progress
from .registry import ExperimentKind, register
from .training import RunComparison, RunSpec, compare_runs, norm_position_specs, run_figures, run_tables

# kind → what it contrasts (the page's choices)
ABLATIONS = {
    "norm_position": "Post-LN vs Pre-LN (each without / with warmup)",
    "norm_type": "LayerNorm vs RMSNorm",
    "ffn": "ReLU 4d vs SwiGLU 8/3·d",
    "recipe": "whole 2017 recipe (warmup + linear decay) vs LLaMA (warmup + cosine)",
}


def ablation_specs(
    kind: str, cfg: ModelConfig, lr: float, warmup_steps: int, schedule: str = "cosine"
) -> list[RunSpec]:
    """Pairs from the seed's comparison table, everything else equal:
    ``norm_position`` (Post/Pre-LN × warmup off/on), ``recipe`` (2017 vs LLaMA, each with its
    schedule), ``ffn`` (ReLU 4d vs SwiGLU 8d/3: about equal parameters), ``norm_type``
    (LayerNorm vs RMSNorm)."""
    if kind == "norm_position":
        return norm_position_specs(cfg, lr, warmup_steps, schedule)
    if kind == "recipe":
        return [
            RunSpec("2017 recipe (warmup + linear decay)", recipe_2017(cfg), lr, warmup_steps, "linear"),
            RunSpec("LLaMA recipe (warmup + cosine)", recipe_llama(cfg), lr, warmup_steps, "cosine"),
        ]
    if kind == "ffn":
        d = cfg.d_model
        return [
            RunSpec(
                f"ReLU FFN 4d ({4 * d})",
                cfg.replace(ffn_type="relu", ffn_hidden=4 * d),
                lr,
                warmup_steps,
                schedule,
            ),
            RunSpec(
                f"SwiGLU FFN 8d/3 ({seed_ffn_hidden(d)})",
                cfg.replace(ffn_type="swiglu", ffn_hidden=seed_ffn_hidden(d)),
                lr,
                warmup_steps,
                schedule,
            ),
        ]
    if kind == "norm_type":
        return [
            RunSpec("LayerNorm", cfg.replace(norm_type="layernorm"), lr, warmup_steps, schedule),
            RunSpec("RMSNorm", cfg.replace(norm_type="rmsnorm"), lr, warmup_steps, schedule),
        ]
    raise ExperimentError(
        f"ablation kind={kind!r} must be one of 'norm_position', 'recipe', 'ffn', 'norm_type'"
    )


# The short runs behind the table: learning rate, warmup, sequence length and batch of each arm.
CONTRAST_SETTINGS = {"lr": 3e-3, "warmup_steps": 10, "seq_len": 64, "batch": 8}


def ablation_runs(
    kind: str, cfg: ModelConfig, settings: TrainSettings, *, progress: Progress | None = None
) -> RunComparison:
    """Train the two (or four) arms of one contrast (``settings`` as ``compare_runs``; its lr
    and warmup_steps set every arm's)."""
    specs = ablation_specs(kind, cfg, settings.lr, settings.warmup_steps)
    return compare_runs(specs, settings, progress=progress)


KIND = register(
    ExperimentKind(
        name="ablation",
        title="Training contrasts of the 2017-vs-LLaMA table",
        result_type=RunComparison,
        run=ablation_runs,
        tables=run_tables("ablation"),
        figures=run_figures("ablation"),
        panel="ablation",
        order=40,
    )
)
