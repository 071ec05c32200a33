"""When a run counts as diverged, and what to try instead."""

from __future__ import annotations

import math

from ..config import PRESETS, ModelConfig


def divergence_reason(
    loss: float,
    grad_norm: float | None,
    step: int,
    running_min: float | None,
    spike_factor: float,
    loss_scaling: bool = False,
    lr: float | None = None,
    dtype: str = "fp32",
) -> str | None:
    """Why training at ``step`` counts as diverged, or None: a non-finite loss or gradient, or
    a loss above spike_factor × the lowest loss so far — during warmup too (a spike while the
    learning rate is still rising is no less a divergence). A non-finite value names the step
    and its likely cause. Under fp16 loss scaling an overflowing gradient is normal (the scaler
    skips that update and lowers the scale)."""
    if not math.isfinite(loss):
        return f"loss became {loss} at step {step} ({likely_cause(step, lr, dtype)})"
    if grad_norm is not None and not math.isfinite(grad_norm) and not loss_scaling:
        return f"gradient norm became {grad_norm} at step {step} ({likely_cause(step, lr, dtype)})"
    if running_min is not None and loss > spike_factor * running_min:
        return (
            f"loss spiked to {loss:.4g} at step {step}, more than {spike_factor:g}× the "
            f"lowest loss so far ({running_min:.4g})"
        )
    return None


def likely_cause(step: int, lr: float | None, dtype: str) -> str:
    """The usual reason a loss or gradient stops being a number, from what the run knows."""
    if step == 0:
        return (
            "likely cause: the initial weights or the input already overflow: a numerical "
            "fault before any update (check rope_theta, norm_eps, the init and the dtype)"
        )
    if dtype == "fp16":
        return "likely cause: fp16 overflowed (its largest value is 65504)"
    if lr is not None and lr > 0.1:
        return (
            f"likely cause: the learning rate {lr:g} is far too high, so an update threw "
            f"the weights to overflow"
        )
    return "likely cause: the updates grew until the weights or activations overflowed"


def divergence_hint(
    cfg: ModelConfig,
    lr: float,
    warmup_steps: int,
    grad_clip: float | None,
    dtype: str,
    step: int | None = None,
) -> str:
    """What to change, in the controls both front ends have: the learning rate, warmup,
    gradient clipping (`--grad-clip` / the page's "gradient clipping"), the sidebar's
    norm_position and the live dtype. A fault at step 0 came before any update: the model's
    own numbers, never the learning rate."""
    if step == 0:
        bases = sorted({p.rope_theta for p in PRESETS.values() if p.pos_encoding == "rope"})
        return (
            f"fix the model's numbers, not the training: rope_theta={cfg.rope_theta:g} (RoPE's "
            f"base; the presets use {bases[0]:,g} to {bases[-1]:,g}), norm_eps={cfg.norm_eps:g}, "
            f"the init ({cfg.init}) and the dtype ({dtype}); no learning rate causes a fault "
            f"before the first update"
        )
    hints = [f"lower the learning rate (try lr={lr / 10:.2g})"]
    if warmup_steps == 0:
        hints.append("add warmup (e.g. 10% of the steps)")
    if grad_clip is None:
        hints.append('clip gradients at max norm 1.0 (--grad-clip 1, or the page\'s "gradient clipping")')
    if cfg.norm_position == "post":
        hints.append("use Pre-LN (norm_position = pre), which trains stably without warmup")
    if dtype == "fp16":
        hints.append("use bf16 rather than fp16 (fp16 overflows above 65504)")
    return "; ".join(hints)
