"""What a live run may use: sizes, the memory a training step needs (the guard's estimate), and
the CPU's FLOP budget that keeps the app interactive.
"""
from __future__ import annotations

import torch

from .. import analysis
from ..config import ModelConfig
from ..errors import ExperimentError
from ..runtime.devices import pick_device
from ..runtime.memory import check_memory
from .data import TokenData, check_vocab, get_batch


def check_sizes(cfg: ModelConfig, seq_len: int, batch: int) -> None:
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 1:
        raise ExperimentError(f"seq_len={seq_len!r} must be a positive integer")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ExperimentError(f"batch={batch!r} must be a positive integer")
    if seq_len > cfg.max_seq_len:
        raise ExperimentError(f"seq_len={seq_len} exceeds the config's max_seq_len={cfg.max_seq_len}")


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


def random_batch(cfg: ModelConfig, seq_len: int, batch: int, seed: int,
                  data: TokenData | None) -> tuple[torch.Tensor, torch.Tensor]:
    """One (inputs, targets) batch, (B, T) each: from ``data`` or uniform random ids."""
    generator = torch.Generator().manual_seed(seed)
    if data is None:
        window = torch.randint(0, cfg.vocab_size, (batch, seq_len + 1), generator=generator)
        return window[:, :-1], window[:, 1:]
    check_vocab(data, cfg.vocab_size)
    return get_batch(data.train, batch, seq_len, generator)


CPU_FLOP_BUDGET = 3e12   # ≈ a minute on two busy cores at ~50 GFLOP/s: live runs stay interactive


def check_cpu_budget(flops: float, device: str, what: str, hint: str) -> None:
    """Refuse (ExperimentError) a run of more than CPU_FLOP_BUDGET FLOPs on the CPU."""
    if pick_device(device).type == "cpu" and flops > CPU_FLOP_BUDGET:
        raise ExperimentError(
            f"{what} needs about {flops / 1e12:.1f} TFLOP; live runs on the CPU are limited to "
            f"{CPU_FLOP_BUDGET / 1e12:.0f} TFLOP (about a minute); {hint}")


def guard(run_cfg: ModelConfig, seq_len: int, batch: int, device: str, *, passes: float,
          what: str, hint: str, dtype: str = "fp32") -> None:
    """experiments' memory guard (a training step of ``run_cfg`` at B × T in ``dtype``), then
    the CPU budget for ``passes`` training steps (3 × forward FLOPs each)."""
    check_memory(training_bytes_needed(run_cfg, seq_len, batch, dtype),
                             pick_device(device), what)
    check_cpu_budget(passes * analysis.count_flops(run_cfg, seq_len, batch).training_step,
                     device, what, hint)


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
