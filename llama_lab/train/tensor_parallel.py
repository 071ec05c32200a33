"""The tensor-parallel plan of our model on DTensor (Megatron's split, Shoeybi et al. 2019).

Per block: the fused ``self_attn.qkv_proj`` is column-parallel *by part* — q (H·D rows), k and v
(G·D rows each) are each cut by heads into tp equal chunks and rank r holds [q_r; k_r; v_r]
(torch's ``ColwiseParallel`` on the fused weight would hand rank 0 all of q and rank 1 k and v);
the module then computes H/tp query and G/tp KV heads. ``o_proj`` is row-parallel (weight
Shard(1), its bias replicated, the output all-reduced). SwiGLU's fused ``gate_up_proj`` is cut
the same way ([gate_r; up_r]), a ReLU/GELU ``up_proj`` is column-parallel, ``down_proj``
row-parallel. ``embed_tokens`` is vocabulary-parallel (torch's ``RowwiseParallel`` for an
embedding: rows Shard(0), the lookups masked and all-reduced), ``lm_head`` column-parallel with
Shard(-1) logits, for ``loss_parallel``'s vocabulary-parallel cross-entropy. Norms are
replicated; QK-norms (per head) see only the local heads, so their weights are replicated
DTensors applied to the local heads, their gradients summed over the group (``HeadNorm``).

FSDP2 (``parallelize``) then shards every block and the root over the data-parallel ranks, on
its own or over the tp sub-mesh of a 2-D (dp, tp) mesh. The layout is the one
``llama_lab.analysis.shards`` predicts by parameter name.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    ParallelStyle,
    RowwiseParallel,
    loss_parallel,
    parallelize_module,
)

from ..analysis.shards import check_tensor_parallel
from ..config import ModelConfig
from ..model import CausalLM, FusedLinear, RMSNorm, rms_norm


def interleave_parts(fused: FusedLinear, tensor: torch.Tensor, tp: int) -> torch.Tensor:
    """``tensor`` (the fused weight or bias) with its rows reordered so that its r-th of tp equal
    row blocks is [part_1 chunk r; part_2 chunk r; ...]: Shard(0) of the result gives each rank
    its heads of every part."""
    chunks = [piece.chunk(tp) for piece in fused.pieces(tensor).values()]
    return torch.cat([part[r] for r in range(tp) for part in chunks])


class FusedColwiseParallel(ColwiseParallel):
    """Column parallel for a ``FusedLinear``: each part split by rows into tp equal chunks,
    rank r holding chunk r of every part (weight and bias); the module's ``parts`` become the
    local sizes, so ``split`` cuts the local output."""

    def _partition_linear_fn(self, name, module, device_mesh):
        tp = device_mesh.size()
        for key, param in list(module.named_parameters(recurse=False)):
            whole = interleave_parts(module, param.detach(), tp)
            local = distribute_tensor(whole, device_mesh, [Shard(0)], src_data_rank=self.src_data_rank)
            module.register_parameter(key, nn.Parameter(local, requires_grad=param.requires_grad))
        module.parts = tuple((part, rows // tp) for part, rows in module.parts)


class _SumGradOverGroup(torch.autograd.Function):
    """Identity forward; backward sums the gradient over the tensor-parallel group (Megatron's
    "copy to the tensor-parallel region", f in Shoeybi et al.): a replicated weight applied to
    the local heads only gets a partial gradient on each rank."""

    @staticmethod
    def forward(ctx, weight: torch.Tensor, group) -> torch.Tensor:
        ctx.group = group
        return weight.view_as(weight)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        grad = grad.contiguous()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class HeadNorm(ParallelStyle):
    """A per-head norm (QK-norm) on the local heads: the input is the local (B, T, heads/tp, D)
    slice, the weight a replicated DTensor whose local copy is applied and whose gradient is
    summed over the group (``_SumGradOverGroup``)."""

    def _apply(self, module: nn.Module, device_mesh: DeviceMesh) -> nn.Module:
        norm = module
        if not isinstance(norm, RMSNorm):
            raise TypeError(f"HeadNorm splits a per-head RMSNorm, not a {type(module).__name__}")
        for key, param in list(module.named_parameters(recurse=False)):
            replica = distribute_tensor(
                param.detach(), device_mesh, [Replicate()], src_data_rank=self.src_data_rank
            )
            module.register_parameter(key, nn.Parameter(replica, requires_grad=param.requires_grad))
        group = device_mesh.get_group()

        def local_norm(x: torch.Tensor) -> torch.Tensor:
            replica = norm.weight  # read per call: FSDP2 swaps its parameters around a forward
            if not isinstance(replica, DTensor):
                raise TypeError(f"HeadNorm's weight is a {type(replica).__name__}, not its DTensor")
            weight = _SumGradOverGroup.apply(replica.to_local(), group)
            return rms_norm(x, weight, norm.eps, norm.plus_one)

        module.forward = local_norm
        return module


def _without_copy(style: ParallelStyle) -> ParallelStyle:
    """Every rank built the same weights (same seed): each keeps its own piece, nothing sent."""
    style.src_data_rank = None
    return style


def block_plan(cfg: ModelConfig, layer: int) -> dict[str, ParallelStyle]:
    """The plan of block ``layer``, by submodule name relative to the block."""
    plan = {"self_attn.qkv_proj": FusedColwiseParallel(), "self_attn.o_proj": RowwiseParallel()}
    if cfg.qk_norm:
        plan |= {"self_attn.q_norm": HeadNorm(), "self_attn.k_norm": HeadNorm()}
    if cfg.gated_ffn:
        plan["mlp.gate_up_proj"] = FusedColwiseParallel()
    else:
        plan["mlp.up_proj"] = ColwiseParallel()
    plan["mlp.down_proj"] = RowwiseParallel()
    return {name: _without_copy(style) for name, style in plan.items()}


def apply_tensor_parallel(model: CausalLM, mesh: DeviceMesh) -> CausalLM:
    """Split ``model`` in place over the 1-D ``mesh`` (tp ranks) as the module docstring says;
    refuses (ConfigError) what cannot be split into equal parts."""
    cfg, tp = model.cfg, mesh.size()
    check_tensor_parallel(cfg, tp)
    for i, layer in enumerate(model.model.blocks):
        parallelize_module(layer, mesh, block_plan(cfg, i))
        layer.self_attn.n_heads = cfg.n_heads // tp
        layer.self_attn.n_kv_heads = cfg.n_kv_heads // tp
    parallelize_module(
        model,
        mesh,
        {
            "model.embed_tokens": _without_copy(RowwiseParallel(input_layouts=Replicate())),
            "lm_head": _without_copy(ColwiseParallel(output_layouts=Shard(-1), use_local_output=False)),
        },
    )
    if cfg.tie_embeddings:  # one (V/tp, C) shard read by both
        model.lm_head.weight = model.model.embed_tokens.weight
    for param in model.parameters():
        if isinstance(param, DTensor):
            param.register_post_accumulate_grad_hook(_grad_as_param)
    return model


def _grad_as_param(param: DTensor) -> None:
    """Keep the gradient laid out as its parameter: the vocabulary-parallel embedding's comes
    back replicated (all V rows on every rank); each rank keeps its own rows (no communication)."""
    grad = param.grad
    if not isinstance(grad, DTensor):
        raise TypeError(f"a DTensor parameter's accumulated gradient is a {type(grad).__name__}")
    if grad.placements != param.placements:
        param.grad = grad.redistribute(placements=param.placements)


def tensor_parallel_loss(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy of ``ids`` (B, T+1) through the vocabulary-parallel logits
    (B, T, V) Shard(-1): each rank's log-softmax over its V/tp columns, the maxima and sums
    all-reduced. Call it, and run its backward, under ``loss_parallel()`` (one context: they
    do not nest)."""
    logits = model(ids[:, :-1].contiguous())  # the embedding saves its own (B, T) ids
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


def parallelize(model: CausalLM, strategy: str, dp: int, tp: int):
    """Lay ``model`` out in place as ``strategy`` says — 'fsdp': FSDP2's ``fully_shard`` on every
    block, then the root, over dp ranks; 'tp': this plan over tp ranks; 'fsdp+tp': this plan on
    the tp sub-mesh of a (dp, tp) mesh, then FSDP2 on its dp sub-mesh. Returns (the loss of
    (model, ids (B, T+1)), the context the loss and its backward run in)."""

    def shard_fully(dp_mesh) -> None:
        for layer in model.model.layers:
            fully_shard(layer, mesh=dp_mesh)
        fully_shard(model, mesh=dp_mesh)

    if strategy == "fsdp":
        shard_fully(init_device_mesh("cpu", (dp,), mesh_dim_names=("dp",)))
        register_fsdp_forward_method(model, "loss_on")  # the chunked head reads lm_head.weight
        return (lambda m, ids: m.loss_on(ids[:, :-1].contiguous(), ids[:, 1:])), nullcontext
    if strategy == "tp":
        apply_tensor_parallel(model, init_device_mesh("cpu", (tp,), mesh_dim_names=("tp",)))
    else:
        mesh = init_device_mesh("cpu", (dp, tp), mesh_dim_names=("dp", "tp"))
        apply_tensor_parallel(model, mesh["tp"])
        shard_fully(mesh["dp"])
    return tensor_parallel_loss, loss_parallel
