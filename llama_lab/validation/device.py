"""Calibration on the user's own device, from the live passes run on it.

Each live pass (``experiments.live_pass``) measures three terms of this device:

- **per-step overhead** — forward + backward of a single token (B = T = 1): kernel launches,
  Python and synchronisation, the part of a step that does not grow with the tokens;
- **matmul rate** — the FLOP/s forward + backward reach on the pass's own tokens (the causal
  training FLOPs of the step, ``train_flops_per_token``), once the overhead is set aside;
- **update time per parameter** — AdamW reads and writes every parameter's weight, gradient and
  two moments once a step: memory bound, it grows with the parameters, not the tokens.

How the first two combine depends on the device. A CPU runs the Python and the arithmetic on
the same cores, so they add: ``overhead + flops / rate``. A GPU runs its kernels while the CPU
is still launching the next ones, so a step takes the longer of the two:
``max(overhead, flops / rate)``; a pass no longer than its overhead was launch bound and says
nothing about the rate. The rate never exceeds the device's peak. The next pass's step time is
predicted from these terms before it runs.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

from ..analysis import count_params
from ..config import ModelConfig
from .efficiency import train_flops_per_token

LAUNCH_BOUND = 1.25  # a GPU pass within this factor of its overhead tells nothing of the rate


def causal_training_flops(cfg: ModelConfig, seq_len: int, batch: int) -> float:
    """FLOPs of one training step of B × T tokens as the kernels run it (``train_flops_per_token``)."""
    return train_flops_per_token(cfg, seq_len) * seq_len * batch


@dataclass(frozen=True)
class PassTiming:
    """What a live pass measured, as the calibration uses it."""

    flops: float  # causal training FLOPs of the step
    params: int  # parameters AdamW updates
    compute_s: float  # forward + backward
    optimizer_s: float  # the AdamW update
    overhead_s: float  # forward + backward of one token

    @classmethod
    def of(cls, cfg: ModelConfig, seq_len: int, batch: int, live) -> "PassTiming":
        """From an ``experiments.LivePass`` of ``cfg`` at B × T (a compiled pass has no probe: 0)."""
        return cls(
            causal_training_flops(cfg, seq_len, batch),
            count_params(cfg).total,
            (live.step_ms - live.optimizer_ms) / 1e3,
            live.optimizer_ms / 1e3,
            (live.overhead_ms or 0.0) / 1e3,
        )


@dataclass(frozen=True)
class DeviceTerms:
    rate: float | None  # FLOP/s of forward + backward; None: no pass has measured it yet
    overhead_s: float  # seconds per step of forward + backward that do not grow with the tokens
    update_s_per_param: float  # seconds of AdamW per parameter

    def compute_s(self, flops: float, overlapped: bool, peak_flops: float | None) -> float:
        rate = self.rate or peak_flops or float("inf")  # not measured yet: at best the peak
        return max(self.overhead_s, flops / rate) if overlapped else self.overhead_s + flops / rate


def fit_terms(passes: tuple[PassTiming, ...], overlapped: bool, peak_flops: float | None) -> DeviceTerms:
    """The device's terms from its passes (module docstring): the overhead and the update time
    per parameter are the passes' medians; the rate, at most ``peak_flops``, is on a CPU the
    median of what each pass reached beyond its overhead, on a GPU the most any pass that was
    not launch bound reached (a pass near its overhead is still partly launch bound)."""
    overhead = statistics.median(p.overhead_s for p in passes)
    update = statistics.median(p.optimizer_s / p.params for p in passes)
    rate: float | None = None
    if overlapped:  # each pass bounds the rate from below (its step ≥ flops / rate): the tightest
        rates = [p.flops / p.compute_s for p in passes if p.compute_s > LAUNCH_BOUND * overhead]
        rate = max(rates) if rates else None
    else:
        rates = [p.flops / (p.compute_s - overhead) for p in passes if p.compute_s > overhead]
        rate = statistics.median(rates) if rates else None
    if rate is not None and peak_flops:
        rate = min(rate, peak_flops)
    return DeviceTerms(rate, overhead, update)


@dataclass(frozen=True)
class DeviceCalibration:
    """The live passes measured on ``device_name`` in ``dtype`` and the terms fitted from them;
    ``overlapped``: a GPU (launches overlap the kernels), ``peak_flops``: the device's peak."""

    device_name: str
    dtype: str
    overlapped: bool
    peak_flops: float | None = None
    passes: tuple[PassTiming, ...] = ()

    def with_pass(self, timing: PassTiming) -> "DeviceCalibration":
        return replace(self, passes=(*self.passes, timing))

    @property
    def terms(self) -> DeviceTerms:
        return fit_terms(self.passes, self.overlapped, self.peak_flops)

    def predict_step_s(self, cfg: ModelConfig, seq_len: int, batch: int) -> float:
        """Seconds of one training step of ``cfg`` at B × T on this device."""
        t = self.terms
        compute = t.compute_s(causal_training_flops(cfg, seq_len, batch), self.overlapped, self.peak_flops)
        return compute + count_params(cfg).total * t.update_s_per_param

    @property
    def label(self) -> str:
        """Which device, from how many passes, and its terms (the rate as a share of the peak
        when the peak is known: of the kernels' causal FLOPs, so not an MFU, which counts
        ``analysis.MFU_CONVENTION``'s model FLOPs)."""
        t, n = self.terms, len(self.passes)
        if t.rate is None:
            rate = "the peak (every pass so far was launch bound: the rate is not measured yet)"
        else:
            share = f" ({t.rate / self.peak_flops:.1%} of the peak)" if self.peak_flops else ""
            rate = f"{t.rate / 1e12:,.3g} TFLOP/s of causal FLOPs{share}"
        combine = "the longer of" if self.overlapped else "the sum of"
        return (
            f"calibrated on {self.device_name} ({self.dtype}) from {n} live pass{'es' if n != 1 else ''}: "
            f"forward + backward {combine} a {1e3 * t.overhead_s:,.1f} ms overhead and the FLOPs at {rate}; "
            f"AdamW {1e9 * t.update_s_per_param:,.2f} ns per parameter"
        )
