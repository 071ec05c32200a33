"""Which device a live run uses: CUDA, then Apple MPS, then the CPU; and a device-wide sync for
timings.
"""

from __future__ import annotations

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
