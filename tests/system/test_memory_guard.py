"""Issue 11: an honest memory guard. Free memory is the least of MemAvailable, the cgroup's
limit less its usage and RLIMIT_AS less the process size; the estimate covers the real peak
(measured against the resident-memory high-water mark); an allocation that fails part-way is
a refusal in both front ends, never a traceback. Here the processes: RLIMIT_AS in a real one,
the estimate against a fresh process's peak, the allocator setting; the rules by hand:
tests/unit/runtime/test_memory.py."""

import json
import subprocess
import sys
import textwrap

import pytest


def _run(code: str, timeout: int = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.slow
def test_rlimit_as_is_honoured_by_the_guard_and_the_cli():
    """Under `ulimit -v` (RLIMIT_AS) a run that would not fit the address space left is
    refused by name, before it allocates — in the API and the CLI."""
    out = _run("""
        import resource, sys
        from llama_lab import cli
        from llama_lab.runtime import memory
        with open("/proc/self/status") as fh:
            size = next(int(l.split()[1]) * 1024 for l in fh if l.startswith("VmSize"))
        resource.setrlimit(resource.RLIMIT_AS, (size + 2**30, resource.RLIM_INFINITY))
        left = memory.rlimit_available_bytes()
        assert 0.9 * 2**30 < left <= 2**30, left
        sys.exit(cli.main(["bench", "--preset", "tinyllama-1.1b", "--seq-len", "1",
                           "--batch", "1", "--steps", "1", "--no-budget"]))
    """)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "from RLIMIT_AS" in lines[0] and "Traceback" not in out.stderr


# ---- the estimate against the real peak ---------------------------------------------------------
PEAK_SCRIPT = """
    import json, sys, torch
    from llama_lab import experiments
    from llama_lab.config import PRESETS
    from llama_lab.train.budgets import training_bytes_needed
    torch.set_num_threads(2)
    cfg = PRESETS["seed-demo"]
    T, B, dtype = {T}, {B}, "{dtype}"
    r = experiments.live_pass(cfg, T, B, experiments.LiveSettings(device="cpu", dtype=dtype, iters=2))
    print(json.dumps({{"measured": r.peak_memory_bytes, "source": r.peak_memory_source,
                      "estimate": training_bytes_needed(cfg, T, B, dtype)}}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("T,B,dtype", [(128, 16, "fp32"), (128, 4, "bf16")])
def test_the_estimate_is_within_15_percent_of_the_measured_peak(T, B, dtype):
    """The live pass of the seed's demo model (43.8 M parameters) in a fresh process: the
    guard's estimate against the growth of the resident-memory high-water mark (VmHWM) from
    before the model is built to after the timed steps."""
    out = _run(PEAK_SCRIPT.format(T=T, B=B, dtype=dtype))
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert "VmHWM" in r["source"]
    ratio = r["estimate"] / r["measured"]
    assert 0.85 <= ratio <= 1.15, (r, ratio)


@pytest.mark.slow
def test_at_tiny_batches_the_estimate_still_covers_the_peak():
    """At B = T = 1 the tensors are nearly all weights, gradients and AdamW's moments, and the
    library code the first steps fault in (file-backed pages, 21 MB with torch 2.13.0+cpu,
    101 MB with 2.14.1+cu130) is a visible share of the peak: the estimate counts it
    (budgets.LIBRARY_PAGES, 32 / 128 MiB) and covers the measured peak, 1.12× and 1.13×
    there (0.97× on the CUDA build before)."""
    out = _run(PEAK_SCRIPT.format(T=1, B=1, dtype="fp32"))
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert 1.0 <= r["estimate"] / r["measured"] <= 1.3, r


# ---- the allocator setting of repeated steps --------------------------------------------------
PAGES_SCRIPT = """
    import ctypes, torch
    from llama_lab.runtime.memory import pages_kept
    libc = ctypes.CDLL("libc.so.6")
    class Info(ctypes.Structure):            # struct mallinfo2 (glibc ≥ 2.33)
        _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks",
                    "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
    libc.mallinfo2.restype = Info
    def mmapped():
        return libc.mallinfo2().hblkhd        # bytes in mmap'd chunks
    big = 64 * 2**20
    x = torch.empty(big, dtype=torch.uint8); default = mmapped(); del x
    with pages_kept("cpu"):
        x = torch.empty(big, dtype=torch.uint8); kept = mmapped(); del x
        try:
            with pages_kept("meta"):         # other devices: nothing changes
                raise KeyError("passes through")
        except KeyError:
            pass
    x = torch.empty(big, dtype=torch.uint8); after = mmapped(); del x
    print(default >= big, kept < big, after >= big)
"""


@pytest.mark.slow
def test_pages_kept_takes_large_tensors_from_the_heap_and_restores_the_defaults():
    """glibc: a 64 MiB tensor is an mmap of its own by default (returned, and faulted in
    afresh, every time); inside ``pages_kept`` it comes from the heap; afterwards from mmap."""
    out = _run(PAGES_SCRIPT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True", "True"], out.stdout
