"""Warmup, measured: Post-LN without warmup, Post-LN with warmup and Pre-LN without warmup,
trained on the same batches over several seeds, and whether the seed tutorial's row "warmup:
Post-LN 必需 / Pre-LN 可选" holds for them (Xiong et al. 2020, §3: Post-LN needs the warmup
stage, Pre-LN trains without it). The verdict is computed from the runs, seed by seed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence, TypedDict

import pandas as pd

from ..config import ModelConfig, arrangement
from ..figures.common import Figure, Table
from ..train.data import TokenData
from ..train.loop import TrainSettings
from ..units import Progress, plain, plural, significant
from .registry import ExperimentKind, register
from .seeds import median_of
from .training import RunSpec, SeedRuns, compare_runs_over_seeds, run_figures, run_tables

ARMS = ("post_no_warmup", "post_warmup", "pre_no_warmup")
# A paired (same seed, same batches) loss difference counts only beyond this many nats, and a
# statement about the arms holds when it holds in at least this share of the seeds.
MARGIN_NATS = 0.02
MAJORITY = 0.8


class WarmupDefaults(TypedDict):
    d_model: int
    n_layers: int
    steps: int
    lr: float
    warmup_steps: int
    seq_len: int
    batch: int


# Where the contrast shows at the live size on the built-in text (measured: see the README):
# Post-LN without warmup stays at the unigram loss, with warmup it learns, Pre-LN learns faster.
WARMUP_DEFAULTS = WarmupDefaults(
    d_model=64, n_layers=6, steps=300, lr=2e-3, warmup_steps=60, seq_len=32, batch=8
)


def warmup_specs(cfg: ModelConfig, lr: float, warmup_steps: int, schedule: str = "cosine") -> list[RunSpec]:
    return [
        RunSpec("Post-LN, no warmup", arrangement(cfg, "post"), lr, 0, schedule),
        RunSpec(f"Post-LN, warmup {warmup_steps}", arrangement(cfg, "post"), lr, warmup_steps, schedule),
        RunSpec("Pre-LN, no warmup", arrangement(cfg, "pre"), lr, 0, schedule),
    ]


def _final(run) -> float:
    """A run's final validation loss; a diverged run counts as infinitely bad."""
    loss = run.final_val_loss
    return math.inf if run.diverged or loss is None or not math.isfinite(loss) else loss


@dataclass(frozen=True)
class WarmupContrast:
    runs: SeedRuns
    lr: float
    warmup_steps: int
    steps: int

    def finals(self) -> dict[str, list[float]]:
        """arm → final validation loss per seed (inf: diverged)."""
        by_label = self.runs.by_label()
        return {arm: [_final(run) for run in runs] for arm, runs in zip(ARMS, by_label.values())}

    def verdict(self) -> dict[str, Any]:
        """Post-LN needs warmup: without it, a seed ends worse by more than MARGIN_NATS than
        with it (or diverges where warmup did not), in at least MAJORITY of the seeds. Pre-LN
        does not: without warmup it ends no worse than Post-LN with warmup (+ MARGIN_NATS) and
        does not diverge, in at least MAJORITY of the seeds. The row holds when both do."""
        f = self.finals()
        n = len(self.runs.seeds)
        post_worse = [a - b > MARGIN_NATS for a, b in zip(f["post_no_warmup"], f["post_warmup"])]
        pre_fine = [
            math.isfinite(p) and p <= w + MARGIN_NATS for p, w in zip(f["pre_no_warmup"], f["post_warmup"])
        ]
        needed = math.ceil(MAJORITY * n)
        gains = [a - b for a, b in zip(f["post_no_warmup"], f["post_warmup"])]
        return {
            "seeds": n,
            "needed": needed,
            "post_needs_warmup_seeds": sum(post_worse),
            "pre_fine_seeds": sum(pre_fine),
            "post_needs_warmup": sum(post_worse) >= needed,
            "pre_without_warmup_fine": sum(pre_fine) >= needed,
            "holds": sum(post_worse) >= needed and sum(pre_fine) >= needed,
            "warmup_gain_nats_median": median_of(gains) if any(map(math.isfinite, gains)) else None,
            "diverged": {arm: sum(map(math.isinf, values)) for arm, values in f.items()},
            "final_val_loss_median": {arm: median_of(v) for arm, v in f.items()},
        }

    def verdict_text(self) -> str:
        """The verdict in one computed sentence."""
        v = self.verdict()
        med = {
            arm: (significant(x, 4) if x is not None else "— (every seed diverged)")
            for arm, x in v["final_val_loss_median"].items()
        }
        div = (
            ", ".join(f"{arm.replace('_', ' ')} {k}/{v['seeds']}" for arm, k in v["diverged"].items() if k)
            or "none"
        )
        cfg = next(iter(self.runs.comparisons[0].runs.values())).config
        return (
            f"With {cfg['norm_type']}, {cfg['init']} init, d={cfg['d_model']}, "
            f"{plural(cfg['n_layers'], 'block')}, at lr {self.lr:g} over {plural(self.steps, 'step')} "
            f"({plural(v['seeds'], 'seed')}), the final "
            f"validation loss (median) is {med['post_no_warmup']} for Post-LN without "
            f"warmup, {med['post_warmup']} with {plural(self.warmup_steps, 'warmup step')} and "
            f"{med['pre_no_warmup']} for Pre-LN without warmup; diverged: {div}. Warmup "
            f"helped Post-LN by more than {MARGIN_NATS} nats in "
            f"{v['post_needs_warmup_seeds']} of {plural(v['seeds'], 'seed')}, and Pre-LN without "
            f"warmup did as well as Post-LN with it in {v['pre_fine_seeds']} of "
            f"{v['seeds']} (the row needs {v['needed']} of each)."
        )

    def to_dict(self) -> dict:
        return {
            "lr": self.lr,
            "warmup_steps": self.warmup_steps,
            "steps": self.steps,
            "verdict": plain(self.verdict()),
            "verdict_text": self.verdict_text(),
            "finals": plain(self.finals()),
            "runs": self.runs.to_dict(),
        }

    def verdict_frame(self) -> pd.DataFrame:
        """One row per seed: each arm's final validation loss (inf: diverged)."""
        f = self.finals()
        return pd.DataFrame(
            [{"seed": seed, **{arm: f[arm][i] for arm in ARMS}} for i, seed in enumerate(self.runs.seeds)]
        )


def warmup_contrast(
    cfg: ModelConfig,
    settings: TrainSettings,
    seeds: Sequence[int] = (0,),
    data: TokenData | None = None,
    progress: Progress | None = None,
) -> WarmupContrast:
    """The three arms on the same data, once per seed: ``settings.lr`` is the peak learning
    rate and ``settings.warmup_steps`` the warmed arm's warmup."""
    s = settings
    runs = compare_runs_over_seeds(
        warmup_specs(cfg, s.lr, s.warmup_steps), s, seeds, data=data, progress=progress
    )
    return WarmupContrast(runs=runs, lr=s.lr, warmup_steps=s.warmup_steps, steps=s.steps)


def tables(result: WarmupContrast, section: str, config: ModelConfig | None = None) -> list[Table]:
    return [
        Table(
            "warmup_verdict",
            "Final validation loss per seed and arm (inf: diverged)",
            section,
            result.verdict_frame(),
        ),
        *run_tables("warmup")(result.runs, section, config),
    ]


def figures(result: WarmupContrast, section: str) -> list[Figure]:
    return run_figures("warmup")(result.runs, section)


KIND = register(
    ExperimentKind(
        name="warmup",
        title="Warmup: Post-LN needs it, Pre-LN does not?",
        result_type=WarmupContrast,
        run=warmup_contrast,
        tables=tables,
        figures=figures,
        panel="warmup",
        order=35,
    )
)
