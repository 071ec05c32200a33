"""When a run counts as diverged, and what to try instead.
"""
from __future__ import annotations

import math

from ..config import ModelConfig


def divergence_reason(loss: float, grad_norm: float, step: int, running_min: float | None,
                      warmup_steps: int, spike_factor: float,
                      loss_scaling: bool = False) -> str | None:
    """Why training at ``step`` counts as diverged, or None: a non-finite loss or gradient, or
    (after warmup) a loss above spike_factor × the lowest loss so far. Under fp16 loss scaling
    an overflowing gradient is normal (the scaler skips that update and lowers the scale)."""
    if not math.isfinite(loss):
        return f"loss became {loss} at step {step}"
    if not math.isfinite(grad_norm) and not loss_scaling:
        return f"gradient norm became {grad_norm} at step {step}"
    if step >= warmup_steps and running_min is not None and loss > spike_factor * running_min:
        return (f"loss spiked to {loss:.4g} at step {step}, more than {spike_factor:g}× the "
                f"lowest loss so far ({running_min:.4g})")
    return None


def divergence_hint(cfg: ModelConfig, lr: float, warmup_steps: int, grad_clip: float | None,
                    dtype: str) -> str:
    hints = [f"lower the learning rate (try lr={lr / 10:.2g})"]
    if warmup_steps == 0:
        hints.append("add warmup (e.g. 10% of the steps)")
    if grad_clip is None:
        hints.append("clip gradients (grad_clip=1.0)")
    if cfg.norm_position == "post":
        hints.append("use Pre-LN (norm_position='pre'), which trains stably without warmup")
    if dtype == "fp16":
        hints.append("use bf16 rather than fp16 (fp16 overflows above 65504)")
    return "; ".join(hints)
