"""The model's two custom autograd Functions, each beside the plain reference it is tested equal
against (tests/test_kernels.py) and measured against (benchmarks/bench_kernels.py). Each keeps
fewer tensors for backward than autograd's composite of the same ops, which is where it pays:

- ``rms_norm``: y = γ · x / rms(x), in float32 and cast back (LLaMA, transformers). The composite
  keeps x, the normalised x̂ (C per token; a 16-bit x also its float32 copy); this keeps x and
  rstd (1 per token) and recomputes x̂ in backward.
- ``swiglu``: h = silu(gate) ⊙ up of the fused gate/up output (..., 2F). The composite keeps
  gate/up and silu(gate) (3·F per token); this keeps gate/up (2·F) and recomputes silu(gate).

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


def rms_norm_reference(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """γ · x / sqrt(mean(x²) + eps), the mean and the division in float32 (the formula)."""
    xf = _wide(x)
    x_hat = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x_hat.to(x.dtype)


def _rms_forward(x: torch.Tensor, weight: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(γ · x̂ in x's dtype, rstd (float32, (..., 1))); the mean square in one pass
    (``vector_norm``: no x² tensor)."""
    xf = _wide(x)
    rstd = torch.linalg.vector_norm(xf, dim=-1, keepdim=True).square_()
    rstd = rstd.div_(x.shape[-1]).add_(eps).rsqrt_()  # (..., 1)
    x_hat = xf * rstd
    del xf  # a 16-bit x's float32 copy freed before the next tensor is made
    return weight * x_hat.to(x.dtype), rstd


class _RMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        y, rstd = _rms_forward(x, weight, eps)
        ctx.save_for_backward(x, rstd, weight)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_y: torch.Tensor):
        x, rstd, weight = ctx.saved_tensors
        x_hat = _wide(x) * rstd  # (..., C) recomputed
        grad_x = grad_weight = None
        if ctx.needs_input_grad[1]:  # dγ = Σ_rows dy · x̂
            grad_weight = (grad_y * x_hat.to(x.dtype)).reshape(-1, x.shape[-1]).sum(0).to(weight.dtype)
        if ctx.needs_input_grad[0]:  # dx = rstd · (g − x̂ · mean(g · x̂)), g = γ · dy
            g = _wide(grad_y * weight)
            dot = (g * x_hat).mean(-1, keepdim=True)
            grad_x = torch.addcmul(g, x_hat, dot, value=-1).mul_(rstd).to(x.dtype)
        return grad_x, grad_weight, None


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """``rms_norm_reference``'s value, keeping only x and rstd for backward."""
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad):
        return _RMSNorm.apply(x, weight, eps)
    return _rms_forward(x, weight, eps)[0]


def swiglu_reference(gate_up: torch.Tensor) -> torch.Tensor:
    """silu(gate) ⊙ up, gate and up the two halves of (..., 2F) (the formula)."""
    gate, up = gate_up.chunk(2, dim=-1)
    return F.silu(gate) * up


class _SwiGLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, gate_up: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(gate_up)
        gate, up = gate_up.chunk(2, dim=-1)
        return F.silu(gate) * up

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_h: torch.Tensor):
        (gate_up,) = ctx.saved_tensors
        gate, up = gate_up.chunk(2, dim=-1)
        grad = torch.empty_like(gate_up)  # the fused GEMM's gradient, written in two halves
        grad_gate, grad_up = grad.chunk(2, dim=-1)
        with torch.enable_grad():  # silu again, and torch's own derivative of it
            g = gate.detach().requires_grad_()
            silu = F.silu(g)
        torch.mul(grad_h, silu.detach(), out=grad_up)  # ∂h/∂up = silu(gate)
        torch.mul(grad_h, up, out=grad_gate)  # ∂h/∂silu = up ...
        (d_gate,) = torch.autograd.grad(silu, g, grad_gate)  # ... times silu'(gate)
        grad_gate.copy_(d_gate)
        return grad


def swiglu(gate_up: torch.Tensor) -> torch.Tensor:
    """``swiglu_reference``'s value, keeping only gate/up for backward."""
    if torch.is_grad_enabled() and gate_up.requires_grad:
        return _SwiGLU.apply(gate_up)
    return swiglu_reference(gate_up)
