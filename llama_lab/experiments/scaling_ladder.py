"""The scaling ladder, measured here: the lab's own tiny LLaMA-style models (byte-level, on the
built-in text) at several widths, each trained once per seed with one fixed recipe; the
validation loss is read at several token budgets along the run, and the points are fitted by
approach 3 and approach 2 (``analysis.scaling``).

The recipe: AdamW, a short warmup then a *constant* learning rate, so the loss read after D
tokens is the loss of a run of D tokens with that recipe (a cosine decay would penalise every
budget but the last: Hoffmann et al.'s point against reading one run at several lengths). The
points along one run share their early trajectory; the seeds give their spread.

N is the total parameter count (embedding included, tied), as Hoffmann et al. count it: at these
widths the 256 × d embedding is a large share of the model, and leaving it out would bend the
exponent (Pearce & Song 2024).

What it can say: that loss falls with N and D at this tiny scale, on this corpus, and how loosely a
5-parameter fit is pinned by 12 points (the bootstrap intervals). The shipped fit puts most points
within 0.01 nats but leaves the smallest model's first budgets ~0.06–0.13 nats off: its loss falls
more slowly with D than the additive form allows (an N×D interaction the law does not have), and
Huber's δ = 1e-3 — nearly an absolute loss — lets the fit pass through the other points instead.
The two larger sizes nearly tie, so α comes out large and loose (its interval spans ~1.5–2.7).
What it cannot: Chinchilla's exponents or tokens per parameter — byte-level models of 10⁴–10⁵
parameters on 0.4 MB of text, a few epochs at most, are in another regime (the irreducible loss E
of this corpus, repeated data, no tuning per size).
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Callable, Iterator

import torch

from ..analysis.scaling import (
    ScalingFit,
    bootstrap_exponents,
    fit_approach3,
    isoflop_minima,
    power_law_exponent,
    training_compute,
)
from ..config import ModelConfig
from ..errors import ExperimentError
from ..train import TrainSettings, iter_train, load_builtin
from . import premeasured

KIND = "scaling_ladder"


@dataclass(frozen=True)
class LadderSettings:
    widths: tuple[int, ...] = (32, 64, 96)
    n_layers: int = 2
    budgets_steps: tuple[int, ...] = (128, 256, 512, 1024)  # token budgets, in steps of batch·seq_len
    seeds: tuple[int, ...] = (0, 1)
    batch: int = 16
    seq_len: int = 64
    lr: float = 3e-3
    warmup_steps: int = 50
    eval_batches: int = 16

    def config(self, width: int) -> ModelConfig:
        """A tiny LLaMA block: 4 heads, SwiGLU of ~8d/3, byte vocabulary, tied embeddings."""
        return ModelConfig(
            vocab_size=256,
            d_model=width,
            n_layers=self.n_layers,
            n_heads=4,
            n_kv_heads=4,
            ffn_hidden=(8 * width // 3) // 4 * 4,
            max_seq_len=self.seq_len,
            tie_embeddings=True,
        )

    def train_settings(self, seed: int) -> TrainSettings:
        return TrainSettings(
            steps=max(self.budgets_steps),
            lr=self.lr,
            warmup_steps=self.warmup_steps,
            schedule="constant",
            seq_len=self.seq_len,
            batch=self.batch,
            seed=seed,
            eval_every=1,
            eval_batches=self.eval_batches,
            device="cpu",
        )

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def iter_ladder(settings: LadderSettings, stop: Callable[[], bool] = lambda: False) -> Iterator[dict]:
    """Train every (width, seed); yield a progress dict per 10 steps and a ``point`` dict per
    token budget reached; ``stop()`` is asked each step."""
    data = load_builtin()
    runs = [(w, s) for w in settings.widths for s in settings.seeds]
    tokens_per_step = settings.batch * settings.seq_len
    for index, (width, seed) in enumerate(runs):
        cfg = settings.config(width)
        loop = iter_train(cfg, _budget_settings(settings, seed), data=data)
        n_params = None
        for record in loop:
            if stop():
                return
            step = record["step"] + 1
            if n_params is None:
                n_params = sum(p.numel() for p in settings_model_params(cfg))
            if step in settings.budgets_steps and "val_loss" in record:
                yield {
                    "point": True,
                    "width": width,
                    "seed": seed,
                    "params": n_params,
                    "tokens": step * tokens_per_step,
                    "val_loss": record["val_loss"],
                }
            elif step % 10 == 0:  # a progress event: where the page's Stop takes effect
                yield {
                    "run": index + 1,
                    "runs": len(runs),
                    "width": width,
                    "seed": seed,
                    "step": step,
                    "loss": record["loss"],
                }


def _budget_settings(settings: LadderSettings, seed: int) -> TrainSettings:
    """The run's settings with a validation pass at every budget (and only there: eval_every is
    the gcd of the budgets)."""
    every = 0
    for s in settings.budgets_steps:
        every = math.gcd(every, s)
    return dataclasses.replace(settings.train_settings(seed), eval_every=every)


def settings_model_params(cfg: ModelConfig):
    from ..model import build_model

    return build_model(cfg, device="meta").parameters()


def summarise(points: list[dict], bootstrap_samples: int = 50) -> dict:
    """Rows averaged over seeds, the approach-3 fit with bootstrap intervals, approach 2's minima."""
    keys = sorted({(p["params"], p["tokens"]) for p in points})
    rows = []
    for n, d in keys:
        losses = [p["val_loss"] for p in points if (p["params"], p["tokens"]) == (n, d)]
        width = next(p["width"] for p in points if p["params"] == n)
        rows.append(
            {
                "width": width,
                "params": n,
                "tokens": d,
                "val_loss": sum(losses) / len(losses),
                "val_losses": losses,
            }
        )
    n_params, tokens, losses = ([r[k] for r in rows] for k in ("params", "tokens", "val_loss"))
    fit = fit_approach3(n_params, tokens, losses)
    computes = sorted({training_compute(n, d) for n, d in zip(n_params, tokens)})
    lo, hi = computes[0], computes[-1]
    budgets = [lo * (hi / lo) ** (i / 24) for i in range(25)]
    minima = [m for m in isoflop_minima(n_params, tokens, losses, budgets) if m["n_opt"] is not None]
    return {
        "rows": rows,
        "fit": fit.to_dict(),
        "fit_a": fit.a,
        "residuals": [fit.loss(n, d) - loss for n, d, loss in zip(n_params, tokens, losses)],
        "bootstrap": bootstrap_exponents(n_params, tokens, losses, samples=bootstrap_samples),
        "isoflop": minima,
        "isoflop_a": power_law_exponent([m["compute"] for m in minima], [m["n_opt"] for m in minima]),
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
    import json

    path = premeasured.DATA_DIR / f"{KIND}.json"
    if not path.exists():
        raise ExperimentError(f"the pre-measured ladder {path.name} is not shipped")
    body = json.loads(path.read_text())
    if body.get("format") != premeasured.FORMAT:
        raise ExperimentError(f"{path.name} has format {body.get('format')}, not {premeasured.FORMAT}")
    return Ladder(body["settings"], body["result"], body["provenance"])


def write_shipped(settings: LadderSettings, result: dict, seconds: float) -> None:
    import json

    longest = max(r["tokens"] for r in result["rows"])  # one run per (width, seed) reaches it
    flops = len(settings.seeds) * sum(
        training_compute(r["params"], longest) for r in result["rows"] if r["tokens"] == longest
    )
    body = {
        "format": premeasured.FORMAT,
        "settings": settings.to_dict(),
        "provenance": premeasured.provenance(torch.device("cpu"), seconds, flops),
        "result": result,
    }
    path = premeasured.DATA_DIR / f"{KIND}.json"
    path.write_text(json.dumps(body, indent=1, sort_keys=True) + "\n")


def main() -> None:  # python -m llama_lab.experiments.scaling_ladder: re-measure and ship
    import json
    import sys

    torch.set_num_threads(1)  # tiny matmuls: one thread beats several on a shared CPU
    settings = LadderSettings()
    start = time.perf_counter()
    result = measure(settings, on_event=lambda e: print(json.dumps(e), file=sys.stderr, flush=True))
    write_shipped(settings, result, time.perf_counter() - start)
    print(json.dumps(result["fit"]))


if __name__ == "__main__":
    main()
