"""Which device a live run uses: CUDA, then Apple MPS, then the CPU; and a device-wide sync for
timings.
"""

from __future__ import annotations

import platform

import torch

from ..errors import ExperimentError

DEVICES = ("auto", "cpu", "cuda", "mps")  # what a live run may ask for
PAGE_DEVICES = ("auto", "cpu", "cuda")  # the pages' choice (MPS comes with "auto")


def mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def pick_device(name: str = "auto") -> torch.device:
    """``auto``: CUDA, then MPS, then CPU. Asking for a device that is not there is an error."""
    name = str(name).lower()
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        return torch.device("mps") if mps_available() else torch.device("cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ExperimentError(
                f"device={name!r} was asked for but CUDA is not available on "
                f"this machine (torch {torch.__version__}); use device='auto' or 'cpu'"
            )
        return torch.device(name)
    if name == "mps":
        if not mps_available():
            raise ExperimentError(
                "device='mps' was asked for but Apple MPS is not available; use device='auto' or 'cpu'"
            )
        return torch.device("mps")
    raise ExperimentError(f"device={name!r} must be one of 'auto', 'cpu', 'cuda', 'mps'")


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "mps":
        return "Apple MPS"
    return f"CPU ({torch.get_num_threads()} threads)"


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


# the vector instruction sets a CPU's math libraries choose their kernels by (beside every avx512*
# and amx* one)
VECTOR_FLAGS = frozenset({"sse4_2", "avx", "avx2", "fma", "f16c"})


def cpu_kernels(path: str = "/proc/cpuinfo") -> str:
    """What picks this CPU's math kernels: MKL and oneDNN dispatch on the processor's family and
    model and its vector instructions ("x86_64 6/207 avx avx2 avx512f … amx_tile"); the machine
    and processor names where /proc/cpuinfo is not there. Two machines with the same string run
    the same kernels: a long training run reproduces to the last bit only on them (its float sums
    in the same order), while anywhere else its rounding drifts and a chaotic run drifts far."""
    fields: dict[str, str] = {}
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                key = key.strip()
                if not key and fields:  # the first processor's block is enough
                    break
                fields.setdefault(key, value.strip())
    except OSError:
        fields = {}
    if "flags" not in fields:
        return f"{platform.machine()} {platform.processor()}".strip()
    flags = sorted(
        flag for flag in fields["flags"].split() if flag in VECTOR_FLAGS or flag.startswith(("avx512", "amx"))
    )
    model = f"{fields.get('cpu family', '?')}/{fields.get('model', '?')}"
    return " ".join([platform.machine(), model, *flags])
