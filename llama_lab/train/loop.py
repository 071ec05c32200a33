"""Training: short AdamW runs with warmup and LR schedules, gradient norms every step (total
and per block), validation loss, and divergence reported (step, reason, hint) instead of
raised. ``iter_train`` yields one JSON-ready dict per step and returns the ``TrainRun``;
``train`` runs it to the end. The run's knobs travel as one ``TrainSettings``.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any, Callable, Generator, TypeVar

import torch

from ..analysis import model_flops
from ..config import ModelConfig, require_decoder_only
from ..model import CausalLM, build_model
from ..runtime.devices import pick_device
from ..runtime.memory import check_memory, pages_kept
from ..runtime.precision import Precision, make_precision
from ..units import Progress, json_float, plain_fields
from .budgets import MAX_LR, MAX_SEED, MAX_STEPS, check_count, check_real, check_sizes, training_bytes_needed
from .data import TokenData, check_length, check_vocab, get_batch, load_builtin
from .divergence import divergence_hint, divergence_reason
from .measure import LogitStats, layer_grad_norms, logit_stats
from .schedules import lr_at
from .step import Trainee, make_optimizer, next_token_loss, training_step

Result = TypeVar("Result")


@dataclass(frozen=True)
class TrainSettings:
    """Everything a training run is run with, besides the config and the data."""

    steps: int
    lr: float = 3e-4  # the peak learning rate (a comparison's RunSpec sets its own)
    warmup_steps: int = 0
    schedule: str = "cosine"
    seq_len: int = 64
    batch: int = 8
    seed: int = 0
    grad_clip: float | None = None
    weight_decay: float = 0.1
    eval_every: int | None = None  # None: 10 evaluations per run
    eval_batches: int = 4
    device: str = "auto"
    dtype: str = "fp32"
    spike_factor: float = 3.0  # a loss above this × the lowest so far has diverged
    min_lr_ratio: float = 0.1  # the decay ends at this × lr
    keep_pages: bool = False  # runtime.memory.pages_kept from the second step on (off: the defaults)

    def check(self, cfg: ModelConfig) -> None:
        check_sizes(cfg, self.seq_len, self.batch)
        check_count("steps", self.steps, 1, MAX_STEPS)
        check_count("warmup_steps", self.warmup_steps, 0, MAX_STEPS)
        check_count("seed", self.seed, 0, MAX_SEED)
        check_count("eval_batches", self.eval_batches, 1, 1_000)  # the validation loss needs one
        if self.eval_every is not None:
            check_count("eval_every", self.eval_every, 1, MAX_STEPS)
        check_real("lr", self.lr, 0.0, MAX_LR)
        if self.grad_clip is not None:
            check_real("grad_clip", self.grad_clip, 0.0, 1e6)
        self.lr_at(0)  # checks the schedule's name

    def lr_at(self, step: int) -> float:
        return lr_at(
            step,
            base_lr=self.lr,
            warmup_steps=self.warmup_steps,
            total_steps=self.steps,
            schedule=self.schedule,
            min_lr_ratio=self.min_lr_ratio,
        )


@dataclass(frozen=True)
class TrainRun:
    label: str
    config: dict[str, Any]  # ModelConfig.to_dict()
    settings: dict[str, Any]  # lr, warmup, schedule, clip, sizes, seed, device, dtype, data
    n_params: int
    steps_run: int
    loss: list[float]  # per step, the batch's loss before the update
    lr: list[float]  # per step, the learning rate of the update
    grad_norm: list[float | None]  # per step, total gradient norm before clipping
    layer_grad_norm: list[list[float]]  # per step, per block (for heatmaps)
    val_step: list[int]  # updates done when the validation loss was taken
    val_loss: list[float]
    diverged: bool
    divergence_step: int | None
    divergence_reason: str | None
    hint: str | None
    logits: LogitStats  # after training, on a validation batch
    logits_without_final_norm: LogitStats
    wall_s: float
    tokens_per_s: float
    achieved_tflops: float  # analysis.model_flops over the compute time (analysis.MFU_CONVENTION)

    @property
    def final_loss(self) -> float | None:
        return self.loss[-1] if self.loss else None

    @property
    def final_val_loss(self) -> float | None:
        return self.val_loss[-1] if self.val_loss else None

    def summary(self) -> dict:
        return {
            "label": self.label,
            "steps_run": self.steps_run,
            "first_loss": json_float(self.loss[0]) if self.loss else None,
            "final_loss": json_float(self.final_loss),
            "initial_val_loss": json_float(self.val_loss[0]) if self.val_loss else None,
            "final_val_loss": json_float(self.final_val_loss),
            "diverged": self.diverged,
            "divergence_step": self.divergence_step,
            "divergence_reason": self.divergence_reason,
            "hint": self.hint,
            "n_params": self.n_params,
            "wall_s": self.wall_s,
            "tokens_per_s": self.tokens_per_s,
            "achieved_tflops": self.achieved_tflops,
        }

    def to_dict(self) -> dict:
        return plain_fields(self)

    def to_frame(self):
        """One row per step: step, loss, lr, grad_norm, val_loss (where taken)."""
        import pandas as pd

        val = dict(zip(self.val_step, self.val_loss))
        return pd.DataFrame(
            {
                "step": range(self.steps_run),
                "loss": self.loss,
                "lr": self.lr,
                "grad_norm": self.grad_norm,
                "val_loss_after": [val.get(s + 1) for s in range(self.steps_run)],
            }
        )


@torch.no_grad()
def evaluate(model: CausalLM, val_batches, precision: Precision) -> float:
    losses = []
    for inputs, targets in val_batches:
        with precision.autocast():
            logits = model(inputs)
        losses.append(next_token_loss(logits, targets).item())
    return statistics.fmean(losses)


def _batches(tokens: torch.Tensor, batch: int, seq_len: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    while True:
        yield get_batch(tokens, batch, seq_len, generator)


@dataclass
class _Run:
    """The state of a run in progress: what it trains and everything it records."""

    model: CausalLM
    trainee: Trainee
    train_stream: Generator[tuple[torch.Tensor, ...], None, None]  # (inputs, targets) batches
    val_batches: list[tuple[torch.Tensor, ...]]  # (inputs, targets)
    eval_every: int
    device: torch.device
    loss: list[float] = dataclasses.field(default_factory=list)
    lr: list[float] = dataclasses.field(default_factory=list)
    grad_norm: list[float | None] = dataclasses.field(default_factory=list)
    layers: list[list[float]] = dataclasses.field(default_factory=list)
    val_step: list[int] = dataclasses.field(default_factory=list)
    val_loss: list[float] = dataclasses.field(default_factory=list)
    running_min: float | None = None
    reason: str | None = None
    diverged_at: int | None = None
    compute_s: float = 0.0


def _start(cfg: ModelConfig, s: TrainSettings, data: TokenData) -> _Run:
    """Refuse what will not fit (before anything is allocated), then build the model, the
    optimizer and the batch streams, and take the initial validation loss."""
    dev = pick_device(s.device)
    precision = make_precision(s.dtype, dev)
    check_memory(
        training_bytes_needed(cfg, s.seq_len, s.batch, s.dtype),
        dev,
        f"training this model (B={s.batch}, T={s.seq_len}, {s.dtype})",
    )
    torch.manual_seed(s.seed)
    model = build_model(cfg, device=dev, seed=s.seed)
    trainee = Trainee(model, make_optimizer(model, s.lr, s.weight_decay), precision, precision.grad_scaler())
    train_stream = (
        tuple(t.to(dev) for t in pair) for pair in _batches(data.train, s.batch, s.seq_len, s.seed)
    )
    val_stream = _batches(data.val, s.batch, s.seq_len, s.seed + 1)
    val_batches = [tuple(t.to(dev) for t in next(val_stream)) for _ in range(s.eval_batches)]
    run = _Run(model, trainee, train_stream, val_batches, s.eval_every or max(1, s.steps // 10), dev)
    run.val_step.append(0)
    run.val_loss.append(evaluate(model, val_batches, precision))
    return run


def _step(run: _Run, s: TrainSettings, step: int) -> dict:
    """One update, recorded; the step's JSON-ready dict."""
    step_lr = s.lr_at(step)
    for group in run.trainee.optimizer.param_groups:
        group["lr"] = step_lr
    inputs, targets = next(run.train_stream)
    layers: list[float] = []
    loss, grad_norm, times = training_step(
        run.trainee,
        inputs,
        targets,
        grad_clip=s.grad_clip,
        step_before_update=lambda: layers.extend(layer_grad_norms(run.model)),
    )
    run.compute_s += times.total_s
    run.loss.append(loss)
    run.lr.append(step_lr)
    run.grad_norm.append(grad_norm)
    run.layers.append(layers)
    run.reason = divergence_reason(
        loss,
        grad_norm,
        step,
        run.running_min,
        s.spike_factor,
        loss_scaling=run.trainee.scaler is not None,
        lr=step_lr,
        dtype=s.dtype,
    )
    run.running_min = loss if run.running_min is None else min(run.running_min, loss)
    record: dict[str, object] = {
        "step": step,
        "loss": json_float(loss),
        "lr": step_lr,
        "grad_norm": json_float(grad_norm),
        "step_ms": 1e3 * times.total_s,
        "layer_grad_norm": [json_float(x) for x in layers],
    }
    if run.reason is None and ((step + 1) % run.eval_every == 0 or step + 1 == s.steps):
        run.val_step.append(step + 1)
        run.val_loss.append(evaluate(run.model, run.val_batches, run.trainee.precision))
        record["val_loss"] = json_float(run.val_loss[-1])
    if run.reason is not None:
        run.diverged_at = step
        record["diverged"] = run.reason
    return record


def _finish(
    cfg: ModelConfig, s: TrainSettings, run: _Run, data: TokenData, label: str | None, start: float
) -> TrainRun:
    stats_with, stats_without = logit_stats(run.model, run.val_batches[0][0], run.trainee.precision)
    wall_s = time.perf_counter() - start
    steps_run = len(run.loss)
    settings = {
        "steps": s.steps,
        "lr": s.lr,
        "warmup_steps": s.warmup_steps,
        "schedule": s.schedule,
        "grad_clip": s.grad_clip,
        "weight_decay": s.weight_decay,
        "seq_len": s.seq_len,
        "batch": s.batch,
        "seed": s.seed,
        "device": str(run.device),
        "dtype": s.dtype,
        "data": data.source,
        "eval_every": run.eval_every,
        "eval_batches": s.eval_batches,
        "spike_factor": s.spike_factor,
        "min_lr_ratio": s.min_lr_ratio,
    }
    diverged = run.diverged_at is not None
    flops_per_step = model_flops(cfg, s.seq_len, s.batch)
    return TrainRun(
        label=label or f"{cfg.norm_position}-LN lr={s.lr:g} warmup={s.warmup_steps} {s.schedule}",
        config=cfg.to_dict(),
        settings=settings,
        n_params=sum(p.numel() for p in run.model.parameters()),
        steps_run=steps_run,
        loss=run.loss,
        lr=run.lr,
        grad_norm=run.grad_norm,
        layer_grad_norm=run.layers,
        val_step=run.val_step,
        val_loss=run.val_loss,
        diverged=diverged,
        divergence_step=run.diverged_at,
        divergence_reason=run.reason,
        hint=(
            divergence_hint(cfg, s.lr, s.warmup_steps, s.grad_clip, s.dtype, run.diverged_at)
            if diverged
            else None
        ),
        logits=stats_with,
        logits_without_final_norm=stats_without,
        wall_s=wall_s,
        tokens_per_s=steps_run * s.batch * s.seq_len / run.compute_s,
        achieved_tflops=steps_run * flops_per_step / run.compute_s / 1e12,
    )


def iter_train(
    cfg: ModelConfig,
    settings: TrainSettings,
    *,
    data: TokenData | None = None,
    label: str | None = None,
    progress: Progress | None = None,
    keep_model: list | None = None,
) -> Generator[dict, None, TrainRun]:
    """Train, yielding one JSON-ready dict per step; the generator returns the TrainRun (and
    appends the trained model to ``keep_model`` when given). A divergence ends the run early
    with the step, the reason and a hint — never raises."""
    require_decoder_only(cfg, "the training loop")
    s = settings
    s.check(cfg)
    data = data if data is not None else load_builtin()
    check_vocab(data, cfg.vocab_size)
    check_length(data.train, s.seq_len, "training split")
    check_length(data.val, s.seq_len, "validation split")
    run = _start(cfg, s, data)
    if keep_model is not None:
        keep_model.append(run.model)
    start = time.perf_counter()  # wall_s: the steps and the final statistics
    with ExitStack() as kept:
        for step in range(s.steps):
            record = _step(run, s, step)
            if step == 0 and s.keep_pages:  # AdamW's state exists now: reuse the last step's pages
                kept.enter_context(pages_kept(run.trainee.precision.device))
            if progress:
                progress((step + 1) / s.steps, f"step {step + 1}/{s.steps}, loss {run.loss[-1]:.4g}")
            yield record
            if run.reason is not None:
                break
    return _finish(cfg, s, run, data, label, start)


def train(
    cfg: ModelConfig,
    settings: TrainSettings,
    *,
    data: TokenData | None = None,
    on_step: Callable[[dict], None] | None = None,
    label: str | None = None,
    progress: Progress | None = None,
    keep_model: list | None = None,
) -> TrainRun:
    """``iter_train`` run to the end, each step's dict passed to ``on_step``."""
    loop = iter_train(cfg, settings, data=data, label=label, progress=progress, keep_model=keep_model)
    return run_to_end(loop, on_step)


def run_to_end(loop: Generator[dict, None, Result], on_step: Callable[[dict], None] | None = None) -> Result:
    """A generator of per-step dicts run to the end, each dict passed to ``on_step``: what it returns."""
    while True:
        try:
            record = next(loop)
        except StopIteration as finished:
            return finished.value
        if on_step is not None:
            on_step(record)
