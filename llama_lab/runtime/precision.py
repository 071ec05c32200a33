"""Precision of a live run: fp32, or mixed precision (fp32 weights, gradients and AdamW state,
autocast maths; fp16 with a GradScaler). fp16 is refused on the CPU.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from ..errors import ExperimentError

# The dtypes a live run (training or decoding) computes in.
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def check_dtype(dtype: str, device: torch.device) -> torch.dtype:
    if dtype not in DTYPES:
        raise ExperimentError(f"dtype={dtype!r} must be one of {', '.join(DTYPES)}")
    if dtype == "fp16" and device.type == "cpu":
        raise ExperimentError(
            "dtype='fp16' is refused on the CPU: its fp16 kernels are slow "
            "emulation; use 'bf16' (autocast) or 'fp32' there, fp16 on a GPU"
        )
    return DTYPES[dtype]


@dataclass(frozen=True)
class Precision:
    """fp32, or mixed precision: fp32 weights/grads/AdamW state, autocast maths."""

    device: torch.device
    name: str  # "fp32" | "bf16" | "fp16"

    @property
    def autocast_dtype(self) -> torch.dtype | None:
        return None if self.name == "fp32" else DTYPES[self.name]

    def autocast(self):
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    def grad_scaler(self) -> torch.amp.GradScaler | None:
        """fp16's narrow exponent needs loss scaling; bf16 has fp32's range and does not."""
        if self.name == "fp16":
            return torch.amp.GradScaler(self.device.type)
        return None


def make_precision(dtype: str, device: torch.device) -> Precision:
    check_dtype(dtype, device)
    return Precision(device, dtype)
