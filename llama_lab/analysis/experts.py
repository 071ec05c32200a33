"""A mixture of experts' training step by its structural parts, as Megatron-Core's all-to-all
token dispatcher runs it: the routed experts' grouped GEMMs (each expert's shape and the rows it
receives), the tokens' all-to-all between the expert-parallel ranks (``parallel``'s count) and
the copies that sort the routed tokens by expert (memory traffic). Counts only; the times are
``validation.moe_step``'s.

Symbols: C = d_model, E routed experts, k experts per token, Fe an expert's width, n_up the
matrices reading the block's input (2: gate and up), B sequences per micro-batch, T tokens per
sequence, b bytes per activation value; ``Layout``'s tp, cp, ep.

The dispatcher (NVIDIA/Megatron-LM, megatron/core/transformer/moe/token_dispatcher.py
@ 0014f13713bfa38a8bab4ae11edd6917d35165ce, ``MoEAlltoAllTokenDispatcher``: "(2)
token_permutation(): permute->A2A(EP)->AG(TP)->sort_chunk(if num_local_experts>1)", "(3)
token_unpermutation(): sort_chunk(if num_local_experts>1)->RS(TP)->A2A(EP)->unpermute"); its
copies (moe_utils.py @ 00611e6eeb0b09b5ee074750956855215ddbd67f: ``permute`` is
``tokens.index_select(0, sorted_indices)``, ``unpermute`` scales by the probabilities and
``scatter_add_``s each routed row back to its token).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..config import ModelConfig
from .common import TRAINING_DTYPES, checked_dtype_bytes
from .parallel import Layout, parallel_memory
from .shapes import Shapes

# The GEMMs of one linear layer in a training step: y = x·W (forward), dx = dy·Wᵀ (the input's
# gradient) and dW = xᵀ·dy (the weight's); full recomputation runs the forward twice.
FORWARD, INPUT_GRAD, WEIGHT_GRAD = "forward", "input_grad", "weight_grad"
TRAIN_PASSES = (FORWARD, INPUT_GRAD, WEIGHT_GRAD)
ROUTER_SCORE_BYTES = 4  # the router's scores and probabilities in float32 (Megatron's router dtype)


def train_passes(recompute: str | None) -> tuple[str, ...]:
    """The GEMM passes of a training step: forward and both gradients, the forward again under
    full recomputation."""
    return TRAIN_PASSES + ((FORWARD,) if recompute == "full" else ())


@dataclass(frozen=True)
class Gemm:
    """(m × k) · (k × n), its operands in one format and its output in another (an expert's m is
    its rows on average: a fraction where the tokens do not divide evenly among the experts)."""

    name: str
    m: float
    n: float
    k: float

    @property
    def flops(self) -> float:
        return 2 * self.m * self.n * self.k

    def bytes(self, operand_bytes: float, output_bytes: float) -> float:
        """Bytes a GEMM moves at least: both operands read once, the output written once."""
        return operand_bytes * (self.m * self.k + self.k * self.n) + output_bytes * self.m * self.n

    def intensity(self, operand_bytes: float, output_bytes: float) -> float:
        """FLOPs per byte moved (the roofline's arithmetic intensity)."""
        return self.flops / self.bytes(operand_bytes, output_bytes)


def rows_per_expert(cfg: ModelConfig, layout: Layout, seq_len: int) -> float:
    """tokens_routed: the rows one expert receives per micro-batch and MoE block — the ep ranks'
    B·T/cp tokens each, k experts per token, spread evenly over the E experts (Megatron-Bridge's
    MoE benchmarks force-balance the routing): ep·B·(T/cp)·k / E."""
    tokens = layout.micro_batch * (seq_len // layout.cp)
    return layout.ep * tokens * cfg.experts_per_token / cfg.n_experts


def expert_gemms(
    cfg: ModelConfig, layout: Layout, seq_len: int, passes: tuple[str, ...] = TRAIN_PASSES
) -> tuple[Gemm, ...]:
    """One expert's GEMMs in one MoE block per micro-batch on one rank: gate/up (C → n_up·Fe/tp)
    and down (Fe/tp → C) over the M rows it receives (``rows_per_expert``; after the tensor-
    parallel all-gather every tp rank sees them all and holds Fe/tp of the width), in each pass."""
    M = rows_per_expert(cfg, layout, seq_len)
    s = Shapes.of(cfg)
    C, width, n_up = s.C, s.Fe // layout.tp, s.n_up
    gemms = []
    for name, k_in, n_out in (("gate_up", C, n_up * width), ("down", width, C)):
        shapes = {
            FORWARD: (M, n_out, k_in),  # (M × in)·(in × out)
            INPUT_GRAD: (M, k_in, n_out),  # (M × out)·(out × in)
            WEIGHT_GRAD: (k_in, n_out, M),  # (in × M)·(M × out)
        }
        gemms += [Gemm(f"{name} {p}", *shapes[p]) for p in passes]
    return tuple(gemms)


def expert_gemm_runs_per_token(cfg: ModelConfig, layout: Layout, seq_len: int) -> float:
    """How often each of ``expert_gemms`` runs per token, summed over the GPUs: a rank's E/ep
    experts in every MoE block, on each of the tp ranks sharing its B·T/cp tokens."""
    tokens = layout.micro_batch * (seq_len // layout.cp)
    return layout.tp * (cfg.n_experts // layout.ep) * sum(cfg.moe_layer_flags) / tokens


def expert_flops_per_token(
    cfg: ModelConfig, layout: Layout, seq_len: int, passes: tuple[str, ...] = TRAIN_PASSES
) -> float:
    """The routed experts' GEMM FLOPs per token over ``passes`` (forward: k·(n_up + 1)·2·C·Fe
    per MoE block, ``flops.matmul_flops``' routed part)."""
    runs = expert_gemm_runs_per_token(cfg, layout, seq_len)
    return runs * sum(g.flops for g in expert_gemms(cfg, layout, seq_len, passes))


def all_to_all_bytes_per_token(cfg: ModelConfig, layout: Layout, seq_len: int, dtype: str = "bf16") -> float:
    """Bytes one GPU sends in the expert all-to-alls per token of its own: ``parallel``'s count
    (``comm["ep"]``: dispatch and combine, forward and backward, (ep − 1)/ep of each rank's
    B·T·k·C routed values) over every MoE block; 0 without expert parallelism. Under tensor
    parallelism Megatron's dispatcher sends each rank's B·T/tp sequence-parallel tokens before
    gathering them over tp (the module's docstring): the tp ranks together send this count, so it
    is also the GPU-seconds' bytes per token of the group."""
    if layout.ep == 1:
        return 0.0
    gpus = layout.tp * layout.cp * layout.ep  # one expert-parallel group, the whole model on each
    whole = replace(layout, gpus=gpus, pp=1, zero=0, micro_batches=1, schedule="1f1b", chunks=1)
    comm = parallel_memory(cfg, whole, seq_len, dtype).comm_by_kind
    return comm["ep"] / (whole.micro_batch * seq_len // whole.cp)


def dispatch_bytes_per_token(
    cfg: ModelConfig, layout: Layout, passes: tuple[str, ...] = TRAIN_PASSES, dtype: str = "bf16"
) -> float:
    """HBM bytes per token of the dispatcher's copies and the router's scores, every MoE block.
    Per routed token each copy reads and writes its C values: permute and unpermute, and, with
    more than one expert on a rank, the chunk sort and unsort (the module's docstring); per token
    the router reads E float32 logits and writes E probabilities. The backward runs each copy's
    inverse (the same bytes); full recomputation repeats the forward. The lab's count, per token
    once (under tensor parallelism the sort runs on every tp rank: not counted)."""
    b = checked_dtype_bytes(dtype, TRAINING_DTYPES)
    copies = 2 + (2 if cfg.n_experts // layout.ep > 1 else 0)
    runs = passes.count(FORWARD) + (INPUT_GRAD in passes)  # the forwards and one backward
    routed = cfg.experts_per_token * copies * 2 * cfg.d_model * b
    router = 2 * ROUTER_SCORE_BYTES * cfg.n_experts
    return sum(cfg.moe_layer_flags) * runs * (routed + router)
