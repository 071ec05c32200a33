"""Normalisation layers: RMSNorm (LLaMA) and LayerNorm (2017)."""

from __future__ import annotations

import sys

import torch
import torch.nn as nn
from torch.autograd.function import once_differentiable

from ..config import ModelConfig


def _is_dtensor(tensor: torch.Tensor) -> bool:
    """A DTensor (torch.distributed.tensor, imported only where one can exist)."""
    module = sys.modules.get("torch.distributed.tensor")
    return module is not None and isinstance(tensor, module.DTensor)


def _local(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.to_local() if _is_dtensor(tensor) else tensor


def _rms_forward(x: torch.Tensor, weight: torch.Tensor, eps: float):
    """(γ · (x / rms(x)) in x's dtype, rstd (float32, (..., 1))): the mean square in one pass
    (``vector_norm``: no x² tensor), the rest in float32 as LLaMA and transformers do."""
    xf = x.float()  # x itself in float32
    rstd = torch.linalg.vector_norm(xf, dim=-1, keepdim=True).square_()
    rstd = rstd.div_(x.shape[-1]).add_(eps).rsqrt_()
    x_hat = xf * rstd
    del xf
    return weight * x_hat.to(x.dtype), rstd


class _RMSNormFunction(torch.autograd.Function):
    """RMSNorm saving only its input and rstd (the composite also saves a float32 copy of a
    16-bit input and the normalised x); backward recomputes x·rstd from them. DTensors (a
    tensor-parallel QK-norm: heads sharded, the weight replicated) are normalised on their
    local pieces; the weight's gradient, a partial sum on each rank, is summed over them."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        y, rstd = _rms_forward(_local(x), _local(weight), eps)
        ctx.save_for_backward(x, rstd, weight)
        if _is_dtensor(x):
            y = type(x).from_local(y, x.device_mesh, x.placements, run_check=False)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_y: torch.Tensor):
        x, rstd, weight = ctx.saved_tensors
        if _is_dtensor(grad_y):
            grad_y = grad_y.redistribute(x.device_mesh, x.placements).to_local()
        grad_x, grad_weight = _rms_backward(_local(x), _local(weight), rstd, grad_y, ctx.needs_input_grad[:2])
        if _is_dtensor(x):
            grad_x, grad_weight = _distribute_grads(x, weight, grad_x, grad_weight)
        return grad_x, grad_weight, None


def _rms_backward(x, weight, rstd, grad_y, needs: tuple[bool, bool]):
    """(dx, dγ) of y = γ · x̂ (x̂ = x · rstd, cast to x's dtype)."""
    x_hat = x.float() * rstd
    grad_x = grad_weight = None
    if needs[1]:  # dγ = Σ_rows dy · x̂
        grad_weight = (grad_y * x_hat.to(x.dtype)).reshape(-1, x.shape[-1]).sum(0)
        grad_weight = grad_weight.to(weight.dtype)
    if needs[0]:  # dx = rstd · (g − x̂ · mean(g · x̂)), g = γ · dy
        g = (grad_y * weight).float()
        dot = (g * x_hat).mean(-1, keepdim=True)
        grad_x = torch.addcmul(g, x_hat, dot, value=-1).mul_(rstd).to(x.dtype)
    return grad_x, grad_weight


def _distribute_grads(x, weight, grad_x, grad_weight):
    """The local gradients as DTensors: dx placed as x; dγ summed over the ranks x is sharded
    on, then placed as γ."""
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard

    mesh = x.device_mesh
    if grad_x is not None:
        grad_x = DTensor.from_local(grad_x, mesh, x.placements, run_check=False)
    if grad_weight is not None and _is_dtensor(weight):
        partial = [Partial() if isinstance(p, Shard) else Replicate() for p in x.placements]
        grad_weight = DTensor.from_local(grad_weight, mesh, partial, run_check=False)
        grad_weight = grad_weight.redistribute(mesh, weight.placements)
    return grad_x, grad_weight


class RMSNorm(nn.Module):
    """x / rms(x) · γ, computed in float32 and cast back (as LLaMA). The mean square comes from
    one pass over x, and for backward only x and rstd are kept (``_RMSNormFunction``)."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_compiling():  # plain ops: inductor fuses them in one kernel
            dtype = x.dtype
            x = x.float()
            x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
            return self.weight * x.to(dtype)
        if torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad):
            return _RMSNormFunction.apply(x, self.weight, self.eps)
        return _rms_forward(x, self.weight, self.eps)[0]


def make_norm(cfg: ModelConfig) -> nn.Module:
    if cfg.norm_type == "rmsnorm":
        return RMSNorm(cfg.d_model, cfg.norm_eps)
    return nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps)
