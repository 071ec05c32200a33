"""What a live run may use: sizes, the memory a training step needs (the guard's estimate), and
the CPU's FLOP budget that keeps the app interactive.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .. import analysis
from ..config import ModelConfig
from ..errors import ExperimentError
from ..model.loss import chunk_rows
from ..runtime.devices import pick_device
from ..runtime.memory import check_memory
from .data import TokenData, check_vocab, get_batch

# Upper bounds of a training run's knobs (both front ends): far above any sensible value, low
# enough that a typo (--steps 10**18, --lr 1e38, --seed 10**20) is refused with the rule.
MAX_STEPS = 1_000_000
MAX_SEED = 2**31 - 1
MAX_SEEDS = 32  # seeds one measurement repeats over
MAX_LR = 10.0


def check_count(name: str, value: Any, low: int, high: int) -> None:
    """``value`` is an integer in [low, high], else an ExperimentError naming the rule."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ExperimentError(f"{name}={value!r} must be an integer from {low:,} to {high:,}")


def check_real(name: str, value: Any, low: float, high: float) -> None:
    """``value`` is a finite number in (low, high], else an ExperimentError naming the rule."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or not low < value <= high:
        raise ExperimentError(f"{name}={value!r} must be a finite number > {low:g} and ≤ {high:g}")


def check_sizes(cfg: ModelConfig, seq_len: int, batch: int) -> None:
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 1:
        raise ExperimentError(f"seq_len={seq_len!r} must be a positive integer")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ExperimentError(f"batch={batch!r} must be a positive integer")
    if seq_len > cfg.max_seq_len:
        raise ExperimentError(f"seq_len={seq_len} exceeds the config's max_seq_len={cfg.max_seq_len}")


def training_bytes_needed(
    cfg: ModelConfig, seq_len: int, batch: int, dtype: str, optimizer: bool = True
) -> int:
    """The guard's estimate: the peak of one step of our training loop (fp32 weights, AdamW,
    autocast for bf16/fp16), the larger of its two high points (``training_peak``)."""
    return max(training_peak(cfg, seq_len, batch, dtype, optimizer).values())


# Resident memory above the live tensors at backward's high point, as a share of the bytes
# saved for backward: measured on seed-demo (T = 128, fused AdamW, 2 cores, glibc) 0.12, 0.36
# and 0.41 of them at B = 4, 16 and 32 in float32, 0.21 at B = 4 under bf16 autocast; the
# largest is taken. (CUDA's caching allocator reuses the freed blocks: there it is a margin.)
ALLOCATOR_RETENTION = 0.4

# Shared-library code a process faults in while it builds a model and runs its first steps:
# file-backed resident pages of libtorch and its kernels, counted by the resident-memory peak
# on top of every tensor, and the same at any size. Measured on seed-demo from before the build
# to the end of the timed steps (B = T = 1 in float32, B = 4, T = 128 under bf16 autocast):
# 21 and 26 MB with torch 2.13.0+cpu, 101 and 106 MB with 2.14.1+cu130 (a CUDA build's
# libtorch is larger). The allowance covers them by a quarter or more; without it the estimate
# was 0.97× the measured peak at B = T = 1 on the CUDA build. (On a GPU it is a small margin.)
LIBRARY_PAGES = 128 * 2**20 if (torch.version.cuda or getattr(torch.version, "hip", None)) else 32 * 2**20


def training_peak(
    cfg: ModelConfig, seq_len: int, batch: int, dtype: str, optimizer: bool = True
) -> dict[str, int]:
    """Bytes alive at the two high points of a training step, each written out:

    - ``backward_at_loss``: weights (fp32, 4 B/param), the AdamW moments m and v (8 B/param,
      from the second step on), autocast's 16-bit weight copies (bf16/fp16 only), every tensor
      saved for backward (``analysis.autocast_activation_bytes``: 16-bit under autocast but
      for the float32 residual stream; the model's own chunked loss saves the gradients of
      the hidden states and of the head's weight, never the B·T·V logits), one chunk's
      float32 logits (alive while the loss runs), plus the larger of the loss's 16-bit
      transients under autocast (its 16-bit logits and probabilities) and the parameters'
      gradients (4 B/param): backward frees the activations while the gradients grow, but the
      CPU's allocator keeps the freed pages, so both are counted — and on top,
      ``ALLOCATOR_RETENTION`` of the saved bytes for backward's own temporaries, which take
      fresh pages too;
    - ``optimizer_update``: weights, gradients (4 B/param) and moments. The fused AdamW
      (``train.step.make_optimizer``) allocates no temporaries; the
      resident memory measured at B = T = 1 on seed-demo sits 46 MB (6 %) above these states,
      so one largest parameter's float32 size is added as an allowance (allocator and
      interpreter).

    Both add the float32 draw buffer of the largest parameter (the build fills each tensor
    through one; the allocator keeps that memory for later) and ``LIBRARY_PAGES``, the library
    code the first steps fault in. Without an optimizer (a gradient measurement) there are no
    moments and no update."""
    P = analysis.count_params(cfg).total
    N, V = batch * seq_len, cfg.vocab_size
    half = dtype != "fp32"
    moments = 8 * P if optimizer else 0
    casts = analysis.weight_bytes(cfg, dtype) if half else 0
    chunk = min(N, chunk_rows(V)) * V  # one chunk of the loss's logits
    loss_half = 2 * 2 * chunk if half else 0
    saved = analysis.autocast_activation_bytes(cfg, seq_len, batch, dtype)
    draw = 4 * analysis.largest_parameter(cfg)
    retained = ALLOCATOR_RETENTION * saved
    logits = 4 * chunk  # one chunk of the loss's float32 logits
    peaks = {
        "backward_at_loss": draw
        + 4 * P
        + moments
        + casts
        + saved
        + logits
        + max(loss_half, 4 * P)
        + retained,
        "optimizer_update": draw + 4 * P + 4 * P + moments + (draw if optimizer else 0),
    }
    return {name: int(value) + LIBRARY_PAGES for name, value in peaks.items()}


def random_batch(
    cfg: ModelConfig, seq_len: int, batch: int, seed: int, data: TokenData | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """One (inputs, targets) batch, (B, T) each: from ``data`` or uniform random ids."""
    generator = torch.Generator().manual_seed(seed)
    if data is None:
        window = torch.randint(0, cfg.vocab_size, (batch, seq_len + 1), generator=generator)
        return window[:, :-1], window[:, 1:]
    check_vocab(data, cfg.vocab_size)
    return get_batch(data.train, batch, seq_len, generator)


CPU_FLOP_BUDGET = 3e12  # ≈ a minute on two busy cores at ~50 GFLOP/s: live runs stay interactive


def check_cpu_budget(flops: float, device: str, what: str, hint: str) -> None:
    """Refuse (ExperimentError) a run of more than CPU_FLOP_BUDGET FLOPs on the CPU."""
    if pick_device(device).type == "cpu" and flops > CPU_FLOP_BUDGET:
        raise ExperimentError(
            f"{what} needs about {flops / 1e12:.1f} TFLOP; live runs on the CPU are limited to "
            f"{CPU_FLOP_BUDGET / 1e12:.0f} TFLOP (about a minute); {hint}"
        )


def guard(
    run_cfg: ModelConfig,
    seq_len: int,
    batch: int,
    device: str,
    *,
    passes: float,
    what: str,
    hint: str,
    dtype: str = "fp32",
) -> None:
    """experiments' memory guard (a training step of ``run_cfg`` at B × T in ``dtype``), then
    the CPU budget for ``passes`` training steps (3 × forward FLOPs each)."""
    check_memory(training_bytes_needed(run_cfg, seq_len, batch, dtype), pick_device(device), what)
    check_cpu_budget(passes * analysis.count_flops(run_cfg, seq_len, batch).training_step, device, what, hint)


# A live pass starts at most this long and this wide (the sidebar's T and B, capped).
LIVE_SEQ_LEN, LIVE_BATCH = 128, 8


def live_workload(seq_len: int, batch: int) -> tuple[int, int]:
    """The sidebar's workload capped for a live pass: (T, B)."""
    return min(seq_len, LIVE_SEQ_LEN), min(batch, LIVE_BATCH)


def runs_live_quickly(cfg: ModelConfig, seq_len: int, batch: int) -> bool:
    """Whether a few training steps of ``cfg`` at ``live_workload`` stay within a tenth of the
    CPU budget: the Live pass page then offers the model itself rather than a small copy."""
    step = analysis.count_flops(cfg, *live_workload(seq_len, batch)).training_step
    return 4 * step <= CPU_FLOP_BUDGET / 10
