"""A mixture of experts' training step in GPU-seconds per token, by structural term
(``analysis.experts`` counts each): the routed experts' grouped GEMMs, each at the roofline of
its own shape; the expert all-to-all over the link its group spans (the GPU's own:
``hardware.link_bytes_per_s``); the dispatcher's copies and
the router's scores as memory traffic. The dense parts (attention, shared experts, router GEMM,
head) stay with the dense matmuls (``efficiency.train_seconds_by_term``).

Each expert GEMM runs at min(its format's peak × the dense share × ``moe_gemm``, its arithmetic
intensity × HBM bandwidth × ``decode_bw["16-bit"]``): an expert that receives few rows is
memory-bound (its intensity is about its rows while they are fewer than its widths), and a narrow
expert's all-to-all and copies weigh more, their bytes per expert FLOP going as 1/Fe.
``moe_gemm`` — what grouped GEMMs reach of a dense GEMM's rate — is the one parameter MoE rows
inform alone (two fit rows, gpt-oss-120b on 64 H100s in two releases); the link and bandwidth
shares are the ones tensor parallelism's and decode's rows fit.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from ..analysis.experts import (
    Gemm,
    all_to_all_bytes_per_token,
    dispatch_bytes_per_token,
    expert_gemm_runs_per_token,
    expert_gemms,
)
from ..analysis.parallel import Layout
from ..config import ModelConfig
from ..runtime.hardware import DTYPE_BYTES, GPU, link_bytes_per_s

if TYPE_CHECKING:
    from .efficiency import Efficiency

GEMM_OUTPUT_BYTES = DTYPE_BYTES["bf16"]  # fp8 GEMMs write bf16 (Transformer Engine's recipes)


def ep_link_bytes_per_s(gpu: GPU, layout: Layout) -> float:
    """The link an expert-parallel group's all-to-all crosses: ``gpu``'s scale-up link while its
    tp · ep GPUs fit one scale-up domain (8 on an HGX node, 72 on a GB200 NVL72 rack), the
    inter-node network beyond (``hardware.link_bytes_per_s``)."""
    return link_bytes_per_s(gpu, layout.tp * layout.ep)


@lru_cache(maxsize=1024)
def expert_counts(
    cfg: ModelConfig, layout: Layout, seq_len: int, passes: tuple[str, ...]
) -> tuple[float, tuple[Gemm, ...], float, float]:
    """(runs per token, one expert's GEMMs, all-to-all bytes per token, dispatch bytes per
    token), made once per layout: the fit asks for the same rows under thousands of parameters."""
    return (
        expert_gemm_runs_per_token(cfg, layout, seq_len),
        expert_gemms(cfg, layout, seq_len, passes),
        all_to_all_bytes_per_token(cfg, layout, seq_len),
        dispatch_bytes_per_token(cfg, layout, passes),
    )


def moe_seconds_per_token(
    cfg: ModelConfig,
    gpu: GPU,
    layout: Layout,
    seq_len: int,
    compute: str,
    dense_share: float,
    eff: "Efficiency",
    passes: tuple[str, ...],
) -> dict[str, float]:
    """GPU-seconds per token of a MoE's own terms over ``passes`` (``analysis.experts``):
    ``expert_matmuls`` (each expert GEMM at its roofline, the operands in ``compute``),
    ``expert_all_to_all`` (``layout``'s ep bytes at ``tp_link`` of the link) and
    ``dispatch_memory`` (the copies and router scores at the 16-bit decode bandwidth share)."""
    runs, gemms, a2a_bytes, dispatch_bytes = expert_counts(cfg, layout, seq_len, passes)
    hbm = gpu.hbm_bytes_per_s * eff.decode_bw["16-bit"]
    compute_rate = gpu.peak_flops(compute) * dense_share * eff.moe_gemm
    operand = DTYPE_BYTES[compute]
    per_run = sum(max(g.flops / compute_rate, g.bytes(operand, GEMM_OUTPUT_BYTES) / hbm) for g in gemms)
    return {
        "expert_matmuls": runs * per_run,
        "expert_all_to_all": a2a_bytes / (ep_link_bytes_per_s(gpu, layout) * eff.tp_link),
        "dispatch_memory": dispatch_bytes / hbm,
    }
