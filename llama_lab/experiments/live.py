"""The live pass: one real training step timed phase by phase (forward, backward, AdamW), with
the initial loss beside ln(V), achieved TFLOP/s and MFU, peak memory, the activation memory
measured from the tensors autograd saves vs ``analysis.autocast_activation_bytes``, and logits
statistics with and without the final norm (the seed's "forgot the final norm" bug). Also
the ``bench --json`` object.
"""

from __future__ import annotations

import math
import statistics
import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import torch

from .. import analysis
from ..config import ModelConfig, require_decoder_only
from ..errors import ExperimentError
from ..figures.common import GROUP_PALETTE, Figure, Table, layout_figure, logits_table
from ..model import build_model
from ..runtime.devices import device_name, pick_device
from ..runtime.memory import RssPeak, check_memory, pages_kept
from ..runtime.peak import device_peak_flops
from ..runtime.precision import Precision, make_precision
from ..train.budgets import (
    MAX_LR,
    MAX_SEED,
    MAX_STEPS,
    check_count,
    check_real,
    check_sizes,
    random_batch,
    training_bytes_needed,
)
from ..train.data import TokenData
from ..train.measure import LogitStats, SavedTensorMeter, logit_stats, state_bytes
from ..train.step import StepTimes, Trainee, forward_backward, make_optimizer, step_loss, training_step
from ..units import Progress, human_bytes, plain_fields
from ..validation.device import causal_training_flops
from .registry import ExperimentKind, register


@dataclass(frozen=True)
class LiveSettings:
    device: str = "auto"
    dtype: str = "fp32"
    seed: int = 0
    compile: bool = False  # torch.compile (CUDA only)
    iters: int = 1  # timed steps after the warm-up step
    lr: float = 3e-4
    keep_pages: bool = False  # runtime.memory.pages_kept around the timed steps (off: the defaults)

    def check(self, cfg: ModelConfig, seq_len: int, batch: int, dev: torch.device) -> int:
        """Refuse a run that cannot start, before anything is allocated; the guard's estimate."""
        make_precision(self.dtype, dev)
        check_sizes(cfg, seq_len, batch)
        check_count("iters", self.iters, 1, MAX_STEPS)
        check_count("seed", self.seed, 0, MAX_SEED)
        check_real("lr", self.lr, 0.0, MAX_LR)
        if self.compile and dev.type != "cuda":
            raise ExperimentError(
                "compile=True is offered on CUDA only (torch.compile's CPU "
                "backend needs a C++ toolchain and says little about GPU speed)"
            )
        required = training_bytes_needed(cfg, seq_len, batch, self.dtype)
        check_memory(required, dev, f"a training step of this model (B={batch}, T={seq_len}, {self.dtype})")
        return required


@dataclass(frozen=True)
class LivePass:
    device: str
    device_name: str
    dtype: str
    seq_len: int
    batch: int
    iters: int
    compiled: bool
    n_params: int
    initial_loss: float  # at the initial weights (the warm-up iteration)
    ln_vocab: float  # the loss of a uniform prediction
    last_loss: float  # the last timed iteration, after ≥ 1 AdamW update
    warmup_s: float  # the excluded first iteration (compilation included)
    forward_ms: float  # medians over the timed iterations
    backward_ms: float
    optimizer_ms: float
    step_ms: float
    overhead_ms: float | None  # forward + backward of one token (None when compiled: it would recompile)
    tokens_per_s: float
    training_flops: float  # analysis.model_flops (analysis.MFU_CONVENTION)
    achieved_tflops: float
    peak_flops: float
    peak_flops_source: str
    mfu: float
    achieved_tflops_causal: float  # counting the causal half of the attention scores (what
    mfu_causal: float  # SDPA with is_causal computes): an alternative, not the lab's convention
    peak_memory_bytes: int
    peak_memory_source: str
    memory_breakdown: dict[str, int]  # weights, gradients, optimizer, weight_casts, activations
    activation_bytes_measured: int  # saved-for-backward tensors, each storage once
    activation_bytes_estimated: int  # analysis.autocast_activation_bytes: `dtype` but for the
    # float32 residual stream autocast keeps (fp32: analysis.activation_bytes)
    estimated_training_bytes: int  # what the memory guard checked
    logits: LogitStats  # with the final norm, initial weights
    logits_without_final_norm: LogitStats

    @property
    def activation_ratio(self) -> float:
        return self.activation_bytes_measured / max(1, self.activation_bytes_estimated)

    def to_dict(self) -> dict:
        return plain_fields(self) | {"activation_ratio": self.activation_ratio}


def _saved_for_backward(model, inputs, targets, precision: Precision) -> SavedTensorMeter:
    """The tensors one forward (with the loss) saves for backward; the graph is freed."""
    with SavedTensorMeter(model) as meter:
        with precision.autocast():
            step_loss(model, inputs, targets)
    return meter


def _timed_steps(
    trainee: Trainee, inputs, targets, iters: int, progress: Progress | None
) -> tuple[list[StepTimes], float]:
    times, last_loss = [], math.nan
    for i in range(iters):
        if progress:
            progress(0.2 + 0.8 * i / iters, f"timed step {i + 1}/{iters}")
        last_loss, _, step_times = training_step(trainee, inputs, targets, measure_grad_norm=False)
        times.append(step_times)
    return times, last_loss


def _overhead_probe(trainee: Trainee, cfg: ModelConfig, seed: int, reps: int = 3) -> float:
    """Seconds of forward + backward on one token (B = T = 1), no update: the per-step cost
    that does not grow with the tokens (kernel launches, Python, synchronisation), for
    ``validation.device``. Run after the timed steps."""
    dev = trainee.precision.device
    inputs, targets = (t.to(dev) for t in random_batch(cfg, 1, 1, seed, None))
    times = []
    for _ in range(reps + 1):  # the first warms the one-token shapes up
        _, forward_s, backward_s = forward_backward(trainee, inputs, targets)
        trainee.optimizer.zero_grad(set_to_none=True)
        times.append(forward_s + backward_s)
    return statistics.median(times[1:])


def _peak_memory(dev: torch.device, memory: dict, rss: RssPeak) -> tuple[int, str]:
    if dev.type == "cuda":
        return int(torch.cuda.max_memory_allocated(dev)), f"{CUDA_PEAK_SOURCE} peak"
    states = int(sum(memory.values()))
    if rss.bytes is not None and rss.bytes >= states:
        return rss.bytes, (f"{RSS_PEAK_SOURCE} (VmHWM) less its size before the model was built")
    reused = (
        (
            "; the process reused memory it already held, so its resident high-water mark "
            f"grew by only {rss.bytes:,} bytes"
        )
        if rss.bytes is not None
        else ""
    )
    return states, (
        "weights + gradients + AdamW state + tensors saved for backward "
        f"(activations and autocast's weight copies) added up{reused}"
    )


def live_pass(
    cfg: ModelConfig,
    seq_len: int,
    batch: int,
    settings: LiveSettings | None = None,
    *,
    data: TokenData | None = None,
    progress: Progress | None = None,
) -> LivePass:
    """A warm-up training step at the initial weights (loss, logits statistics, saved-tensor
    bytes) and ``settings.iters`` timed steps (per-phase medians)."""
    require_decoder_only(cfg, "the live training pass")
    s = settings or LiveSettings()
    dev = pick_device(s.device)
    required = s.check(cfg, seq_len, batch, dev)
    if progress:
        progress(0.0, "building the model")
    precision = make_precision(s.dtype, dev)
    torch.manual_seed(s.seed)
    rss = RssPeak().start()
    model = build_model(cfg, device=dev, seed=s.seed)
    inputs, targets = (t.to(dev) for t in random_batch(cfg, seq_len, batch, s.seed, data))
    stats_with, stats_without = logit_stats(model, inputs, precision)
    trainee = Trainee(
        # torch.compile of a Module returns an OptimizedModule (a Module); its stub says a callable
        torch.compile(model) if s.compile else model,  # type: ignore[arg-type]
        make_optimizer(model, s.lr),
        precision,
        precision.grad_scaler(),
    )
    if progress:
        progress(0.1, "measuring the tensors saved for backward")
    meter = _saved_for_backward(model, inputs, targets, precision)
    if progress:
        progress(0.15, "warm-up step (excluded from timing)")
    gradient_bytes: dict[str, int] = {}
    start = time.perf_counter()
    initial_loss, _, _ = training_step(
        trainee,
        inputs,
        targets,
        measure_grad_norm=False,
        step_before_update=lambda: gradient_bytes.update(state_bytes(model, None)),
    )
    warmup_s = time.perf_counter() - start
    memory = state_bytes(model, trainee.optimizer) | {
        "gradients": gradient_bytes["gradients"],
        "weight_casts": meter.weight_cast_bytes,
        "activations": meter.bytes,
    }
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    with pages_kept(dev) if s.keep_pages else nullcontext():  # asked for: reuse the last step's pages
        times, last_loss = _timed_steps(trainee, inputs, targets, s.iters, progress)
    rss.stop()
    peak_memory, peak_source = _peak_memory(dev, memory, rss)
    overhead_s = None if s.compile else _overhead_probe(trainee, cfg, s.seed)
    step_s = statistics.median(t.total_s for t in times)
    flops = analysis.model_flops(cfg, seq_len, batch)  # the lab's one MFU convention
    # beside it, what the kernels run (the causal half of the scores): the time model's count
    flops_causal = causal_training_flops(cfg, seq_len, batch)
    peak, peak_source_flops = device_peak_flops(dev, s.dtype)
    if progress:
        progress(1.0, "done")
    return LivePass(
        device=str(dev),
        device_name=device_name(dev),
        dtype=s.dtype,
        seq_len=seq_len,
        batch=batch,
        iters=s.iters,
        compiled=bool(s.compile),
        n_params=sum(p.numel() for p in model.parameters()),
        initial_loss=initial_loss,
        ln_vocab=math.log(cfg.vocab_size),
        last_loss=last_loss,
        warmup_s=warmup_s,
        forward_ms=1e3 * statistics.median(t.forward_s for t in times),
        backward_ms=1e3 * statistics.median(t.backward_s for t in times),
        optimizer_ms=1e3 * statistics.median(t.optimizer_s for t in times),
        step_ms=1e3 * step_s,
        overhead_ms=None if overhead_s is None else 1e3 * overhead_s,
        tokens_per_s=batch * seq_len / step_s,
        training_flops=float(flops),
        achieved_tflops=flops / step_s / 1e12,
        peak_flops=peak,
        peak_flops_source=peak_source_flops,
        mfu=flops / step_s / peak,
        achieved_tflops_causal=flops_causal / step_s / 1e12,
        mfu_causal=flops_causal / step_s / peak,
        peak_memory_bytes=peak_memory,
        peak_memory_source=peak_source,
        memory_breakdown=memory,
        activation_bytes_measured=meter.bytes,
        activation_bytes_estimated=analysis.autocast_activation_bytes(cfg, seq_len, batch, s.dtype),
        estimated_training_bytes=required,
        logits=stats_with,
        logits_without_final_norm=stats_without,
    )


def bench(
    cfg: ModelConfig,
    device: str = "auto",
    steps: int = 5,
    seq_len: int | None = None,
    batch: int = 4,
    dtype: str = "fp32",
    compile: bool = False,
    seed: int = 0,
) -> dict:
    """``bench``: forward + backward + AdamW, ``steps`` timed steps after one warm-up."""
    require_decoder_only(cfg, "bench")
    seq_len = seq_len or min(128, cfg.max_seq_len)
    settings = LiveSettings(device=device, dtype=dtype, seed=seed, compile=compile, iters=steps)
    result = live_pass(cfg, seq_len, batch, settings)
    return {
        "tokens_per_s": result.tokens_per_s,
        "step_ms": result.step_ms,
        "achieved_tflops": result.achieved_tflops,
        "peak_memory_bytes": result.peak_memory_bytes,
        "device": result.device,
        "device_name": result.device_name,
        "mfu": result.mfu,
        "flops_convention": analysis.MFU_CONVENTION,
        "achieved_tflops_causal": result.achieved_tflops_causal,
        "mfu_causal": result.mfu_causal,
        "peak_memory_source": result.peak_memory_source,
        "peak_flops": result.peak_flops,
        "peak_flops_source": result.peak_flops_source,
        "forward_ms": result.forward_ms,
        "backward_ms": result.backward_ms,
        "optimizer_ms": result.optimizer_ms,
        "dtype": dtype,
        "seq_len": seq_len,
        "batch": batch,
        "steps": steps,
        "compiled": result.compiled,
        "n_params": result.n_params,
        "initial_loss": result.initial_loss,
    }


# ---- figures and tables --------------------------------------------------------------------
CUDA_PEAK_SOURCE = "CUDA allocator"  # how experiments.live_pass names a measured peak


def live_phase_figure(live: LivePass) -> go.Figure:
    phases = {
        "forward": live.forward_ms,
        "backward": live.backward_ms,
        "optimizer (AdamW)": live.optimizer_ms,
    }
    fig = go.Figure(
        go.Bar(
            x=list(phases),
            y=list(phases.values()),
            marker_color=list(GROUP_PALETTE[:3]),
            text=[f"{v:.1f} ms" for v in phases.values()],
            hovertemplate="%{x}: %{y:.2f} ms<extra></extra>",
        )
    )
    fig.update_yaxes(title="milliseconds (median of timed steps)")
    return layout_figure(
        fig,
        f"One training step on {live.device_name}, {live.dtype}: "
        f"{live.step_ms:.1f} ms, {live.tokens_per_s:,.0f} tokens/s",
        height=360,
    )


RSS_PEAK_SOURCE = "measured: the process's resident-memory high-water mark"


def peak_memory_is_measured(live: LivePass) -> bool:
    """Whether ``live.peak_memory_bytes`` was measured: the CUDA allocator's peak, or the
    process's resident-memory high-water mark on the CPU (Linux). Elsewhere it is weights +
    gradients + AdamW state + saved tensors added up."""
    return live.peak_memory_source.startswith((CUDA_PEAK_SOURCE, RSS_PEAK_SOURCE))


def peak_memory_label(live: LivePass) -> str:
    return "peak memory" if peak_memory_is_measured(live) else "peak memory (estimate)"


def has_causal_mfu(live: LivePass) -> bool:
    """Whether the result carries the causal-attention MFU (results from before it was added
    do not)."""
    return getattr(live, "mfu_causal", None) is not None


CAUSAL_MFU_NOTE = (
    "MFU counts the attention scores over the full T×T (the lab's one convention, as PaLM, "
    "torchtitan and llm-foundry); SDPA with is_causal=True computes only about half of them, "
    "so “causal” counts that half (analysis.count_flops(...).forward_causal)."
)


def live_summary(live: LivePass) -> pd.DataFrame:
    """quantity, value, unit: the headline numbers of a live pass."""
    rows = [
        ("device", live.device_name, ""),
        ("dtype", live.dtype, ""),
        ("batch × sequence", f"{live.batch} × {live.seq_len}", "tokens"),
        ("parameters", live.n_params, ""),
        ("forward", live.forward_ms, "ms"),
        ("backward", live.backward_ms, "ms"),
        ("optimizer", live.optimizer_ms, "ms"),
        ("step", live.step_ms, "ms"),
        ("tokens/s", live.tokens_per_s, "tokens/s"),
        ("model FLOPs per step (analysis.model_flops)", live.training_flops, "FLOP"),
        ("FLOPs convention", analysis.MFU_CONVENTION, ""),
        ("achieved", live.achieved_tflops, "TFLOP/s"),
        ("peak", live.peak_flops / 1e12, "TFLOP/s"),
        ("peak source", live.peak_flops_source, ""),
        ("MFU", live.mfu, "fraction"),
    ]
    if has_causal_mfu(live):
        rows += [
            ("achieved, causal attention scores", live.achieved_tflops_causal, "TFLOP/s"),
            ("MFU, causal attention scores", live.mfu_causal, "fraction"),
        ]
    rows += [
        ("initial loss", live.initial_loss, "nats"),
        ("ln V", live.ln_vocab, "nats"),
        ("loss after the timed steps", live.last_loss, "nats"),
        (peak_memory_label(live), live.peak_memory_bytes, "bytes"),
        ("peak memory source", live.peak_memory_source, ""),
        ("activations measured (saved for backward)", live.activation_bytes_measured, "bytes"),
        (
            "activations predicted (analysis.autocast_activation_bytes)",
            live.activation_bytes_estimated,
            "bytes",
        ),
        ("measured / predicted activations", live.activation_ratio, "ratio"),
        ("memory guard estimate (analysis.training_memory)", live.estimated_training_bytes, "bytes"),
    ]
    return pd.DataFrame(rows, columns=["quantity", "value", "unit"])


def predicted_live_memory(live: LivePass, cfg: ModelConfig) -> dict[str, int]:
    """What ``analysis`` predicts for each entry of ``live.memory_breakdown``. The live pass
    keeps fp32 weights, gradients and AdamW moments whatever its dtype (bf16/fp16 run under
    autocast, which also keeps a 16-bit copy of every weight): analysis.training_memory at fp32
    without mixed precision, analysis.weight_bytes for the copies, and the activations it
    predicted at the run's dtype."""
    states = analysis.training_memory(
        cfg, live.seq_len, live.batch, dtype="fp32", mixed_precision=False
    ).components
    return {
        "weights": states["weights"],
        "gradients": states["gradients"],
        "optimizer": states["optimizer_moments"] + states["master_weights"],
        "weight_casts": 0 if live.dtype == "fp32" else analysis.weight_bytes(cfg, live.dtype),
        "activations": live.activation_bytes_estimated,
    }


_PREDICTION_SOURCES = {
    "weights": "analysis.training_memory: weights, fp32",
    "gradients": "analysis.training_memory: gradients, fp32",
    "optimizer": "analysis.training_memory: AdamW m and v, fp32 (torch also keeps a 4-byte step per tensor)",
    "weight_casts": "analysis.weight_bytes at the run's dtype (autocast's copies; none in fp32)",
    "activations": "analysis.autocast_activation_bytes (fp32: analysis.activation_bytes)",
    "total": "the rows above",
}


def live_memory_table(live: LivePass, cfg: ModelConfig | None = None) -> pd.DataFrame:
    """What the tensors hold after the warm-up step beside what ``analysis`` predicts for
    ``cfg`` (the model that ran; without it only the activations are predicted), in bytes and
    human-readable. A prediction that cannot be made reads "—"."""
    predicted = (
        predicted_live_memory(live, cfg)
        if cfg is not None
        else {"activations": live.activation_bytes_estimated}
    )
    rows: list[dict[str, Any]] = [
        {
            "component": name,
            "measured_bytes": value,
            "predicted_bytes": predicted.get(name),
            "source_of_prediction": _PREDICTION_SOURCES.get(name, ""),
        }
        for name, value in live.memory_breakdown.items()
    ]
    known = [row["predicted_bytes"] for row in rows]
    rows.append(
        {
            "component": "total",
            "measured_bytes": sum(live.memory_breakdown.values()),
            "predicted_bytes": sum(known) if None not in known else None,
            "source_of_prediction": _PREDICTION_SOURCES["total"],
        }
    )
    for row in rows:
        row["measured"] = human_bytes(row["measured_bytes"])
        row["predicted"] = human_bytes(row["predicted_bytes"])
    columns = [
        "component",
        "measured",
        "predicted",
        "measured_bytes",
        "predicted_bytes",
        "source_of_prediction",
    ]
    return pd.DataFrame(rows)[columns]


def tables(result: LivePass, section: str, config: ModelConfig | None = None) -> list[Table]:
    return [
        Table("live_pass", "Measured vs predicted", section, live_summary(result)),
        Table(
            "live_pass_memory",
            "Memory after the warm-up step: measured vs predicted",
            section,
            live_memory_table(result, config),
        ),
        Table(
            "live_pass_logits",
            "Logits at the initial weights",
            section,
            logits_table(result.logits, result.logits_without_final_norm, result.ln_vocab),
        ),
    ]


def figures(result: LivePass, section: str) -> list[Figure]:
    return [Figure("live_pass_phases", "Step time by phase", section, live_phase_figure(result))]


KIND = register(
    ExperimentKind(
        name="live_pass",
        title="Live pass",
        result_type=LivePass,
        run=live_pass,
        tables=tables,
        figures=figures,
        panel="live_pass",
        order=50,
    )
)
