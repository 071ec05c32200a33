"""The scaling ladder, measured here, on IsoFLOP budgets (Hoffmann et al. 2022, approach 2): the
lab's own tiny LLaMA-style models (byte-level, on the built-in text) at several widths, one fixed
depth and recipe; for each FLOP budget C and each size N a run of its own of D = C / (6·N) tokens
(rounded to whole steps; the actual tokens and 6·N·D are recorded), its learning rate warmed up and
then cosine-decayed to that run's own horizon — Hoffmann et al. found a schedule matched to the
horizon matters, where reading one constant-LR run at several lengths (this ladder's first design)
flatters the short budgets. Every (size, budget) is run for each seed. Beside the budgets, a
fixed-data slice trains three sizes on the same D (``tokens_steps``), each to its own horizon:
loss against N at a fixed, large D, which falls with size (every size has data to spare), where a
budget's slice has a valley.

The fits (``analysis.scaling``): approach 2, per budget a parabola in ln N through the losses, its
minimum N_opt(C), and N_opt ∝ C^a through the budgets (a bootstrap over each budget's points gives
its interval); approach 3, L(N, D) = E + A/N^α + B/D^β by Huber on log-loss over every point (a
bootstrap over the points).

N is the total parameter count (embedding included; tied, so counted once), as Hoffmann et al.
count it: at these widths the 256 × d embedding is a large share of the model, and leaving it out
would bend the exponent (Pearce & Song 2024). C = 6·N·D, the usual approximation: the attention
scores' own FLOPs (4·T·d per block per token forward) are not in it, and at these widths they are
not small — about 58 % of 2N at d = 8, 18 % at d = 48 (T = 64, 2 blocks) — so C understates the
narrowest models' real cost the most.

What it can say: at this tiny scale, on this corpus, loss against N at a fixed budget has a valley,
the valley moves to larger N as C grows, and how loosely a few budgets pin the exponent (the
intervals). The shipped ladder (2026-12-07): N_opt ≈ 3.8k, 8.7k and 14.1k at C = 2.5·10¹⁰, 5·10¹⁰
and 10¹¹, so approach 2 gives a ≈ 0.95 (10–90 %: 0.76–1.24) — N grows nearly as fast as C, and the
tokens per parameter at the optimum fall (the larger models here are short of optimizer steps more
than of tokens); approach 3 (every row) gives a ≈ 0.68 (0.59–0.72), every point within 0.04 in
log-loss, but its E falls to zero: over a factor 4 in compute it cannot tell the irreducible loss
from the power laws. The fixed-data slice, at D = 1,048,576 tokens: 2.167, 1.784 and 1.508 for
N = 6,588, 20,088 and 67,824 — at a large fixed D, bigger is better.
What it cannot: Chinchilla's exponents or tokens per parameter — byte-level models of
3,560 to 67,824 parameters on 0.4 MB of text, the smallest models seeing it many times over (the rows'
``epochs``), one learning rate untuned per size, a factor of 4 in compute where Hoffmann et al.'s
nine IsoFLOP budgets span 6·10¹⁸ to 3·10²¹ FLOPs, a factor of 500.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from dataclasses import dataclass
from typing import Callable, Iterator

import torch

from ..analysis.params import count_params
from ..analysis.scaling import (
    ScalingFit,
    bootstrap_exponents,
    bootstrap_isoflop_exponent,
    fit_approach3,
    isoflop_exponent,
    isoflop_minima,
    training_compute,
)
from ..config import ModelConfig
from ..errors import ExperimentError
from ..train import TrainSettings, iter_train, load_builtin
from . import premeasured

KIND = "scaling_ladder"


@dataclass(frozen=True)
class LadderSettings:
    budgets: tuple[float, ...] = (2.5e10, 5e10, 1e11)  # FLOPs C = 6·N·D, each twice the last
    # the widths trained at each budget: five sizes around that budget's valley (the window slides
    # up with C, as Hoffmann et al.'s IsoFLOP sizes do); a pilot run put the valley near N ≈ 5k,
    # 7.5k and 13k at these budgets
    widths: tuple[tuple[int, ...], ...] = ((8, 12, 16, 24, 32), (8, 12, 16, 24, 32), (12, 16, 24, 32, 48))
    n_layers: int = 2
    n_heads: int = 2  # head_dim = width / 2: even (RoPE's rotate-half) down to width 8
    seeds: tuple[int, ...] = (0, 1)
    batch: int = 16
    seq_len: int = 64
    lr: float = 3e-3
    warmup_fraction: float = 0.1  # of each run's own steps
    min_lr_ratio: float = 0.1  # the cosine ends at this × lr, at the run's last step
    eval_batches: int = 16
    # the fixed-data slice: these widths, each trained on tokens_steps × tokens_per_step tokens
    # (1,048,576 at the defaults: 16 to 300 tokens per parameter)
    tokens_widths: tuple[int, ...] = (12, 24, 48)
    tokens_steps: int = 1024

    @property
    def tokens_per_step(self) -> int:
        return self.batch * self.seq_len

    def config(self, width: int) -> ModelConfig:
        """A tiny LLaMA block: ``n_heads`` heads, SwiGLU of ~8d/3, byte vocabulary, tied embeddings."""
        return ModelConfig(
            vocab_size=256,
            d_model=width,
            n_layers=self.n_layers,
            n_heads=self.n_heads,
            n_kv_heads=self.n_heads,
            ffn_hidden=(8 * width // 3) // 4 * 4,
            max_seq_len=self.seq_len,
            tie_embeddings=True,
        )

    def steps(self, n_params: int, compute: float) -> int:
        """D = C / (6·N) tokens, rounded to whole steps (at least one)."""
        return max(1, round(compute / (training_compute(n_params, 1) * self.tokens_per_step)))

    def train_settings(self, seed: int, steps: int) -> TrainSettings:
        """The fixed recipe, its schedule decayed to this run's horizon; one validation pass, at the end."""
        return TrainSettings(
            steps=steps,
            lr=self.lr,
            warmup_steps=max(1, round(self.warmup_fraction * steps)),
            schedule="cosine",
            min_lr_ratio=self.min_lr_ratio,
            seq_len=self.seq_len,
            batch=self.batch,
            seed=seed,
            eval_every=steps,
            eval_batches=self.eval_batches,
            device="cpu",
        )

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class LadderRun:
    """One (size, budget, seed) run of the ladder."""

    budget: float | None  # the design's C (None: the fixed-data slice)
    width: int
    seed: int
    params: int  # N, total
    steps: int

    def tokens(self, settings: LadderSettings) -> int:
        return self.steps * settings.tokens_per_step


def plan(settings: LadderSettings) -> list[LadderRun]:
    """Every run, seed by seed (a stopped re-measure has whole seeds first), budget by budget."""
    if len(settings.widths) != len(settings.budgets):
        raise ExperimentError(
            f"widths has {len(settings.widths)} sets of sizes for {len(settings.budgets)} budgets: "
            "one per budget"
        )
    runs = []
    for seed in settings.seeds:
        for compute, widths in zip(settings.budgets, settings.widths):
            for w in widths:
                n = count_params(settings.config(w)).total
                runs.append(LadderRun(compute, w, seed, n, settings.steps(n, compute)))
        for w in settings.tokens_widths:
            runs.append(
                LadderRun(None, w, seed, count_params(settings.config(w)).total, settings.tokens_steps)
            )
    return runs


def iter_ladder(settings: LadderSettings, stop: Callable[[], bool] = lambda: False) -> Iterator[dict]:
    """Train every run of ``plan``; yield a progress dict per 10 steps (with ``done`` and ``total``
    steps of the whole ladder) and a ``point`` dict at each run's end; ``stop()`` is asked each step."""
    data = load_builtin()
    runs = plan(settings)
    total, done = sum(r.steps for r in runs), 0
    for index, run in enumerate(runs):
        loop = iter_train(settings.config(run.width), settings.train_settings(run.seed, run.steps), data=data)
        for record in loop:
            if stop():
                return
            step, done = record["step"] + 1, done + 1
            if step == run.steps:
                if "val_loss" not in record:  # a diverged run ends without its validation pass
                    raise ExperimentError(f"the ladder's run {run} diverged: {record.get('diverged')}")
                tokens = run.tokens(settings)
                yield {
                    "point": True,
                    "design": design_of(run.budget),
                    "budget": run.budget,
                    "width": run.width,
                    "seed": run.seed,
                    "params": run.params,
                    "steps": run.steps,
                    "tokens": tokens,
                    "compute": training_compute(run.params, tokens),
                    "epochs": tokens / len(data.train),
                    "val_loss": record["val_loss"],
                }
            elif step % 10 == 0:  # a progress event: where the page's Stop takes effect
                yield {
                    "run": index + 1,
                    "runs": len(runs),
                    "width": run.width,
                    "budget": run.budget,
                    "seed": run.seed,
                    "step": step,
                    "steps": run.steps,
                    "done": done,
                    "total": total,
                    "loss": record["loss"],
                }


def design_of(budget: float | None) -> str:
    """A run's design: "isoflop" (one of the budgets) or "tokens" (the fixed-data slice)."""
    return "tokens" if budget is None else "isoflop"


def budget_label(budget: float | None) -> str:
    """A run's budget in words: "C = 2.5e+10" or "fixed D" (the fixed-data slice)."""
    return "fixed D" if budget is None else f"C = {budget:.2g}"


def fixed_data_rows(result: dict) -> list[dict]:
    """The fixed-data slice's rows (the seeds' means), smallest model first."""
    return sorted((r for r in result["rows"] if r.get("design") == "tokens"), key=lambda r: r["params"])


def summarise(points: list[dict], bootstrap_samples: int = 50) -> dict:
    """Rows averaged over seeds (the budgets' first, then the fixed-data slice); approach 2 over
    the budgets' rows (their parabola minima and N_opt ∝ C^a with a bootstrap interval); approach 3
    over every row (the Huber fit, its log-loss residuals and bootstrap intervals)."""
    rows = []
    keys = {(p["budget"], p["params"]) for p in points}
    for budget, n in sorted(keys, key=lambda k: (k[0] is None, k[0] or 0.0, k[1])):
        mine = [p for p in points if (p["budget"], p["params"]) == (budget, n)]
        first = mine[0]
        rows.append(
            {
                "design": design_of(budget),
                **{
                    k: first[k] for k in ("budget", "width", "params", "steps", "tokens", "compute", "epochs")
                },
                "val_loss": sum(p["val_loss"] for p in mine) / len(mine),
                "val_losses": [p["val_loss"] for p in mine],
            }
        )
    n_params, tokens, losses = ([r[k] for r in rows] for k in ("params", "tokens", "val_loss"))
    fit = fit_approach3(n_params, tokens, losses)
    budget_rows = [r for r in rows if r["design"] == "isoflop"]
    minima = isoflop_minima(
        [r["budget"] for r in budget_rows],
        [r["params"] for r in budget_rows],
        [r["val_loss"] for r in budget_rows],
    )
    budget_points = [p for p in points if p["budget"] is not None]
    return {
        "rows": rows,
        "fit": fit.to_dict(),
        "fit_a": fit.a,
        "log_residuals": [
            math.log(fit.loss(n, d)) - math.log(loss) for n, d, loss in zip(n_params, tokens, losses)
        ],
        "bootstrap": bootstrap_exponents(n_params, tokens, losses, samples=bootstrap_samples),
        "isoflop": minima,
        "isoflop_a": isoflop_exponent(minima),
        "isoflop_a_interval": bootstrap_isoflop_exponent(  # over each seed's point
            [p["budget"] for p in budget_points],
            [p["params"] for p in budget_points],
            [p["val_loss"] for p in budget_points],
            samples=4 * bootstrap_samples,
        ),
    }


def measure(
    settings: LadderSettings, on_event: Callable[[dict], None] | None = None, stop=lambda: False
) -> dict:
    points = []
    for event in iter_ladder(settings, stop):
        if on_event:
            on_event(event)
        if event.get("point"):
            points.append(event)
    return summarise(points)


@dataclass(frozen=True)
class Ladder:
    settings: dict
    result: dict
    provenance: dict

    @property
    def fit(self) -> ScalingFit:
        return ScalingFit(**self.result["fit"], source="this lab's ladder (approach 3)")


def shipped() -> Ladder:
    """The pre-measured ladder (``python -m llama_lab.experiments.scaling_ladder`` wrote it)."""
    path = premeasured.DATA_DIR / f"{KIND}.json"
    if not path.exists():
        raise ExperimentError(f"the pre-measured ladder {path.name} is not shipped")
    body = json.loads(path.read_text())
    if body.get("format") != premeasured.FORMAT:
        raise ExperimentError(f"{path.name} has format {body.get('format')}, not {premeasured.FORMAT}")
    return Ladder(body["settings"], body["result"], body["provenance"])


def write_shipped(settings: LadderSettings, result: dict, seconds: float, cpu_seconds: float) -> None:
    flops = len(settings.seeds) * sum(r["compute"] for r in result["rows"])  # 6·N·D of every run
    provenance = premeasured.provenance(torch.device("cpu"), seconds, flops)
    # the wall time depends on what else the shared cores ran; the process's own CPU time does not
    provenance["cpu_seconds"] = round(cpu_seconds, 2)
    body = {
        "format": premeasured.FORMAT,
        "settings": settings.to_dict(),
        "provenance": provenance,
        "result": result,
    }
    path = premeasured.DATA_DIR / f"{KIND}.json"
    path.write_text(json.dumps(body, indent=1, sort_keys=True) + "\n")


def main(settings: LadderSettings | None = None, ship: bool = True) -> dict:
    """python -m llama_lab.experiments.scaling_ladder: re-measure and ship."""
    torch.set_num_threads(1)  # tiny matmuls: one thread beats several on a shared CPU
    settings = settings or LadderSettings()
    start, cpu_start = time.perf_counter(), time.process_time()
    result = measure(settings, on_event=lambda e: print(json.dumps(e), file=sys.stderr, flush=True))
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    if ship:
        write_shipped(settings, result, seconds, cpu_seconds)
    print(
        json.dumps(
            {"fit": result["fit"], "isoflop_a": result["isoflop_a"], "seconds": seconds, "cpu": cpu_seconds}
        )
    )
    return result


if __name__ == "__main__":
    main()
