"""Calibration on the user's own device: the training MFU each live pass reaches on it (the
causal FLOPs of its steps over the device's peak — a data sheet's, or a timed matmul's on a
device without one), and the next pass's step time predicted from them before it runs."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

from ..config import ModelConfig
from .efficiency import train_flops_per_token


def causal_training_flops(cfg: ModelConfig, seq_len: int, batch: int) -> float:
    """FLOPs of one training step of B × T tokens as the kernels run it (``train_flops_per_token``)."""
    return train_flops_per_token(cfg, seq_len) * seq_len * batch


@dataclass(frozen=True)
class DeviceCalibration:
    """The training MFU measured on ``device_name`` in ``dtype``, one value per live pass."""

    device_name: str
    dtype: str
    shares: tuple[float, ...] = ()

    @property
    def train_share(self) -> float:
        """The median of the passes' MFUs: this device's calibrated training efficiency."""
        return statistics.median(self.shares)

    def with_pass(self, mfu_causal: float) -> "DeviceCalibration":
        return replace(self, shares=(*self.shares, mfu_causal))

    def predict_step_s(self, cfg: ModelConfig, seq_len: int, batch: int, peak_flops: float) -> float:
        """Seconds of one training step of ``cfg`` at B × T on this device, at its calibrated MFU."""
        return causal_training_flops(cfg, seq_len, batch) / (peak_flops * self.train_share)

    @property
    def label(self) -> str:
        return (
            f"calibrated on {self.device_name} ({self.dtype}) from {len(self.shares)} live "
            f"pass{'es' if len(self.shares) != 1 else ''}: MFU {self.train_share:.1%}"
        )
