"""The memory guard: what a new allocation can use on a device, and a refusal, before anything
is allocated, of a run that would need more.
"""
from __future__ import annotations

import os

import torch

from ..errors import ExperimentError
from ..units import human_bytes


MEMORY_HEADROOM = 0.9              # refuse a run that needs more than 90 % of what is free


def meminfo_available_bytes() -> int | None:
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
    available = meminfo_available_bytes()
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
