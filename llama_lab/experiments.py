"""Live experiments: run the model for real and measure what ``analysis`` predicts.

Everything here runs on the GPU when there is one (CUDA, then Apple MPS) and the CPU otherwise:

- ``live_pass``: one training step timed phase by phase (forward, backward, AdamW), with the
  initial loss beside ln(V), achieved TFLOP/s and MFU, peak memory, the activation memory
  measured from the tensors autograd saves vs ``analysis.activation_bytes``, and logits
  statistics with and without the final norm (the seed's "forgot the final norm" bug).
- ``gradnorms`` / ``depth_sweep``: per-layer gradient norms of the same weights arranged as
  Post-LN and Pre-LN (Xiong et al. 2020, "On Layer Normalization in the Transformer
  Architecture", Theorem 1: the last FFN's gradient is flat in depth L under Post-LN and
  shrinks like 1/√L under Pre-LN).
- ``train`` / ``compare_runs``: short AdamW runs with warmup and LR schedules, gradient norms
  every step, validation loss, and divergence reported (step + hint) instead of raised.
- ``decode_benchmark``: KV-cache decoding for the MHA, GQA and MQA variants of one model,
  cache bytes read from the cache tensors next to ``analysis.kv_cache_bytes_per_token``.
- ``bench``: SPEC's ``bench`` JSON.

Precision: ``fp32`` runs fp32 weights and maths. ``bf16``/``fp16`` keep fp32 weights, grads and
AdamW state and run the maths under ``torch.autocast`` (mixed precision, fp16 with a
GradScaler). fp16 is refused on the CPU (its CPU kernels are slow emulation that says nothing
about fp16 training); bf16 autocast is allowed there. ``decode_benchmark`` holds the weights
and the cache in the chosen dtype itself, as inference does.

Every refusal (no such device, a run that will not fit in memory, bad sizes) raises
``ExperimentError`` with the figures; nothing is allocated before the memory guard has passed.
"""
from __future__ import annotations

import contextlib
import functools
import math
import os
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Generator, Iterable, Sequence

import torch
import torch.nn.functional as F

from . import analysis, hardware
from .config import ModelConfig, seed_ffn_hidden
from .data import TokenData, check_length, check_vocab, get_batch, load_builtin
from .model import CausalLM, build_model
from .units import human_bytes

Progress = Callable[[float, str], None]

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
MEMORY_HEADROOM = 0.9              # refuse a run that needs more than 90 % of what is free
CPU_PEAK_MATMUL_SIZE = 1024        # n of the n×n matmul timed as the CPU's peak FLOP/s


class ExperimentError(ValueError):
    """A run that cannot or should not start; the message says why, with the figures."""


# ================================================================================================
# Devices, precision, memory guard
# ================================================================================================
def _mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def pick_device(name: str = "auto") -> torch.device:
    """``auto``: CUDA, then MPS, then CPU. Asking for a device that is not there is an error."""
    name = str(name).lower()
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        return torch.device("mps") if _mps_available() else torch.device("cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ExperimentError(f"device={name!r} was asked for but CUDA is not available on "
                                  f"this machine (torch {torch.__version__}); use device='auto' or 'cpu'")
        return torch.device(name)
    if name == "mps":
        if not _mps_available():
            raise ExperimentError("device='mps' was asked for but Apple MPS is not available; "
                                  "use device='auto' or 'cpu'")
        return torch.device("mps")
    raise ExperimentError(f"device={name!r} must be one of 'auto', 'cpu', 'cuda', 'mps'")


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "mps":
        return "Apple MPS"
    return f"CPU ({torch.get_num_threads()} threads)"


def check_dtype(dtype: str, device: torch.device) -> torch.dtype:
    if dtype not in DTYPES:
        raise ExperimentError(f"dtype={dtype!r} must be one of {', '.join(DTYPES)}")
    if dtype == "fp16" and device.type == "cpu":
        raise ExperimentError("dtype='fp16' is refused on the CPU: its fp16 kernels are slow "
                              "emulation; use 'bf16' (autocast) or 'fp32' there, fp16 on a GPU")
    return DTYPES[dtype]


@dataclass(frozen=True)
class Precision:
    """fp32, or mixed precision: fp32 weights/grads/AdamW state, autocast maths."""
    device: torch.device
    name: str                                  # "fp32" | "bf16" | "fp16"

    @property
    def autocast_dtype(self) -> torch.dtype | None:
        return None if self.name == "fp32" else DTYPES[self.name]

    def autocast(self):
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    def grad_scaler(self):
        """fp16's narrow exponent needs loss scaling; bf16 has fp32's range and does not."""
        if self.name == "fp16":
            return torch.amp.GradScaler(self.device.type)
        return None


def make_precision(dtype: str, device: torch.device) -> Precision:
    check_dtype(dtype, device)
    return Precision(device, dtype)


def _meminfo_available_bytes() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024          # the file says kB (KiB)
    except (OSError, ValueError, IndexError):
        return None
    return None


def free_memory_bytes(device: torch.device) -> int | None:
    """What a new allocation can use: free GPU memory, or the RAM the kernel calls available
    (MemAvailable; else free physical pages). None when it cannot be told."""
    if device.type == "cuda":
        torch.cuda.empty_cache()
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    if device.type == "mps" and hasattr(torch.mps, "recommended_max_memory"):
        return int(torch.mps.recommended_max_memory() - torch.mps.current_allocated_memory())
    available = _meminfo_available_bytes()
    if available is not None:
        return available
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(required_bytes: int, device: torch.device | str, what: str = "this run") -> None:
    """Refuse, before anything is allocated, a run needing more than 90 % of free memory."""
    device = torch.device(device)
    free = free_memory_bytes(device)
    if free is None:
        return
    if required_bytes > MEMORY_HEADROOM * free:
        raise ExperimentError(
            f"{what} needs about {human_bytes(required_bytes)} on {device.type} but only "
            f"{human_bytes(free)} is free (limit {MEMORY_HEADROOM:.0%} of free); use a smaller "
            f"model, batch or sequence length")


def training_bytes_needed(cfg: ModelConfig, seq_len: int, batch: int, dtype: str,
                          optimizer: bool = True) -> int:
    """The guard's estimate: analysis.training_memory (fp32 or mixed precision), less the AdamW
    state when no optimizer step is taken."""
    # Our bf16/fp16 runs keep fp32 weights, gradients and AdamW state and compute under autocast,
    # which also keeps a 16-bit copy of every weight for the step: fp32 estimate + 2 bytes/param.
    # (fp32 activations bound autocast's mixed fp32/16-bit saved tensors from above.)
    estimate = analysis.training_memory(cfg, seq_len, batch, dtype="fp32", mixed_precision=False)
    skipped = () if optimizer else ("optimizer_moments", "master_weights")
    needed = sum(v for k, v in estimate.components.items() if k not in skipped)
    if dtype != "fp32":
        needed += analysis.weight_bytes(cfg, dtype)
    return int(needed)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def _check_sizes(cfg: ModelConfig, seq_len: int, batch: int) -> None:
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 1:
        raise ExperimentError(f"seq_len={seq_len!r} must be a positive integer")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ExperimentError(f"batch={batch!r} must be a positive integer")
    if seq_len > cfg.max_seq_len:
        raise ExperimentError(f"seq_len={seq_len} exceeds the config's max_seq_len={cfg.max_seq_len}")


def _random_batch(cfg: ModelConfig, seq_len: int, batch: int, seed: int,
                  data: TokenData | None) -> tuple[torch.Tensor, torch.Tensor]:
    """One (inputs, targets) batch, (B, T) each: from ``data`` or uniform random ids."""
    generator = torch.Generator().manual_seed(seed)
    if data is None:
        window = torch.randint(0, cfg.vocab_size, (batch, seq_len + 1), generator=generator)
        return window[:, :-1], window[:, 1:]
    check_vocab(data, cfg.vocab_size)
    return get_batch(data.train, batch, seq_len, generator)


def _json_float(x: float | None) -> float | None:
    """JSON has no NaN/inf: a diverged number is reported as null."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


# ================================================================================================
# Peak FLOP/s for MFU
# ================================================================================================
@functools.lru_cache(maxsize=None)
def measured_matmul_flops(device_str: str, dtype: str, n: int = CPU_PEAK_MATMUL_SIZE,
                          threads: int = 0) -> float:
    """Best-of-5 FLOP/s of an n×n @ n×n matmul (2n³ FLOPs): the device's practical peak.
    Cached per process (``threads`` keys the cache on torch's thread count)."""
    device = torch.device(device_str)
    a = torch.randn(n, n, device=device).to(DTYPES[dtype])
    b = torch.randn(n, n, device=device).to(DTYPES[dtype])
    a @ b                                                           # warm-up
    best = float("inf")
    for _ in range(5):
        _sync(device)
        start = time.perf_counter()
        a @ b
        _sync(device)
        best = min(best, time.perf_counter() - start)
    return 2 * n ** 3 / best                                        # one multiply-add = 2 FLOPs


def device_peak_flops(device: torch.device, dtype: str) -> tuple[float, str]:
    """(peak FLOP/s, where the figure comes from). A known GPU: its datasheet (bf16/fp16 tensor
    core peak, or the fp32 peak); otherwise a timed matmul on the device in that dtype."""
    if device.type == "cuda":
        gpu = hardware.gpu_for_device_name(torch.cuda.get_device_name(device))
        if gpu is not None:
            return float(gpu.peak_flops(dtype)), f"{gpu.name} datasheet ({'fp32' if dtype == 'fp32' else 'bf16/fp16 dense'})"
        n = 4096
    else:
        n = CPU_PEAK_MATMUL_SIZE
    flops = measured_matmul_flops(str(device), dtype, n, torch.get_num_threads())
    return flops, f"measured {n}×{n} {dtype} matmul on {device_name(device)}"


# ================================================================================================
# Logits statistics
# ================================================================================================
@dataclass(frozen=True)
class LogitStats:
    std: float
    max_abs: float
    max_prob_mean: float        # mean over tokens of the softmax's largest probability
    entropy_mean: float         # nats; ln(V) = uniform, 0 = saturated softmax

    @classmethod
    def of(cls, logits: torch.Tensor) -> "LogitStats":
        logits = logits.detach().float().reshape(-1, logits.shape[-1])     # (B·T, V)
        log_probs = logits.log_softmax(-1)
        probs = log_probs.exp()
        entropy = -(probs * log_probs).sum(-1)                             # (B·T,)
        return cls(std=logits.std().item(), max_abs=logits.abs().max().item(),
                   max_prob_mean=probs.max(-1).values.mean().item(),
                   entropy_mean=entropy.mean().item())

    def to_dict(self) -> dict:
        return {k: _json_float(v) for k, v in self.__dict__.items()}


@torch.no_grad()
def logit_stats(model: CausalLM, inputs: torch.Tensor, precision: Precision) -> tuple[LogitStats, LogitStats]:
    """(with the final norm, without it) on the same inputs."""
    with precision.autocast():
        return LogitStats.of(model(inputs)), LogitStats.of(model.logits_without_final_norm(inputs))


# ================================================================================================
# Memory accounting on any device
# ================================================================================================
_CAST_OR_VIEW = {"ToCopyBackward0", "TBackward0", "ViewBackward0", "TransposeBackward0",
                 "PermuteBackward0", "ExpandBackward0", "UnsafeViewBackward0"}


def _parameter_behind(tensor: torch.Tensor, params: set[int]) -> bool:
    """True when ``tensor`` is a parameter seen through casts and views only — autocast's
    low-precision copy of a weight, say — by walking its autograd graph."""
    fn = tensor.grad_fn
    for _ in range(6):
        if fn is None:
            return False
        if type(fn).__name__ == "AccumulateGrad":
            return id(fn.variable) in params
        if type(fn).__name__ not in _CAST_OR_VIEW or not fn.next_functions:
            return False
        fn = fn.next_functions[0][0]
    return False


class SavedTensorMeter:
    """Bytes of the tensors autograd saves for backward, each storage counted once. Parameters
    (and views of them) are excluded; autocast's low-precision copies of the weights are counted
    apart (``weight_cast_bytes``): what remains is the activation memory."""

    def __init__(self, model: torch.nn.Module):
        params = list(model.parameters())
        self._param_storages = {p.untyped_storage().data_ptr() for p in params}
        self._param_ids = {id(p) for p in params}
        self._activations: dict[int, int] = {}
        self._weight_casts: dict[int, int] = {}

    def _pack(self, tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        ptr = storage.data_ptr()
        if ptr in self._param_storages or ptr in self._activations or ptr in self._weight_casts:
            return tensor
        if _parameter_behind(tensor, self._param_ids):
            self._weight_casts[ptr] = storage.nbytes()
        else:
            self._activations[ptr] = storage.nbytes()
        return tensor

    @property
    def bytes(self) -> int:
        return sum(self._activations.values())

    @property
    def weight_cast_bytes(self) -> int:
        return sum(self._weight_casts.values())

    def __enter__(self):
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc):
        return self._hooks.__exit__(*exc)


def _tensor_bytes(tensors: Iterable[torch.Tensor]) -> int:
    storages = {}
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.device.type != "meta":
            storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return sum(storages.values())


def state_bytes(model: torch.nn.Module, optimizer: torch.optim.Optimizer | None) -> dict[str, int]:
    """Weights, gradients and optimizer state as the tensors hold them (tied weights once)."""
    params = list(model.parameters())
    optimizer_tensors = []
    if optimizer is not None:
        for state in optimizer.state.values():
            optimizer_tensors += [v for v in state.values() if isinstance(v, torch.Tensor)]
    return {"weights": _tensor_bytes(params),
            "gradients": _tensor_bytes(p.grad for p in params if p.grad is not None),
            "optimizer": _tensor_bytes(optimizer_tensors)}


# ================================================================================================
# One training step, timed
# ================================================================================================
@dataclass(frozen=True)
class StepTimes:
    forward_s: float
    backward_s: float
    optimizer_s: float

    @property
    def total_s(self) -> float:
        return self.forward_s + self.backward_s + self.optimizer_s


def make_optimizer(model: torch.nn.Module, lr: float, weight_decay: float = 0.1) -> torch.optim.AdamW:
    """AdamW, β = (0.9, 0.95) as LLaMA; decay on matrices only (not norms, biases)."""
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8)


def next_token_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over B·T positions; logits (B, T, V), targets (B, T)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))


def total_grad_norm(model: torch.nn.Module) -> torch.Tensor:
    """L2 norm of every gradient together (a 0-dim tensor: no device sync)."""
    norms = [torch.linalg.vector_norm(p.grad.float()) for p in model.parameters() if p.grad is not None]
    return torch.linalg.vector_norm(torch.stack(norms))


def training_step(model, optimizer, inputs, targets, precision: Precision, scaler=None,
                  grad_clip: float | None = None,
                  step_before_update: Callable[[], None] | None = None,
                  measure_grad_norm: bool = True) -> tuple[float, float | None, StepTimes]:
    """Forward (with the loss), backward, (clip), AdamW; returns (loss, total gradient norm
    before clipping or None, times). The phases are timed with the device synchronised between
    them; the gradient norm, when asked for, is timed with the optimizer."""
    device = precision.device
    _sync(device)
    t0 = time.perf_counter()
    with precision.autocast():
        logits = model(inputs)                                      # (B, T, V)
    loss = next_token_loss(logits, targets)
    _sync(device)
    t1 = time.perf_counter()
    (scaler.scale(loss) if scaler is not None else loss).backward()
    _sync(device)
    t2 = time.perf_counter()
    if scaler is not None:
        scaler.unscale_(optimizer)
    grad_norm = total_grad_norm(model) if measure_grad_norm else None
    if step_before_update is not None:
        step_before_update()
    if grad_clip is not None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    _sync(device)
    t3 = time.perf_counter()
    return (loss.item(), grad_norm.item() if grad_norm is not None else None,
            StepTimes(t1 - t0, t2 - t1, t3 - t2))


# ================================================================================================
# Live pass
# ================================================================================================
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
    initial_loss: float                  # at the initial weights (the warm-up iteration)
    ln_vocab: float                      # the loss of a uniform prediction
    last_loss: float                     # the last timed iteration, after ≥ 1 AdamW update
    warmup_s: float                      # the excluded first iteration (compilation included)
    forward_ms: float                    # medians over the timed iterations
    backward_ms: float
    optimizer_ms: float
    step_ms: float
    tokens_per_s: float
    training_flops: float                # analysis.count_flops(...).training_step
    achieved_tflops: float
    peak_flops: float
    peak_flops_source: str
    mfu: float
    achieved_tflops_causal: float      # counting the causal half of the attention scores (what
    mfu_causal: float                  # SDPA with is_causal computes); the SPEC figure counts T×T
    peak_memory_bytes: int
    peak_memory_source: str
    memory_breakdown: dict               # weights, gradients, optimizer, weight_casts, activations
    activation_bytes_measured: int       # saved-for-backward tensors, each storage once
    activation_bytes_estimated: int      # analysis.activation_bytes: every tensor in `dtype`;
                                         # autocast keeps norms, residuals and the loss in fp32,
                                         # so bf16/fp16 runs measure more (fp32: equal)
    estimated_training_bytes: int        # what the memory guard checked
    logits: LogitStats                   # with the final norm, initial weights
    logits_without_final_norm: LogitStats

    @property
    def activation_ratio(self) -> float:
        return self.activation_bytes_measured / max(1, self.activation_bytes_estimated)

    def to_dict(self) -> dict:
        out = {}
        for name, value in self.__dict__.items():
            if isinstance(value, LogitStats):
                out[name] = value.to_dict()
            elif isinstance(value, float):
                out[name] = _json_float(value)
            else:
                out[name] = value
        out["activation_ratio"] = self.activation_ratio
        return out


def live_pass(cfg: ModelConfig, seq_len: int, batch: int, device: str = "auto",
              dtype: str = "fp32", seed: int = 0, compile: bool = False, iters: int = 1,
              lr: float = 3e-4, data: TokenData | None = None,
              progress: Progress | None = None) -> LivePass:
    """A warm-up training step at the initial weights (loss, logits statistics, saved-tensor
    bytes) and ``iters`` timed steps (per-phase medians)."""
    dev = pick_device(device)
    precision = make_precision(dtype, dev)
    _check_sizes(cfg, seq_len, batch)
    if iters < 1:
        raise ExperimentError(f"iters={iters} must be at least 1")
    if compile and dev.type != "cuda":
        raise ExperimentError("compile=True is offered on CUDA only (torch.compile's CPU "
                              "backend needs a C++ toolchain and says little about GPU speed)")
    required = training_bytes_needed(cfg, seq_len, batch, dtype)
    check_memory(required, dev, f"a training step of this model (B={batch}, T={seq_len}, {dtype})")

    if progress:
        progress(0.0, "building the model")
    torch.manual_seed(seed)
    model = build_model(cfg, device=dev, seed=seed)
    inputs, targets = (t.to(dev) for t in _random_batch(cfg, seq_len, batch, seed, data))
    optimizer = make_optimizer(model, lr)
    scaler = precision.grad_scaler()
    stats_with, stats_without = logit_stats(model, inputs, precision)
    runner = torch.compile(model) if compile else model

    if progress:
        progress(0.1, "measuring the tensors saved for backward")
    with SavedTensorMeter(model) as meter:                     # forward only; the graph is freed
        with precision.autocast():
            logits = model(inputs)
        next_token_loss(logits, targets)
        del logits

    if progress:
        progress(0.15, "warm-up step (excluded from timing)")
    gradient_bytes: dict[str, int] = {}
    start = time.perf_counter()
    initial_loss, _, _ = training_step(
        runner, optimizer, inputs, targets, precision, scaler,
        step_before_update=lambda: gradient_bytes.update(state_bytes(model, None)),
        measure_grad_norm=False)
    warmup_s = time.perf_counter() - start
    memory = state_bytes(model, optimizer) | {"gradients": gradient_bytes["gradients"],
                                              "weight_casts": meter.weight_cast_bytes,
                                              "activations": meter.bytes}

    times, last_loss = [], initial_loss
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    for i in range(iters):
        if progress:
            progress(0.2 + 0.8 * i / iters, f"timed step {i + 1}/{iters}")
        last_loss, _, step_times = training_step(runner, optimizer, inputs, targets, precision,
                                                 scaler, measure_grad_norm=False)
        times.append(step_times)

    if dev.type == "cuda":
        peak_memory, peak_source = int(torch.cuda.max_memory_allocated(dev)), "CUDA allocator peak"
    else:
        peak_memory, peak_source = int(sum(memory.values())), \
            "weights + gradients + AdamW state + tensors saved for backward (activations and " \
            "autocast's weight copies)"
    step_s = statistics.median(t.total_s for t in times)
    flop_count = analysis.count_flops(cfg, seq_len, batch)
    flops = flop_count.training_step
    flops_causal = 3 * flop_count.forward_causal                      # forward + backward = 3×
    peak, peak_source_flops = device_peak_flops(dev, dtype)
    achieved = flops / step_s
    if progress:
        progress(1.0, "done")
    return LivePass(
        device=str(dev), device_name=device_name(dev), dtype=dtype, seq_len=seq_len, batch=batch,
        iters=iters, compiled=bool(compile), n_params=sum(p.numel() for p in model.parameters()),
        initial_loss=initial_loss, ln_vocab=math.log(cfg.vocab_size), last_loss=last_loss,
        warmup_s=warmup_s,
        forward_ms=1e3 * statistics.median(t.forward_s for t in times),
        backward_ms=1e3 * statistics.median(t.backward_s for t in times),
        optimizer_ms=1e3 * statistics.median(t.optimizer_s for t in times),
        step_ms=1e3 * step_s, tokens_per_s=batch * seq_len / step_s,
        training_flops=float(flops), achieved_tflops=achieved / 1e12, peak_flops=peak,
        peak_flops_source=peak_source_flops, mfu=achieved / peak,
        achieved_tflops_causal=flops_causal / step_s / 1e12, mfu_causal=flops_causal / step_s / peak,
        peak_memory_bytes=peak_memory, peak_memory_source=peak_source, memory_breakdown=memory,
        activation_bytes_measured=meter.bytes,
        activation_bytes_estimated=int(analysis.activation_bytes(cfg, seq_len, batch, dtype=dtype)),
        estimated_training_bytes=required, logits=stats_with, logits_without_final_norm=stats_without)


def bench(cfg: ModelConfig, device: str = "auto", steps: int = 5, seq_len: int | None = None,
          batch: int = 4, dtype: str = "fp32", compile: bool = False, seed: int = 0) -> dict:
    """SPEC ``bench``: forward + backward + AdamW, ``steps`` timed steps after one warm-up."""
    seq_len = seq_len or min(128, cfg.max_seq_len)
    result = live_pass(cfg, seq_len, batch, device=device, dtype=dtype, seed=seed,
                       compile=compile, iters=steps)
    return {
        "tokens_per_s": result.tokens_per_s,
        "step_ms": result.step_ms,
        "achieved_tflops": result.achieved_tflops,
        "peak_memory_bytes": result.peak_memory_bytes,
        "device": result.device,
        "device_name": result.device_name,
        "mfu": result.mfu,
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


# ================================================================================================
# Gradient norms: Post-LN vs Pre-LN
# ================================================================================================
PARAM_GROUPS = {   # module name inside a block → group
    "q_proj": "q", "k_proj": "k", "v_proj": "v", "o_proj": "o",
    "gate_proj": "gate", "up_proj": "up", "down_proj": "down",
    "input_layernorm": "norms", "post_attention_layernorm": "norms",
}
GROUP_ORDER = ("q", "k", "v", "o", "gate", "up", "down", "norms")


def _norm_tensor(tensors: Iterable[torch.Tensor], device: torch.device) -> torch.Tensor:
    """L2 norm of all entries of all tensors together, as a 0-dim tensor (no device sync)."""
    squares = [t.detach().float().pow(2).sum() for t in tensors]
    return torch.stack(squares).sum().sqrt() if squares else torch.zeros((), device=device)


def _norm(tensors: Iterable[torch.Tensor]) -> float:
    return _norm_tensor(tensors, torch.device("cpu")).item()


def layer_grad_norms(model: CausalLM) -> list[float]:
    """‖∇θ_l‖ over every parameter of block l (index 0 = nearest the input); one device sync."""
    device = model.lm_head.weight.device
    return torch.stack([_norm_tensor((p.grad for p in layer.parameters() if p.grad is not None), device)
                        for layer in model.model.layers]).tolist()


def group_grad_norms(model: CausalLM) -> dict[str, list[float]]:
    groups: dict[str, list[list[torch.Tensor]]] = {}
    n_layers = len(model.model.layers)
    for i, layer in enumerate(model.model.layers):
        for name, p in layer.named_parameters():
            group = PARAM_GROUPS[name.split(".")[-2]]
            if p.grad is not None:
                groups.setdefault(group, [[] for _ in range(n_layers)])[i].append(p.grad)
    return {g: [_norm(ts) for ts in groups[g]] for g in GROUP_ORDER if g in groups}


@dataclass(frozen=True)
class GradNorms:
    norm_position: str
    loss: float
    layer_grad_norm: list                # per block, index 0 = nearest the input
    ffn_out_grad_norm: list              # ‖∇W_down‖ per block
    residual_grad_norm: list             # ‖∂L/∂x_l‖ at each block's input
    group_grad_norm: dict                # group → per-block list
    embedding_grad_norm: float
    total_grad_norm: float

    def to_dict(self) -> dict:
        return {"loss": _json_float(self.loss),
                "layer_grad_norm": [_json_float(x) for x in self.layer_grad_norm],
                "ffn_out_grad_norm": [_json_float(x) for x in self.ffn_out_grad_norm],
                "residual_grad_norm": [_json_float(x) for x in self.residual_grad_norm],
                "group_grad_norm": {g: [_json_float(x) for x in v] for g, v in self.group_grad_norm.items()},
                "embedding_grad_norm": _json_float(self.embedding_grad_norm),
                "total_grad_norm": _json_float(self.total_grad_norm)}


def measure_grad_norms(model: CausalLM, inputs: torch.Tensor, targets: torch.Tensor) -> GradNorms:
    """One forward/backward; block inputs are caught by forward pre-hooks and their gradients
    by tensor hooks."""
    n_layers = len(model.model.layers)
    residual: list[float | None] = [None] * n_layers

    def catch_input(index: int):
        def pre_hook(module, args):
            x = args[0]                                            # (B, T, C) block input
            if x.requires_grad:
                x.register_hook(lambda grad: residual.__setitem__(index, _norm([grad])))
        return pre_hook

    handles = [layer.register_forward_pre_hook(catch_input(i))
               for i, layer in enumerate(model.model.layers)]
    try:
        model.zero_grad(set_to_none=True)
        loss = next_token_loss(model(inputs), targets)
        loss.backward()
    finally:
        for handle in handles:
            handle.remove()
    return GradNorms(
        norm_position=model.cfg.norm_position, loss=loss.item(),
        layer_grad_norm=layer_grad_norms(model),
        ffn_out_grad_norm=[_norm([layer.mlp.down_proj.weight.grad]) for layer in model.model.layers],
        residual_grad_norm=residual, group_grad_norm=group_grad_norms(model),
        embedding_grad_norm=_norm([model.model.embed_tokens.weight.grad]),
        total_grad_norm=_norm(p.grad for p in model.parameters() if p.grad is not None))


@dataclass(frozen=True)
class GradNormComparison:
    post: GradNorms
    pre: GradNorms
    seq_len: int
    batch: int
    seed: int

    def to_dict(self) -> dict:
        """SPEC ``gradnorms``: {"post": R, "pre": R}."""
        return {"post": self.post.to_dict(), "pre": self.pre.to_dict()}

    def to_frame(self):
        """One row per (norm position, block): the three SPEC lists and every group."""
        import pandas as pd
        rows = []
        for result in (self.post, self.pre):
            for i in range(len(result.layer_grad_norm)):
                row = {"norm_position": result.norm_position, "layer": i,
                       "layer_grad_norm": result.layer_grad_norm[i],
                       "ffn_out_grad_norm": result.ffn_out_grad_norm[i],
                       "residual_grad_norm": result.residual_grad_norm[i]}
                row.update({f"grad_{g}": v[i] for g, v in result.group_grad_norm.items()})
                rows.append(row)
        return pd.DataFrame(rows)


def _same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def gradnorms(cfg: ModelConfig, seq_len: int, batch: int, seed: int = 0,
              data: TokenData | None = None, device: str = "cpu",
              progress: Progress | None = None) -> GradNormComparison:
    """The config built as Post-LN and as Pre-LN — same shapes, so the same seed gives the
    same weights (checked) — one forward/backward each on the same batch (random ids unless
    ``data``), fp32."""
    _check_sizes(cfg, seq_len, batch)
    dev = pick_device(device)
    check_memory(2 * training_bytes_needed(cfg, seq_len, batch, "fp32", optimizer=False), dev,
                 f"two forward/backward passes (Post-LN and Pre-LN, B={batch}, T={seq_len})")
    inputs, targets = (t.to(dev) for t in _random_batch(cfg, seq_len, batch, seed, data))
    results = {}
    models = {}
    for i, position in enumerate(("post", "pre")):
        if progress:
            progress(i / 2, f"{position}-LN forward/backward")
        models[position] = build_model(cfg.replace(norm_position=position), device=dev, seed=seed)
        results[position] = measure_grad_norms(models[position], inputs, targets)
        if i == 1 and not _same_weights(models["post"], models["pre"]):
            raise RuntimeError("Post-LN and Pre-LN models got different initial weights")
        models[position].zero_grad(set_to_none=True)
    if progress:
        progress(1.0, "done")
    return GradNormComparison(post=results["post"], pre=results["pre"], seq_len=seq_len,
                              batch=batch, seed=seed)


def loglog_fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares (slope, intercept) of log y = intercept + slope·log x (y ∝ x^slope)."""
    lx = [math.log(x) for x in xs]
    ly = [math.log(y) for y in ys]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    slope = sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)
    return slope, my - slope * mx


def loglog_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    return loglog_fit(xs, ys)[0]


@dataclass(frozen=True)
class DepthSweep:
    depths: list
    post: list                # ‖∇W_down‖ of the last block, Post-LN, per depth
    pre: list
    post_slope: float         # log-log slope; Xiong et al. Thm 1: ≈ 0
    pre_slope: float          # ≈ -0.5 (1/√L)

    def to_dict(self) -> dict:
        return {"depths": list(self.depths), "post": self.post, "pre": self.pre,
                "post_slope": self.post_slope, "pre_slope": self.pre_slope}

    def to_frame(self):
        import pandas as pd
        return pd.DataFrame({"n_layers": self.depths, "post_last_ffn_grad_norm": self.post,
                             "pre_last_ffn_grad_norm": self.pre})


def depth_sweep(cfg: ModelConfig, depths: Sequence[int] = (2, 4, 8, 16, 32, 48),
                seq_len: int = 64, batch: int = 4, seed: int = 0, data: TokenData | None = None,
                device: str = "cpu", progress: Progress | None = None) -> DepthSweep:
    """Last block's FFN output-projection gradient norm at initialisation vs depth L."""
    if len(set(depths)) < 2 or any(int(d) < 1 for d in depths):
        raise ExperimentError(f"depths={tuple(depths)} needs at least two different depths ≥ 1")
    post, pre = [], []
    for i, depth in enumerate(depths):
        if progress:
            progress(i / len(depths), f"depth {depth}")
        result = gradnorms(cfg.replace(n_layers=int(depth)), seq_len, batch, seed=seed,
                           data=data, device=device)
        post.append(result.post.ffn_out_grad_norm[-1])
        pre.append(result.pre.ffn_out_grad_norm[-1])
    if progress:
        progress(1.0, "done")
    depths = [int(d) for d in depths]
    return DepthSweep(depths=depths, post=post, pre=pre, post_slope=loglog_slope(depths, post),
                      pre_slope=loglog_slope(depths, pre))


# ================================================================================================
# Training
# ================================================================================================
SCHEDULES = ("constant", "cosine", "linear")


def lr_at(step: int, *, base_lr: float, warmup_steps: int, total_steps: int, schedule: str,
          min_lr_ratio: float = 0.1) -> float:
    """Learning rate of update ``step`` (0-based): linear warmup to base_lr over warmup_steps
    updates, then constant, or a cosine / linear decay reaching min_lr_ratio·base_lr at the
    last update."""
    if schedule not in SCHEDULES:
        raise ExperimentError(f"schedule={schedule!r} must be one of {', '.join(SCHEDULES)}")
    if step < warmup_steps:
        return base_lr * (step + 1) / warmup_steps
    if schedule == "constant":
        return base_lr
    decay_span = max(1, total_steps - 1 - warmup_steps)
    progress = min(1.0, (step - warmup_steps) / decay_span)          # 0 → 1 over the decay
    if schedule == "cosine":
        coeff = 0.5 * (1 + math.cos(math.pi * progress))
    else:
        coeff = 1 - progress
    min_lr = min_lr_ratio * base_lr
    return min_lr + (base_lr - min_lr) * coeff


def divergence_reason(loss: float, grad_norm: float, step: int, running_min: float | None,
                      warmup_steps: int, spike_factor: float,
                      loss_scaling: bool = False) -> str | None:
    """Why training at ``step`` counts as diverged, or None: a non-finite loss or gradient, or
    (after warmup) a loss above spike_factor × the lowest loss so far. Under fp16 loss scaling
    an overflowing gradient is normal (the scaler skips that update and lowers the scale)."""
    if not math.isfinite(loss):
        return f"loss became {loss} at step {step}"
    if not math.isfinite(grad_norm) and not loss_scaling:
        return f"gradient norm became {grad_norm} at step {step}"
    if step >= warmup_steps and running_min is not None and loss > spike_factor * running_min:
        return (f"loss spiked to {loss:.4g} at step {step}, more than {spike_factor:g}× the "
                f"lowest loss so far ({running_min:.4g})")
    return None


def divergence_hint(cfg: ModelConfig, lr: float, warmup_steps: int, grad_clip: float | None,
                    dtype: str) -> str:
    hints = [f"lower the learning rate (try lr={lr / 10:.2g})"]
    if warmup_steps == 0:
        hints.append("add warmup (e.g. 10% of the steps)")
    if grad_clip is None:
        hints.append("clip gradients (grad_clip=1.0)")
    if cfg.norm_position == "post":
        hints.append("use Pre-LN (norm_position='pre'), which trains stably without warmup")
    if dtype == "fp16":
        hints.append("use bf16 rather than fp16 (fp16 overflows above 65504)")
    return "; ".join(hints)


@dataclass(frozen=True)
class TrainRun:
    label: str
    config: dict
    settings: dict                        # lr, warmup, schedule, clip, sizes, seed, device, dtype, data
    n_params: int
    steps_run: int
    loss: list                            # per step, the batch's loss before the update
    lr: list                              # per step, the learning rate of the update
    grad_norm: list                       # per step, total gradient norm before clipping
    layer_grad_norm: list                 # per step, per block (for heatmaps)
    val_step: list                        # updates done when the validation loss was taken
    val_loss: list
    diverged: bool
    divergence_step: int | None
    divergence_reason: str | None
    hint: str | None
    logits: LogitStats                    # after training, on a validation batch
    logits_without_final_norm: LogitStats
    wall_s: float
    tokens_per_s: float
    achieved_tflops: float

    @property
    def final_loss(self) -> float | None:
        return self.loss[-1] if self.loss else None

    @property
    def final_val_loss(self) -> float | None:
        return self.val_loss[-1] if self.val_loss else None

    def summary(self) -> dict:
        return {"label": self.label, "steps_run": self.steps_run,
                "first_loss": _json_float(self.loss[0]) if self.loss else None,
                "final_loss": _json_float(self.final_loss),
                "initial_val_loss": _json_float(self.val_loss[0]) if self.val_loss else None,
                "final_val_loss": _json_float(self.final_val_loss),
                "diverged": self.diverged, "divergence_step": self.divergence_step,
                "divergence_reason": self.divergence_reason, "hint": self.hint,
                "n_params": self.n_params, "wall_s": self.wall_s,
                "tokens_per_s": self.tokens_per_s, "achieved_tflops": self.achieved_tflops}

    def to_dict(self) -> dict:
        return {"label": self.label, "config": self.config, "settings": self.settings,
                "n_params": self.n_params, "steps_run": self.steps_run,
                "loss": [_json_float(x) for x in self.loss], "lr": self.lr,
                "grad_norm": [_json_float(x) for x in self.grad_norm],
                "layer_grad_norm": [[_json_float(x) for x in row] for row in self.layer_grad_norm],
                "val_step": self.val_step, "val_loss": [_json_float(x) for x in self.val_loss],
                "diverged": self.diverged, "divergence_step": self.divergence_step,
                "divergence_reason": self.divergence_reason, "hint": self.hint,
                "logits": self.logits.to_dict(),
                "logits_without_final_norm": self.logits_without_final_norm.to_dict(),
                "wall_s": self.wall_s, "tokens_per_s": self.tokens_per_s,
                "achieved_tflops": self.achieved_tflops}

    def to_frame(self):
        """One row per step: step, loss, lr, grad_norm, val_loss (where taken)."""
        import pandas as pd
        val = dict(zip(self.val_step, self.val_loss))
        return pd.DataFrame({"step": range(self.steps_run), "loss": self.loss, "lr": self.lr,
                             "grad_norm": self.grad_norm,
                             "val_loss_after": [val.get(s + 1) for s in range(self.steps_run)]})


@torch.no_grad()
def evaluate(model: CausalLM, val_batches, precision: Precision) -> float:
    losses = []
    for inputs, targets in val_batches:
        with precision.autocast():
            logits = model(inputs)
        losses.append(next_token_loss(logits, targets).item())
    return statistics.fmean(losses)


def iter_train(cfg: ModelConfig, steps: int, lr: float, warmup_steps: int = 0,
               schedule: str = "cosine", data: TokenData | None = None, seq_len: int = 64,
               batch: int = 8, seed: int = 0, *, grad_clip: float | None = None,
               weight_decay: float = 0.1, eval_every: int | None = None, eval_batches: int = 4,
               device: str = "auto", dtype: str = "fp32", spike_factor: float = 3.0,
               min_lr_ratio: float = 0.1, label: str | None = None,
               progress: Progress | None = None) -> Generator[dict, None, TrainRun]:
    """Train, yielding one JSON-ready dict per step; the generator returns the TrainRun.
    A divergence ends the run early with the step, the reason and a hint — never raises."""
    _check_sizes(cfg, seq_len, batch)
    if steps < 1:
        raise ExperimentError(f"steps={steps} must be at least 1")
    if not (lr > 0 and math.isfinite(lr)):
        raise ExperimentError(f"lr={lr} must be a finite number > 0")
    if warmup_steps < 0:
        raise ExperimentError(f"warmup_steps={warmup_steps} must be ≥ 0")
    if grad_clip is not None and not grad_clip > 0:
        raise ExperimentError(f"grad_clip={grad_clip} must be > 0 (or None for no clipping)")
    lr_at(0, base_lr=lr, warmup_steps=warmup_steps, total_steps=steps, schedule=schedule)
    data = data if data is not None else load_builtin()
    check_vocab(data, cfg.vocab_size)
    check_length(data.train, seq_len, "training split")
    check_length(data.val, seq_len, "validation split")
    dev = pick_device(device)
    precision = make_precision(dtype, dev)
    check_memory(training_bytes_needed(cfg, seq_len, batch, dtype), dev,
                 f"training this model (B={batch}, T={seq_len}, {dtype})")
    eval_every = eval_every or max(1, steps // 10)

    torch.manual_seed(seed)
    model = build_model(cfg, device=dev, seed=seed)
    optimizer = make_optimizer(model, lr, weight_decay)
    scaler = precision.grad_scaler()
    train_stream = (tuple(t.to(dev) for t in pair)
                    for pair in _batches(data.train, batch, seq_len, seed))
    val_stream = _batches(data.val, batch, seq_len, seed + 1)
    val_batches = [tuple(t.to(dev) for t in next(val_stream)) for _ in range(eval_batches)]
    flops_per_step = analysis.count_flops(cfg, seq_len, batch).training_step

    record_loss, record_lr, record_grad, record_layers = [], [], [], []
    val_step, val_loss = [0], [evaluate(model, val_batches, precision)]
    diverged_at, reason, running_min = None, None, None
    start = time.perf_counter()
    compute_s = 0.0
    for step in range(steps):
        step_lr = lr_at(step, base_lr=lr, warmup_steps=warmup_steps, total_steps=steps,
                        schedule=schedule, min_lr_ratio=min_lr_ratio)
        for group in optimizer.param_groups:
            group["lr"] = step_lr
        inputs, targets = next(train_stream)
        layers: list[float] = []
        loss, grad_norm, times = training_step(
            model, optimizer, inputs, targets, precision, scaler, grad_clip,
            step_before_update=lambda: layers.extend(layer_grad_norms(model)))
        compute_s += times.total_s
        record_loss.append(loss)
        record_lr.append(step_lr)
        record_grad.append(grad_norm)
        record_layers.append(layers)
        reason = divergence_reason(loss, grad_norm, step, running_min, warmup_steps, spike_factor,
                                   loss_scaling=scaler is not None)
        running_min = loss if running_min is None else min(running_min, loss)
        record = {"step": step, "loss": _json_float(loss), "lr": step_lr,
                  "grad_norm": _json_float(grad_norm), "step_ms": 1e3 * times.total_s,
                  "layer_grad_norm": [_json_float(x) for x in layers]}
        if reason is None and ((step + 1) % eval_every == 0 or step + 1 == steps):
            val_step.append(step + 1)
            val_loss.append(evaluate(model, val_batches, precision))
            record["val_loss"] = _json_float(val_loss[-1])
        if reason is not None:
            diverged_at = step
            record["diverged"] = reason
        if progress:
            progress((step + 1) / steps, f"step {step + 1}/{steps}, loss {loss:.4g}")
        yield record
        if reason is not None:
            break

    stats_with, stats_without = logit_stats(model, val_batches[0][0], precision)
    steps_run = len(record_loss)
    return TrainRun(
        label=label or f"{cfg.norm_position}-LN lr={lr:g} warmup={warmup_steps} {schedule}",
        config=cfg.to_dict(),
        settings={"steps": steps, "lr": lr, "warmup_steps": warmup_steps, "schedule": schedule,
                  "grad_clip": grad_clip, "weight_decay": weight_decay, "seq_len": seq_len,
                  "batch": batch, "seed": seed, "device": str(dev), "dtype": dtype,
                  "data": data.source, "eval_every": eval_every, "eval_batches": eval_batches,
                  "spike_factor": spike_factor, "min_lr_ratio": min_lr_ratio},
        n_params=sum(p.numel() for p in model.parameters()), steps_run=steps_run,
        loss=record_loss, lr=record_lr, grad_norm=record_grad, layer_grad_norm=record_layers,
        val_step=val_step, val_loss=val_loss, diverged=diverged_at is not None,
        divergence_step=diverged_at, divergence_reason=reason,
        hint=divergence_hint(cfg, lr, warmup_steps, grad_clip, dtype) if diverged_at is not None else None,
        logits=stats_with, logits_without_final_norm=stats_without,
        wall_s=time.perf_counter() - start,
        tokens_per_s=steps_run * batch * seq_len / compute_s,
        achieved_tflops=steps_run * flops_per_step / compute_s / 1e12)


def _batches(tokens: torch.Tensor, batch: int, seq_len: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    while True:
        yield get_batch(tokens, batch, seq_len, generator)


def train(cfg: ModelConfig, steps: int, lr: float, warmup_steps: int = 0,
          schedule: str = "cosine", data: TokenData | None = None, seq_len: int = 64,
          batch: int = 8, seed: int = 0, on_step: Callable[[dict], None] | None = None,
          **options) -> TrainRun:
    """``iter_train`` run to the end, each step's dict passed to ``on_step``. Options:
    grad_clip, weight_decay, eval_every, eval_batches, device, dtype, spike_factor,
    min_lr_ratio, label, progress."""
    loop = iter_train(cfg, steps, lr, warmup_steps, schedule, data, seq_len, batch, seed, **options)
    while True:
        try:
            record = next(loop)
        except StopIteration as finished:
            return finished.value
        if on_step is not None:
            on_step(record)


# ---- comparing runs ----------------------------------------------------------------------------
@dataclass(frozen=True)
class RunSpec:
    """One arm of a comparison: a config and its optimisation recipe."""
    label: str
    cfg: ModelConfig
    lr: float
    warmup_steps: int = 0
    schedule: str = "cosine"
    grad_clip: float | None = None


@dataclass(frozen=True)
class RunComparison:
    runs: dict                         # label → TrainRun (same data, same batches, same seed)

    def summary_frame(self):
        import pandas as pd
        return pd.DataFrame([run.summary() for run in self.runs.values()])

    def to_frame(self):
        """Long format: label, step, loss, lr, grad_norm."""
        import pandas as pd
        frames = [run.to_frame().assign(label=label) for label, run in self.runs.items()]
        return pd.concat(frames, ignore_index=True)

    def to_dict(self) -> dict:
        return {"runs": {label: run.to_dict() for label, run in self.runs.items()},
                "summary": [run.summary() for run in self.runs.values()]}


def compare_runs(specs: Sequence[RunSpec], steps: int, data: TokenData | None = None,
                 seq_len: int = 64, batch: int = 8, seed: int = 0,
                 on_step: Callable[[str, dict], None] | None = None,
                 progress: Progress | None = None, **options) -> RunComparison:
    """Train every spec on the same data with the same seed (so the same batch at each step)."""
    labels = [spec.label for spec in specs]
    if len(set(labels)) != len(labels):
        raise ExperimentError(f"run labels must differ, got {labels}")
    runs = {}
    for i, spec in enumerate(specs):
        if progress:
            progress(i / len(specs), f"run {i + 1}/{len(specs)}: {spec.label}")
        callback = (lambda record, label=spec.label: on_step(label, record)) if on_step else None
        runs[spec.label] = train(spec.cfg, steps, spec.lr, spec.warmup_steps, spec.schedule,
                                 data, seq_len, batch, seed, on_step=callback,
                                 grad_clip=spec.grad_clip, label=spec.label, **options)
    if progress:
        progress(1.0, "done")
    return RunComparison(runs=runs)


def norm_position_specs(cfg: ModelConfig, lr: float, warmup_steps: int,
                        schedule: str = "cosine") -> list[RunSpec]:
    """Post-LN and Pre-LN, each without and with warmup."""
    return [RunSpec(f"{name}-LN, {'warmup ' + str(w) if w else 'no warmup'}",
                    cfg.replace(norm_position=position), lr, w, schedule)
            for position, name in (("post", "Post"), ("pre", "Pre")) for w in (0, warmup_steps)]


def recipe_2017(cfg: ModelConfig) -> ModelConfig:
    """The original decoder recipe at cfg's size (seed table, left column)."""
    return cfg.replace(norm_position="post", norm_type="layernorm", pos_encoding="sinusoidal",
                       ffn_type="relu", ffn_hidden=4 * cfg.d_model, bias=True, final_norm=False,
                       init="xavier", n_kv_heads=cfg.n_heads)


def recipe_llama(cfg: ModelConfig) -> ModelConfig:
    """The LLaMA recipe at cfg's size (seed table, right column)."""
    return cfg.replace(norm_position="pre", norm_type="rmsnorm", pos_encoding="rope",
                       ffn_type="swiglu", ffn_hidden=seed_ffn_hidden(cfg.d_model), bias=False,
                       final_norm=True, init="normal")


def ablation_specs(kind: str, cfg: ModelConfig, lr: float, warmup_steps: int,
                   schedule: str = "cosine") -> list[RunSpec]:
    """Pairs from the seed's comparison table, everything else equal:
    ``norm_position`` (Post/Pre-LN × warmup off/on), ``recipe`` (2017 vs LLaMA, each with its
    schedule), ``ffn`` (ReLU 4d vs SwiGLU 8d/3: about equal parameters), ``norm_type``
    (LayerNorm vs RMSNorm)."""
    if kind == "norm_position":
        return norm_position_specs(cfg, lr, warmup_steps, schedule)
    if kind == "recipe":
        return [RunSpec("2017 recipe (warmup + linear decay)", recipe_2017(cfg), lr, warmup_steps, "linear"),
                RunSpec("LLaMA recipe (warmup + cosine)", recipe_llama(cfg), lr, warmup_steps, "cosine")]
    if kind == "ffn":
        d = cfg.d_model
        return [RunSpec(f"ReLU FFN 4d ({4 * d})", cfg.replace(ffn_type="relu", ffn_hidden=4 * d),
                        lr, warmup_steps, schedule),
                RunSpec(f"SwiGLU FFN 8d/3 ({seed_ffn_hidden(d)})",
                        cfg.replace(ffn_type="swiglu", ffn_hidden=seed_ffn_hidden(d)),
                        lr, warmup_steps, schedule)]
    if kind == "norm_type":
        return [RunSpec("LayerNorm", cfg.replace(norm_type="layernorm"), lr, warmup_steps, schedule),
                RunSpec("RMSNorm", cfg.replace(norm_type="rmsnorm"), lr, warmup_steps, schedule)]
    raise ExperimentError(f"ablation kind={kind!r} must be one of 'norm_position', 'recipe', "
                          f"'ffn', 'norm_type'")


# ================================================================================================
# KV-cache decoding: MHA vs GQA vs MQA
# ================================================================================================
@dataclass(frozen=True)
class DecodeRow:
    variant: str
    n_kv_heads: int
    context_len: int
    prefill_ms: float
    ms_per_token: float
    cache_tokens: int
    cache_bytes_measured: int            # storage allocated by the cache tensors, filled exactly
    cache_bytes_predicted: int           # analysis.kv_cache_bytes_per_token × batch × tokens


@dataclass(frozen=True)
class DecodeBench:
    device: str
    dtype: str
    batch: int
    new_tokens: int
    rows: list

    @property
    def bytes_agree(self) -> bool:
        return all(r.cache_bytes_measured == r.cache_bytes_predicted for r in self.rows)

    def to_dict(self) -> dict:
        return {"device": self.device, "dtype": self.dtype, "batch": self.batch,
                "new_tokens": self.new_tokens, "bytes_agree": self.bytes_agree,
                "rows": [dict(r.__dict__) for r in self.rows]}

    def to_frame(self):
        import pandas as pd
        return pd.DataFrame([r.__dict__ for r in self.rows])


@torch.inference_mode()
def _time_decode(model: CausalLM, prompt: torch.Tensor, new_tokens: int, device: torch.device):
    """(prefill seconds, median seconds per new token, the cache)."""
    cache = model.new_cache(prompt.shape[0], prompt.shape[1] + new_tokens)
    _sync(device)
    start = time.perf_counter()
    logits = model(prompt, cache)                                          # prefill
    _sync(device)
    prefill_s = time.perf_counter() - start
    per_token = []
    for _ in range(new_tokens):
        token = logits[:, -1:].argmax(-1)                                  # (B, 1) greedy
        _sync(device)
        start = time.perf_counter()
        logits = model(token, cache)
        _sync(device)
        per_token.append(time.perf_counter() - start)
    return prefill_s, statistics.median(per_token), cache


def decode_benchmark(cfg: ModelConfig, context_lens: Sequence[int] = (32, 64, 128, 256),
                     batch: int = 1, device: str = "auto", dtype: str = "fp32",
                     new_tokens: int = 8, seed: int = 0,
                     progress: Progress | None = None) -> DecodeBench:
    """Greedy decoding with the KV cache after a prefill of each context length, for each
    attention variant; weights and cache in ``dtype``."""
    context_lens = sorted({int(c) for c in context_lens})
    if not context_lens or context_lens[0] < 1:
        raise ExperimentError(f"context_lens={context_lens} must be positive lengths")
    if new_tokens < 1:
        raise ExperimentError(f"new_tokens={new_tokens} must be at least 1")
    if context_lens[-1] + new_tokens > cfg.max_seq_len:
        raise ExperimentError(f"context {context_lens[-1]} + {new_tokens} new tokens exceeds "
                              f"max_seq_len={cfg.max_seq_len}")
    _check_sizes(cfg, context_lens[-1], batch)
    dev = pick_device(device)
    torch_dtype = check_dtype(dtype, dev)
    variants = analysis.attention_variants(cfg, distinct=True)
    worst = analysis.inference_memory(variants["mha"], context_lens[-1] + new_tokens, batch, dtype)
    check_memory(int(worst.total_bytes), dev, f"decoding (B={batch}, context {context_lens[-1]}, {dtype})")

    generator = torch.Generator().manual_seed(seed)
    prompt_all = torch.randint(0, cfg.vocab_size, (batch, context_lens[-1]), generator=generator).to(dev)
    rows = []
    for v, (name, vcfg) in enumerate(variants.items()):
        model = build_model(vcfg, device=dev, dtype=torch_dtype, seed=seed).eval()
        _time_decode(model, prompt_all[:, :context_lens[0]], 2, dev)     # warm-up, excluded
        per_token_bytes = analysis.kv_cache_bytes_per_token(vcfg, dtype)
        for c, context in enumerate(context_lens):
            if progress:
                progress((v * len(context_lens) + c) / (len(variants) * len(context_lens)),
                         f"{name.upper()} at context {context}")
            prefill_s, token_s, cache = _time_decode(model, prompt_all[:, :context], new_tokens, dev)
            rows.append(DecodeRow(
                variant=name, n_kv_heads=vcfg.n_kv_heads, context_len=context,
                prefill_ms=1e3 * prefill_s, ms_per_token=1e3 * token_s, cache_tokens=cache.length,
                cache_bytes_measured=int(cache.allocated_bytes()),
                cache_bytes_predicted=int(per_token_bytes * batch * cache.length)))
        del model
    if progress:
        progress(1.0, "done")
    return DecodeBench(device=str(dev), dtype=dtype, batch=batch, new_tokens=new_tokens, rows=rows)
