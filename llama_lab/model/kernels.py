"""The model's two custom autograd Functions, each beside the plain reference it is tested equal
against (tests/unit/model/test_kernels.py) and measured against (benchmarks/bench_kernels.py). Each keeps
fewer tensors for backward than autograd's composite of the same ops, which is where it pays:

- ``rms_norm``: y = γ · x / rms(x), in float32 and cast back (LLaMA, transformers); with
  ``plus_one`` y = (1 + γ) · x / rms(x), the product in float32 (Gemma). The composite keeps x,
  the normalised x̂ (C per token; a 16-bit x also its float32 copy); this keeps x and rstd (1 per
  token) and recomputes x̂ in backward.
- ``swiglu`` / ``geglu``: h = act(gate) ⊙ up of the fused gate/up output (..., 2F), act = SiLU
  or tanh-approximated GELU (Gemma). The composite keeps gate/up and act(gate) (3·F per token);
  this keeps gate/up (2·F) and recomputes act(gate).

Both are plain tensor code: a tensor-parallel caller hands them local tensors (the plan in
``llama_lab.train.tensor_parallel`` does), and torch.compile traces them as any Function.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable


def _wide(x: torch.Tensor) -> torch.Tensor:
    """x in float32 (x itself when float32; float64 stays float64)."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


def rms_norm_reference(
    x: torch.Tensor, weight: torch.Tensor, eps: float, plus_one: bool = False
) -> torch.Tensor:
    """γ · x / sqrt(mean(x²) + eps), the mean and the division in float32 (the formula); with
    ``plus_one`` (Gemma) (1 + γ) · x̂, multiplied in float32 before the cast."""
    xf = _wide(x)
    x_hat = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    if plus_one:
        return (x_hat * (1.0 + _wide(weight))).to(x.dtype)
    return weight * x_hat.to(x.dtype)


def _rms_forward(
    x: torch.Tensor, weight: torch.Tensor, eps: float, plus_one: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """(the normalised x scaled, in x's dtype; rstd (float32, (..., 1))); the mean square in one
    pass (``vector_norm``: no x² tensor)."""
    xf = _wide(x)
    rstd = torch.linalg.vector_norm(xf, dim=-1, keepdim=True).square_()
    rstd = rstd.div_(x.shape[-1]).add_(eps).rsqrt_()  # (..., 1)
    x_hat = xf * rstd
    del xf  # a 16-bit x's float32 copy freed before the next tensor is made
    if plus_one:
        return x_hat.mul_(1.0 + _wide(weight)).to(x.dtype), rstd
    return weight * x_hat.to(x.dtype), rstd


class _RMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, eps: float, plus_one: bool) -> torch.Tensor:
        y, rstd = _rms_forward(x, weight, eps, plus_one)
        ctx.save_for_backward(x, rstd, weight)
        ctx.plus_one = plus_one
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_y: torch.Tensor):
        x, rstd, weight = ctx.saved_tensors
        x_hat = _wide(x) * rstd  # (..., C) recomputed
        grad_x = grad_weight = None
        if ctx.needs_input_grad[1]:  # dγ = Σ_rows dy · x̂ (Gemma: the product in float32)
            rows = _wide(grad_y) * x_hat if ctx.plus_one else grad_y * x_hat.to(x.dtype)
            grad_weight = rows.reshape(-1, x.shape[-1]).sum(0).to(weight.dtype)
        if ctx.needs_input_grad[0]:  # dx = rstd · (g − x̂ · mean(g · x̂)), g = scale · dy
            g = _wide(grad_y) * (1.0 + _wide(weight)) if ctx.plus_one else _wide(grad_y * weight)
            dot = (g * x_hat).mean(-1, keepdim=True)
            grad_x = torch.addcmul(g, x_hat, dot, value=-1).mul_(rstd).to(x.dtype)
        return grad_x, grad_weight, None, None


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, plus_one: bool = False) -> torch.Tensor:
    """``rms_norm_reference``'s value, keeping only x and rstd for backward."""
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad):
        return _RMSNorm.apply(x, weight, eps, plus_one)
    return _rms_forward(x, weight, eps, plus_one)[0]


GATE_ACTIVATIONS = {"silu": F.silu, "gelu_tanh": lambda g: F.gelu(g, approximate="tanh")}


def gated_reference(gate_up: torch.Tensor, activation: str = "silu") -> torch.Tensor:
    """act(gate) ⊙ up, gate and up the two halves of (..., 2F) (the formula)."""
    gate, up = gate_up.chunk(2, dim=-1)
    return GATE_ACTIVATIONS[activation](gate) * up


def swiglu_reference(gate_up: torch.Tensor) -> torch.Tensor:
    """silu(gate) ⊙ up (LLaMA's SwiGLU)."""
    return gated_reference(gate_up, "silu")


class _GatedUnit(torch.autograd.Function):
    @staticmethod
    def forward(ctx, gate_up: torch.Tensor, activation: str) -> torch.Tensor:
        ctx.save_for_backward(gate_up)
        ctx.activation = activation
        return gated_reference(gate_up, activation)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_h: torch.Tensor):
        (gate_up,) = ctx.saved_tensors
        gate, up = gate_up.chunk(2, dim=-1)
        grad = torch.empty_like(gate_up)  # the fused GEMM's gradient, written in two halves
        grad_gate, grad_up = grad.chunk(2, dim=-1)
        with torch.enable_grad():  # the activation again, and torch's own derivative of it
            g = gate.detach().requires_grad_()
            act = GATE_ACTIVATIONS[ctx.activation](g)
        torch.mul(grad_h, act.detach(), out=grad_up)  # ∂h/∂up = act(gate)
        torch.mul(grad_h, up, out=grad_gate)  # ∂h/∂act = up ...
        (d_gate,) = torch.autograd.grad(act, g, grad_gate)  # ... times act'(gate)
        grad_gate.copy_(d_gate)
        return grad, None


def gated(gate_up: torch.Tensor, activation: str = "silu") -> torch.Tensor:
    """``gated_reference``'s value, keeping only gate/up for backward."""
    if torch.is_grad_enabled() and gate_up.requires_grad:
        return _GatedUnit.apply(gate_up, activation)
    return gated_reference(gate_up, activation)


def swiglu(gate_up: torch.Tensor) -> torch.Tensor:
    """silu(gate) ⊙ up, keeping only gate/up for backward."""
    return gated(gate_up, "silu")
