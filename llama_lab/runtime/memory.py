"""The memory guard: what a new allocation can use on a device, and a refusal, before anything
is allocated, of a run that would need more.
"""

from __future__ import annotations

import functools
import gc
import os
from contextlib import contextmanager
from typing import Any, Iterator, cast

import torch

from ..errors import ExperimentError
from ..units import human_bytes

MEMORY_HEADROOM = 0.9  # refuse a run that needs more than 90 % of what is free


def _read_first_line(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as fh:
            return fh.readline().strip()
    except (OSError, ValueError):
        return None


def file_field(path: str, key: str) -> int | None:
    """The number on the line of ``path`` that starts with ``key`` ("MemAvailable:  123 kB" in
    /proc/meminfo, "VmRSS: 123 kB" in /proc/self/status, "inactive_file 123" in a cgroup's
    memory.stat), in bytes where the file says kB; None when it is not there or unreadable."""
    try:
        with open(path, encoding="ascii") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) >= 2 and parts[0].rstrip(":") == key:
                    return int(parts[1]) * (1024 if parts[-1] == "kB" else 1)
    except (OSError, ValueError):
        return None
    return None


def meminfo_available_bytes(path: str = "/proc/meminfo") -> int | None:
    return file_field(path, "MemAvailable")


def _cgroup_dirs(root: str, membership: str) -> list[tuple[str, str]]:
    """(folder, version) of this process's memory cgroup and its ancestors, v2 ("0::/path")
    and v1 ("N:memory,…:/path"): a limit anywhere up the tree binds."""
    found = []
    for line in membership.splitlines():
        fields = line.strip().split(":", 2)
        if len(fields) != 3:
            continue
        number, controllers, path = fields
        parts = [p for p in path.split("/") if p and p not in (".", "..")]
        if number == "0" and controllers == "":
            bases = [(root, "v2"), (os.path.join(root, "unified"), "v2")]
        elif "memory" in controllers.split(","):
            bases = [(os.path.join(root, "memory"), "v1")]
        else:
            continue
        for base, version in bases:
            found += [(os.path.join(base, *parts[:n]), version) for n in range(len(parts), -1, -1)]
    return found


def cgroup_available_bytes(
    root: str = "/sys/fs/cgroup", proc_cgroup: str = "/proc/self/cgroup"
) -> int | None:
    """The cgroup's memory limit minus what it uses (less reclaimable page cache), the tightest
    over this cgroup and its ancestors; cgroup v2 (memory.max, memory.current) or v1
    (memory.limit_in_bytes, memory.usage_in_bytes). None when no limit is set or readable."""
    try:
        with open(proc_cgroup, encoding="ascii") as fh:
            membership = fh.read(65536)
    except (OSError, ValueError):
        membership = ""
    names = {
        "v2": ("memory.max", "memory.current", "inactive_file"),
        "v1": ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"),
    }
    candidates = [
        (
            os.path.join(d, names[v][0]),
            os.path.join(d, names[v][1]),
            os.path.join(d, "memory.stat"),
            names[v][2],
        )
        for d, v in _cgroup_dirs(root, membership)
    ]
    best = None
    for limit_path, usage_path, stat_path, reclaimable in candidates:
        limit, usage = _read_first_line(limit_path), _read_first_line(usage_path)
        if not limit or not usage or not limit.isdigit() or not usage.isdigit():
            continue  # "max": no limit at this level
        if int(limit) >= 2**60:  # v1 says "no limit" with a huge number
            continue
        used = max(0, int(usage) - (file_field(stat_path, reclaimable) or 0))
        free = max(0, int(limit) - used)
        best = free if best is None else min(best, free)
    return best


def rlimit_available_bytes() -> int | None:
    """RLIMIT_AS (the address-space limit, ``ulimit -v``) minus this process's size; None when
    unlimited."""
    try:
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError, AttributeError):
        return None
    if soft == resource.RLIM_INFINITY or soft < 0:
        return None
    size = file_field("/proc/self/status", "VmSize")
    return max(0, soft - size) if size is not None else soft


def cpu_free_bytes() -> dict[str, int]:
    """What bounds a new CPU allocation, by source: the kernel's MemAvailable, the cgroup's
    limit less its usage, RLIMIT_AS less the process size (only those that apply)."""
    sources = {
        "MemAvailable": meminfo_available_bytes(),
        "cgroup": cgroup_available_bytes(),
        "RLIMIT_AS": rlimit_available_bytes(),
    }
    found = {name: value for name, value in sources.items() if value is not None}
    if not found:
        try:
            found["free pages"] = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            pass
    return found


def free_memory_bytes(device: torch.device) -> int | None:
    """What a new allocation can use: free GPU memory; on the CPU the least of MemAvailable,
    the cgroup limit minus usage and RLIMIT_AS minus the process size. None when it cannot
    be told."""
    if device.type == "cuda":
        torch.cuda.empty_cache()
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    if device.type == "mps" and hasattr(torch.mps, "recommended_max_memory"):
        return int(torch.mps.recommended_max_memory() - torch.mps.current_allocated_memory())
    found = cpu_free_bytes()
    return min(found.values()) if found else None


def check_memory(required_bytes: int, device: torch.device | str, what: str = "this run") -> None:
    """Refuse, before anything is allocated, a run needing more than 90 % of free memory."""
    device = torch.device(device)
    free = free_memory_bytes(device)
    if free is None:
        return
    if required_bytes > MEMORY_HEADROOM * free:
        source = ""
        if device.type == "cpu":
            found = cpu_free_bytes()
            source = f", from {min(found, key=lambda name: found[name])}" if found else ""
        raise ExperimentError(
            f"{what} needs about {human_bytes(required_bytes)} on {device.type} but only "
            f"{human_bytes(free)} is free (limit {MEMORY_HEADROOM:.0%} of free{source}); use a "
            f"smaller model, batch or sequence length"
        )


# What the allocators say when they run out: torch.OutOfMemoryError (CUDA, MPS), a
# RuntimeError from the CPU allocator, or Python's MemoryError.
_OOM_TEXT = ("out of memory", "can't allocate memory", "cannot allocate memory", "failed to allocate")


def is_allocation_failure(exc: BaseException) -> bool:
    if isinstance(exc, (MemoryError, getattr(torch, "OutOfMemoryError", MemoryError))):
        return True
    return isinstance(exc, RuntimeError) and any(t in str(exc).lower() for t in _OOM_TEXT)


@contextmanager
def allocation_failures_refused(what: str = "the run") -> Iterator[None]:
    """An allocation that fails inside the block becomes an ExperimentError (a refusal the
    CLI and the app show as one message), after the memory it held is given back."""
    try:
        yield
    except BaseException as exc:  # noqa: BLE001 - re-raised unless OOM
        if not is_allocation_failure(exc):
            raise
        detail = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        del exc
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        raise ExperimentError(
            f"{what} ran out of memory part-way ({detail}); the guard's estimate was exceeded "
            f"or other programs took memory meanwhile; use a smaller model, batch or sequence "
            f"length"
        ) from None


class RssPeak:
    """The growth of this process's resident memory at its highest during the block: VmHWM
    after it, less VmRSS before it, with the high-water mark reset at the start (Linux:
    /proc/self/clear_refs). ``bytes`` is None where that cannot be done."""

    def __init__(self):
        self.bytes: int | None = None
        self._start: int | None = None

    def __enter__(self) -> "RssPeak":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> "RssPeak":
        try:
            with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
                fh.write("5")  # reset the peak to the current RSS
            self._start = file_field("/proc/self/status", "VmRSS")
        except OSError:
            self._start = None
        return self

    def stop(self) -> None:
        high = file_field("/proc/self/status", "VmHWM")
        if self._start is not None and high is not None:
            self.bytes = max(0, high - self._start)


class AllocatedPeak:
    """The CPU allocator's high point during the block, above what was allocated at its start:
    the largest running sum of the allocations and frees torch's profiler records
    (``profile_memory=True``: every c10 CPU allocation, kernels' scratch included), so the CPU's
    counterpart of CUDA's ``max_memory_allocated`` — tensor bytes, without the allocator's
    retained pages, the Python heap or library code that a resident-memory peak also counts;
    ``net_bytes``: what the block's allocations still hold at its end (what autograd keeps).
    The profiler records every operator too: use it around a few steps, not a long run."""

    def __init__(self):
        self.bytes: int | None = None
        self.net_bytes: int | None = None
        self._profile: torch.profiler.profile | None = None

    def __enter__(self) -> "AllocatedPeak":
        self._profile = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True
        )
        self._profile.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        assert self._profile is not None
        self._profile.__exit__(*exc)
        # the raw records: the function events fold each allocation into the operator's total
        events = cast(Any, self._profile.profiler).kineto_results.events()
        changes = sorted(
            (e.start_ns(), e.nbytes())
            for e in events
            if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU
        )
        running = peak = 0
        for _, change in changes:
            running += change
            peak = max(peak, running)
        self.bytes, self.net_bytes = peak, running


# glibc's mallopt parameters and the defaults restored afterwards (malloc(3))
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_MAX = -1, -2, -4
_KEPT = {_M_MMAP_MAX: 0, _M_TRIM_THRESHOLD: 2**30, _M_TOP_PAD: 2**26}
_DEFAULTS = {_M_MMAP_MAX: 65536, _M_TRIM_THRESHOLD: 128 * 1024, _M_TOP_PAD: 128 * 1024}


@functools.lru_cache(maxsize=1)
def _glibc():
    """The C library when it is glibc (mallopt, malloc_trim), else None: loaded once."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        _ = libc.gnu_get_libc_version  # glibc only: AttributeError elsewhere
    except (OSError, AttributeError):
        return None
    return libc


@contextmanager
def pages_kept(device: torch.device | str = "cpu") -> Iterator[None]:
    """On the CPU with glibc, keep freed memory in the process while a run repeats steps:
    large tensors come from the heap instead of fresh ``mmap``s, so a step reuses the pages
    the last one freed rather than faulting in new ones (on seed-demo's training step the
    page faults were ~16 % of its time; benchmarks/bench_mfu.py). Afterwards the defaults come
    back and ``malloc_trim`` returns the free pages to the system. A no-op elsewhere.

    This is the package's one allocator seam, and it changes process-wide state (every thread
    of a running server allocates under it), so nothing turns it on by default: the benchmarks
    do, and a run does when asked (``LiveSettings.keep_pages``, ``TrainSettings.keep_pages``).
    The model code never touches the allocator."""
    libc = _glibc() if torch.device(device).type == "cpu" else None
    if libc is None:
        yield
        return
    for param, value in _KEPT.items():
        libc.mallopt(param, value)
    try:
        yield
    finally:
        for param, value in _DEFAULTS.items():
            libc.mallopt(param, value)
        libc.malloc_trim(0)
