"""One training step, timed phase by phase: forward (with the loss), backward, (clip), AdamW."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from ..model import CausalLM
from ..runtime.devices import sync
from ..runtime.precision import Precision


@dataclass(frozen=True)
class StepTimes:
    forward_s: float
    backward_s: float
    optimizer_s: float

    @property
    def total_s(self) -> float:
        return self.forward_s + self.backward_s + self.optimizer_s


@dataclass(frozen=True, eq=False)
class Trainee:
    """What a training step updates: the module that runs (maybe compiled), its optimizer, the
    precision and fp16's GradScaler (None otherwise)."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    precision: Precision
    scaler: torch.amp.GradScaler | None = None


FUSED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def make_optimizer(model: torch.nn.Module, lr: float, weight_decay: float = 0.1) -> torch.optim.AdamW:
    """AdamW, β = (0.9, 0.95) as LLaMA; decay on matrices only (not norms, biases). Fused (one
    kernel over every parameter, no temporaries) where torch has the kernel: CPU and CUDA
    floating-point parameters — on the CPU 8× faster than the per-parameter loop torch
    defaults to there (30 vs 249 ms per step on seed-demo, 2 cores)."""
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    fused = bool(params) and all(p.device.type in ("cpu", "cuda") and p.dtype in FUSED_DTYPES for p in params)
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8, fused=fused)


def next_token_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over B·T positions; logits (B, T, V), targets (B, T)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))


def step_loss(model: torch.nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The loss a training step backpropagates: a CausalLM's own (``loss_on``: the LM head and
    cross-entropy in chunks, never the B·T·V logits); a compiled module (torch.compile compiles
    ``forward``) through its logits and ``next_token_loss``."""
    if isinstance(model, CausalLM):
        return model.loss_on(inputs, targets)
    return next_token_loss(model(inputs), targets)


def total_grad_norm(model: torch.nn.Module) -> torch.Tensor:
    """L2 norm of every gradient together (a 0-dim tensor: no device sync)."""
    norms = [torch.linalg.vector_norm(p.grad.float()) for p in model.parameters() if p.grad is not None]
    return torch.linalg.vector_norm(torch.stack(norms))


def _update(trainee: Trainee, grad_clip: float | None) -> None:
    if grad_clip is not None:
        torch.nn.utils.clip_grad_norm_(trainee.model.parameters(), grad_clip)
    if trainee.scaler is not None:
        trainee.scaler.step(trainee.optimizer)
        trainee.scaler.update()
    else:
        trainee.optimizer.step()
    trainee.optimizer.zero_grad(set_to_none=True)


LossFn = Callable[[torch.nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]  # (model, inputs, targets)


def forward_backward(
    trainee: Trainee, inputs: torch.Tensor, targets: torch.Tensor, loss_fn: LossFn = step_loss
) -> tuple[torch.Tensor, float, float]:
    """Forward (with the loss) and backward, each timed with the device synchronised around it:
    (loss, forward seconds, backward seconds). The gradients are left for the update.
    ``loss_fn`` is what is backpropagated (a distilled student's: ``experiments.distill``)."""
    device, scaler = trainee.precision.device, trainee.scaler
    sync(device)
    t0 = time.perf_counter()
    with trainee.precision.autocast():
        loss = loss_fn(trainee.model, inputs, targets)
    sync(device)
    t1 = time.perf_counter()
    (scaler.scale(loss) if scaler is not None else loss).backward()
    sync(device)
    return loss, t1 - t0, time.perf_counter() - t1


def training_step(
    trainee: Trainee,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    *,
    grad_clip: float | None = None,
    step_before_update: Callable[[], None] | None = None,
    measure_grad_norm: bool = True,
    loss_fn: LossFn = step_loss,
) -> tuple[float, float | None, StepTimes]:
    """Forward (with the loss), backward, (clip), AdamW; returns (loss, total gradient norm
    before clipping or None, times). The phases are timed with the device synchronised between
    them; the gradient norm, when asked for, is timed with the optimizer."""
    loss, forward_s, backward_s = forward_backward(trainee, inputs, targets, loss_fn)
    t2 = time.perf_counter()
    if trainee.scaler is not None:
        trainee.scaler.unscale_(trainee.optimizer)
    grad_norm = total_grad_norm(trainee.model) if measure_grad_norm else None
    if step_before_update is not None:
        step_before_update()
    _update(trainee, grad_clip)
    sync(trainee.precision.device)
    return (
        loss.item(),
        grad_norm.item() if grad_norm is not None else None,
        StepTimes(forward_s, backward_s, time.perf_counter() - t2),
    )
