"""Kernel launches of one forward of ``llama_lab.model``: what an eager (uncompiled, no CUDA
graphs) step pays for on the host, op by op.

Counted, not derived: one forward of the model is run on the meta device (no memory, no
arithmetic) under a dispatch mode that sees every ATen operator, and every operator that
writes a new tensor counts as one launch; views, reshapes and empty allocations launch
nothing and are not counted. A mixture of experts runs only the experts some token chose: on
the meta device the routing is unknown and every expert runs, so each sparse block's count is
brought to the experts ``tokens`` tokens are expected to reach, E·(1 − (1 − k/E)^tokens)
(uniform routing), each of those paying its own operators plus the loop's five (torch.where,
the two gathers, the weighting, index_add_).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from ..config import ModelConfig

# operators that allocate without writing, or name storage that already exists
NO_KERNEL = frozenset({"_unsafe_view", "empty", "empty_like", "new_empty", "lift_fresh", "_reshape_alias"})
EXPERT_LOOP_OPS = 5  # per expert run in eager: torch.where, x[token], weights[token, slot], × w, index_add_


class LaunchCounter(TorchDispatchMode):
    """Counts the operators dispatched inside it that launch a kernel (``counts`` by name).
    ``scaled_dot_product_attention`` counts as the one fused kernel a GPU runs it as (on the
    meta device it would decompose into its maths, on the CPU into the CPU's own kernel)."""

    def __init__(self):
        super().__init__()
        self.counts: Counter[str] = Counter()
        self.fused = FusedAttention(self)

    def __enter__(self):
        self.fused.__enter__()
        return super().__enter__()

    def __exit__(self, *exc):
        super().__exit__(*exc)
        self.fused.__exit__(*exc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.fused.inside:
            return out
        name = func.overloadpacket.__name__
        tensors = out if isinstance(out, (tuple, list)) else (out,)
        if not func.is_view and name not in NO_KERNEL and any(isinstance(t, torch.Tensor) for t in tensors):
            self.counts[name] += 1
        return out

    @property
    def total(self) -> int:
        return sum(self.counts.values())


class FusedAttention(TorchFunctionMode):
    """Counts each ``F.scaled_dot_product_attention`` call once for ``counter``, and keeps the
    operators it runs inside from being counted again."""

    def __init__(self, counter: LaunchCounter):
        super().__init__()
        self.counter, self.inside = counter, False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is not F.scaled_dot_product_attention or self.inside:
            return func(*args, **(kwargs or {}))
        self.counter.counts["scaled_dot_product_attention"] += 1
        self.inside = True
        try:
            return func(*args, **(kwargs or {}))
        finally:
            self.inside = False


def experts_reached(cfg: ModelConfig, tokens: int) -> float:
    """Experts of one sparse block that ``tokens`` tokens reach, each choosing k of E uniformly."""
    E, k = cfg.n_experts, cfg.experts_per_token
    return E * (1 - (1 - k / E) ** tokens)


@dataclass(frozen=True)
class CountedForward:
    """One meta-device forward of a model, counted once: its kernels with every expert running,
    and per sparse block the number of blocks and the kernels one expert launches."""

    total: int
    sparse_blocks: int
    per_expert: int


@lru_cache(maxsize=64)
def counted_forward(cfg: ModelConfig) -> CountedForward:
    """The kernels one bf16 forward of one token launches on the meta device (every expert
    running), and one expert's: what ``forward_launches`` adjusts for the tokens' experts."""
    from ..model.decoder import CausalLM  # the model is imported only when counted
    from ..model.mlp import MoE

    with torch.device("meta"):
        model = CausalLM(cfg).to(torch.bfloat16)
        cache = model.new_cache(1, 2)
    ids = torch.zeros((1, 1), dtype=torch.long, device="meta")
    with torch.no_grad(), LaunchCounter() as counter:
        model(ids, cache, last_only=True)
    sparse = [block.ffn for block in model.model.blocks if isinstance(block.ffn, MoE)]
    if not sparse:
        return CountedForward(counter.total, 0, 0)
    experts = sparse[0].experts
    x = torch.empty((1, cfg.d_model), device="meta", dtype=torch.bfloat16)
    with torch.no_grad(), LaunchCounter() as one:
        experts.expert(experts.per_expert()[0], x)
    return CountedForward(counter.total, len(sparse), one.total)


def forward_launches(cfg: ModelConfig, tokens: int = 1) -> int:
    """Kernels one bf16 forward of ``tokens`` new tokens launches (a decode step: ``tokens`` =
    the batch; a prefill: batch × prompt), the LM head on the last position only; the norms'
    float32 casts included, as the model runs them. The model is counted once
    (``counted_forward``); only a sparse block's experts depend on the tokens."""
    c = counted_forward(cfg)
    if not c.sparse_blocks:
        return c.total
    reached = experts_reached(cfg, tokens)
    unused = round(c.sparse_blocks * (cfg.n_experts - reached) * c.per_expert)
    return c.total - unused + math.ceil(c.sparse_blocks * reached * EXPERT_LOOP_OPS)
