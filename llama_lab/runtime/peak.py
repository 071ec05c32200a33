"""Peak FLOP/s for MFU: a known GPU's data sheet, otherwise a timed matmul on the device."""

from __future__ import annotations

import functools
import time

import torch

from .devices import device_name, sync
from .hardware import gpu_for_device_name
from .precision import DTYPES

CPU_PEAK_MATMUL_SIZE = 1024  # n of the n×n matmul timed as the CPU's peak FLOP/s


def matmul_flops(device: torch.device | str, dtype: str, n: int, reps: int = 5) -> float:
    """Best-of-``reps`` FLOP/s of an n×n @ n×n matmul (2n³ FLOPs), after a warm-up: timed
    afresh on every call (a benchmark alternating it with its own work)."""
    device = torch.device(device)
    a = torch.randn(n, n, device=device).to(DTYPES[dtype])
    b = torch.randn(n, n, device=device).to(DTYPES[dtype])
    a @ b  # warm-up
    best = float("inf")
    for _ in range(reps):
        sync(device)
        start = time.perf_counter()
        a @ b
        sync(device)
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best  # one multiply-add = 2 FLOPs


@functools.lru_cache(maxsize=None)
def measured_matmul_flops(
    device_str: str, dtype: str, n: int = CPU_PEAK_MATMUL_SIZE, threads: int = 0
) -> float:
    """``matmul_flops``, the device's practical peak, cached per process (``threads`` keys the
    cache on torch's thread count)."""
    return matmul_flops(device_str, dtype, n)


def device_peak_flops(device: torch.device, dtype: str) -> tuple[float, str]:
    """(peak FLOP/s, where the figure comes from). A known GPU: its datasheet (bf16/fp16 tensor
    core peak, or the fp32 peak); otherwise a timed matmul on the device in that dtype."""
    if device.type == "cuda":
        gpu = gpu_for_device_name(torch.cuda.get_device_name(device))
        if gpu is not None:
            return float(
                gpu.peak_flops(dtype)
            ), f"{gpu.name} datasheet ({'fp32' if dtype == 'fp32' else 'bf16/fp16 dense'})"
        n = 4096
    else:
        n = CPU_PEAK_MATMUL_SIZE
    flops = measured_matmul_flops(str(device), dtype, n, torch.get_num_threads())
    return flops, f"measured {n}×{n} {dtype} matmul on {device_name(device)}"
