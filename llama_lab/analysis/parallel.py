"""3-D parallelism, per GPU: tensor parallel (Megatron's column/row split), sequence parallel,
pipeline parallel (1F1B or interleaved), data parallel with ZeRO 1/2/3 (FSDP = 3), activation
recomputation, mixed precision. For each pipeline stage: the parameters one GPU holds, their
gradients and optimizer state, the activations it keeps, and the bytes it sends per step.

Symbols: N GPUs = tp · pp · cp · dp; t = tp, p = pp, d = dp, v model chunks per GPU (interleaved),
m micro-batches per step per data-parallel rank, b bytes per element, Ψ a stage's local
parameters. A ring all-reduce of M bytes over n ranks sends 2(n−1)/n · M from each rank; a
reduce-scatter or an all-gather sends (n−1)/n · M (Patarasuk & Yuan 2009, NCCL's rings).

Tensor parallel (Shoeybi et al. 2019): q/k/v and gate/up are column-parallel (each rank H/t
query heads, G/t KV heads — or one KV head replicated on t/G ranks when t > G —, F/t FFN
rows), o_proj and down_proj row-parallel, the embedding and the LM head vocabulary-parallel
(⌈V/t⌉ rows each: Megatron pads the vocabulary), norms, router and o/down biases replicated.

Context parallel (cp ranks; Megatron's CP, torchtitan's ring attention): each rank holds T/cp of
every sequence (load-balanced: T divisible by 2·cp) and its activations; the attention passes
each rank's K and V chunk around the ring (cp − 1 sends per layer forward, K, V and their
gradients backward); the weights are replicated over cp and sharded or reduced over dp · cp.

Expert parallel (ep ranks, carved out of the dp · cp replicas as Megatron's MoE does): each rank
holds E/ep of every MoE block's experts (their tensor-parallel piece), whose states ZeRO shards
over the dp · cp / ep ranks holding the same experts; the routed tokens go to their experts'
ranks and back in two all-to-alls forward and two backward, each sending (ep − 1)/ep of the
B·T·k·C activations of a rank's tokens.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ..config import ModelConfig, require_decoder_only
from ..errors import AnalysisError
from .activations import block_saved, head_saved
from .common import (
    INT64_BYTES,
    STATS_BYTES,
    TRAINING_DTYPES,
    check_count,
    check_seq,
    checked_dtype_bytes,
    nbytes,
)
from .kv import kv_cache_bytes_per_token, kv_heads_per_gpu
from .quant import TensorGroup, block_tensors, weight_tensors
from .scope import check_planned
from .shapes import Shapes
from .torchtitan import LOSSES, check_llama_block, loss_bytes, op_sac_block_saved

RECOMPUTE = ("none", "selective", "full")  # the choices `parallel` and `predict train` offer (SPEC)
# and torchtitan's operator-level policy ("op", ``analysis.torchtitan``): the validation rows'
# torchtitan runs alone use it, no command offers it (SPEC fixes --recompute's choices)
RECOMPUTE_POLICIES = (*RECOMPUTE, "op")
TRANSIENTS = ("recomputed_block", "loss_backward")  # alive once, at backward, not per micro-batch
SCHEDULES = ("1f1b", "interleaved")
ZERO_STAGES = (0, 1, 2, 3)
MAX_GPUS = 1_000_000
PIPELINE_MICRO_BATCHES = 4  # default m with a pipeline: 4 micro-batches per stage


@dataclass(frozen=True)
class Layout:
    """How N GPUs split one training step: ``tp`` × ``pp`` × ``cp`` × dp = ``gpus``."""

    gpus: int = 1
    tp: int = 1
    pp: int = 1
    zero: int = 0  # ZeRO stage of the data-parallel group (3 = FSDP full shard)
    sequence_parallel: bool = False
    recompute: str = "none"  # none, selective (attention core), full (every block); op: torchtitan's
    micro_batch: int = 1  # sequences per micro-batch
    micro_batches: int = 0  # per step per data-parallel rank; 0: 1, or 4·pp with a pipeline
    schedule: str = "1f1b"
    chunks: int = 1  # model chunks per GPU (interleaved schedule's v)
    cp: int = 1  # context-parallel ranks: each holds T/cp of every sequence
    ep: int = 1  # expert-parallel ranks (within the dp · cp replicas): E/ep experts each
    # the loss head: the lab's chunked loss, or torchtitan's float32 one run "eager" or "compiled"
    loss: str = "chunked"

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp * self.cp)

    @property
    def replicas(self) -> int:
        """The ranks holding the same weights, which ZeRO shards over and the gradients are
        reduced over: dp · cp (context-parallel ranks see other tokens of the same sequences)."""
        return self.dp * self.cp

    @property
    def m(self) -> int:
        return self.micro_batches or (1 if self.pp == 1 else PIPELINE_MICRO_BATCHES * self.pp)

    def to_dict(self) -> dict:
        return {**asdict(self), "dp": self.dp, "micro_batches": self.m}

    def label(self) -> str:
        parts = [f"TP{self.tp}", f"PP{self.pp}", *([f"CP{self.cp}"] if self.cp > 1 else []), f"DP{self.dp}"]
        if self.ep > 1:
            parts.append(f"EP{self.ep}")
        if self.zero:
            parts.append(f"ZeRO-{self.zero}")
        if self.sequence_parallel and self.tp > 1:
            parts.append("SP")
        if self.recompute != "none":
            parts.append(f"recompute {self.recompute}")
        if self.schedule == "interleaved":
            parts.append(f"interleaved v={self.chunks}")
        return " · ".join(parts)


def check_layout(cfg: ModelConfig, layout: Layout, seq_len: int | None = None) -> None:
    """Refuse a layout that cannot run, naming the rule broken (a multimodal config: its tower is
    not modelled by the layout surfaces)."""
    check_planned(cfg, "a parallel layout (parallel, predict train, predict decode)")
    t, p, n = layout.tp, layout.pp, layout.gpus
    for name in ("gpus", "tp", "pp", "cp", "ep", "micro_batch"):
        check_count(name, getattr(layout, name), MAX_GPUS)
    if layout.micro_batches:
        check_count("micro_batches", layout.micro_batches, MAX_GPUS)
    check_count("chunks", layout.chunks, cfg.n_layers)
    c = layout.cp
    if n % (t * p * c):
        if c == 1:
            raise AnalysisError(f"gpus={n} is not tp·pp·dp: tp={t} × pp={p} = {t * p} does not divide {n}")
        raise AnalysisError(
            f"gpus={n} is not tp·pp·cp·dp: tp={t} × pp={p} × cp={c} = {t * p * c} does not divide {n}"
        )
    e = layout.ep
    if e > 1 and not cfg.is_moe:
        raise AnalysisError(f"ep={e}: expert parallelism needs experts (the model has none)")
    if e > 1 and cfg.n_experts % e:
        raise AnalysisError(
            f"ep={e} does not divide n_experts={cfg.n_experts}: each rank holds whole experts"
        )
    if e > 1 and layout.replicas % e:
        raise AnalysisError(
            f"ep={e} does not divide dp·cp = {layout.replicas}: the expert-parallel ranks are taken "
            f"from the ranks that hold the same weights"
        )
    if c > 1 and seq_len is not None and seq_len % (2 * c):
        raise AnalysisError(
            f"context parallel: 2·cp = {2 * c} does not divide seq_len={seq_len} (each rank holds two "
            f"chunks of T/(2·cp), the load-balanced split of causal attention)"
        )
    s = Shapes.of(cfg)
    if s.H % t:
        raise AnalysisError(f"tp={t} does not divide n_heads={s.H}: each rank holds whole query heads")
    if s.G % t and t % s.G:
        raise AnalysisError(
            f"tp={t} and n_kv_heads={s.G}: tp must divide n_kv_heads, or "
            f"n_kv_heads divide tp (each KV head then replicated on tp/G ranks)"
        )
    if any(not flag for flag in cfg.moe_layer_flags) and s.F % t:
        raise AnalysisError(
            f"tp={t} does not divide ffn_hidden={s.F}: each rank holds F/tp "
            f"rows of gate/up and columns of down"
        )
    if cfg.is_moe and s.Fe % t:
        raise AnalysisError(f"tp={t} does not divide expert_ffn_hidden={s.Fe}")
    if cfg.is_moe and s.Fs % t:
        raise AnalysisError(f"tp={t} does not divide the shared experts' width {s.Fs}")
    if p > s.L:
        raise AnalysisError(f"pp={p} is more than n_layers={s.L}: a stage holds at least one block")
    if layout.zero not in ZERO_STAGES:
        raise AnalysisError(f"zero={layout.zero!r} must be 0, 1, 2 or 3")
    if layout.recompute not in RECOMPUTE_POLICIES:
        raise AnalysisError(f"recompute={layout.recompute!r} must be one of {', '.join(RECOMPUTE)}")
    if layout.recompute == "op":
        check_llama_block(cfg)
    if layout.loss not in ("chunked", *LOSSES):
        raise AnalysisError(f"loss={layout.loss!r} must be one of chunked, {', '.join(LOSSES)}")
    if layout.schedule not in SCHEDULES:
        raise AnalysisError(f"schedule={layout.schedule!r} must be one of {', '.join(SCHEDULES)}")
    if layout.schedule == "1f1b" and layout.chunks != 1:
        raise AnalysisError(
            f"chunks={layout.chunks}: only the interleaved schedule puts more than one model chunk on a GPU"
        )
    if layout.schedule == "interleaved":
        if p < 2 or layout.chunks < 2:
            raise AnalysisError("the interleaved schedule needs pp ≥ 2 and chunks ≥ 2")
        if s.L % (p * layout.chunks):
            raise AnalysisError(
                f"interleaved: pp·chunks = {p * layout.chunks} does not divide n_layers={s.L}"
            )
        if layout.m % p:
            raise AnalysisError(
                f"interleaved: micro_batches={layout.m} is not a multiple of pp={p} (Megatron's rule)"
            )
    if layout.sequence_parallel and seq_len is not None and seq_len % t:
        raise AnalysisError(f"sequence parallel: tp={t} does not divide seq_len={seq_len}")


def stage_layers(cfg: ModelConfig, layout: Layout) -> list[list[int]]:
    """The blocks of each stage. 1F1B: contiguous, the first L mod p stages one block more;
    interleaved: L/(p·v) blocks per chunk, chunk j on stage j mod p."""
    return [list(stage) for stage in _stage_layers(cfg.n_layers, layout.pp, layout.chunks, layout.schedule)]


def layers_of(cfg: ModelConfig, layout: Layout, stage: int) -> tuple[int, ...]:
    """The blocks of one stage (``stage_layers``' entry, without building the others)."""
    return _stage_layers(cfg.n_layers, layout.pp, layout.chunks, layout.schedule)[stage]


@functools.lru_cache(maxsize=64)
def _stage_layers(L: int, p: int, v: int, schedule: str) -> tuple[tuple[int, ...], ...]:
    if schedule == "interleaved":
        size = L // (p * v)
        return tuple(
            tuple(layer for j in range(stage, p * v, p) for layer in range(j * size, (j + 1) * size))
            for stage in range(p)
        )
    bounds, start = [], 0
    for stage in range(p):
        n = L // p + (1 if stage < L % p else 0)
        bounds.append(tuple(range(start, start + n)))
        start += n
    return tuple(bounds)


# Megatron's split. MLA: q_b and kv_b produce whole heads (column-parallel); q_a, kv_a and their
# norms make the latent every rank's heads are rebuilt from (replicated, as DeepSeek's own TP).
COLUMN_PARALLEL = frozenset(
    {"q_proj", "gate_proj", "up_proj", "experts.gate_up_proj", "q_b_proj", "kv_b_proj"}
    | {"shared_experts.gate_proj", "shared_experts.up_proj"}
)
ROW_PARALLEL = frozenset({"o_proj", "down_proj", "experts.down_proj", "shared_experts.down_proj"})


def local_tensor(cfg: ModelConfig, group: TensorGroup, tp: int) -> TensorGroup:
    """One tensor-parallel rank's piece of ``group`` (see the module's docstring)."""
    s = Shapes.of(cfg)
    G = kv_heads_per_gpu(cfg, tp)
    name, rows, cols = group.name, group.rows, group.cols
    if name in COLUMN_PARALLEL:
        rows //= tp  # column-parallel: output rows split
    elif name in ("k_proj", "v_proj"):
        rows = G * s.D
    elif name in ROW_PARALLEL:
        cols //= tp  # row-parallel: input columns split
    elif name == "qkv_bias":
        cols = s.q_dim // tp + 2 * G * s.D
    elif name == "mlp_bias":
        cols = s.n_up * s.F // tp + s.C  # gate/up biases split, down's replicated
    elif name in ("embed_tokens", "lm_head"):
        rows = math.ceil(rows / tp)  # vocabulary-parallel
    return replace(group, rows=rows, cols=cols)


@functools.lru_cache(maxsize=32)
def end_tensors(cfg: ModelConfig) -> dict[str, TensorGroup]:
    """The model's tensors by name, once per config: a layout search asks for every stage of
    every split (thousands at 4,096 blocks), and only the first and last stages' ends differ."""
    return {g.name: g for g in weight_tensors(cfg)}


def stage_tensors(cfg: ModelConfig, layout: Layout, stage: int) -> list[TensorGroup]:
    """The tensors one GPU of ``stage`` holds (its tensor-parallel piece of each)."""
    layers = layers_of(cfg, layout, stage)
    kinds = {i: (cfg.moe_layer_flags[i], cfg.linear_layer_flags[i]) for i in layers}
    groups = []
    for kind in sorted(set(kinds.values())):  # Gated DeltaNet blocks: replicated (not split)
        of_kind = tuple(i for i in layers if kinds[i] == kind)
        groups += block_tensors(cfg, *kind, len(of_kind), of_kind)
    ends = end_tensors(cfg)
    if stage == 0:
        groups += [ends[name] for name in ("embed_tokens", "embed_positions") if name in ends]
    if stage == layout.pp - 1:
        groups += [ends[name] for name in ("final_norm", "lm_head") if name in ends]
        if cfg.tie_embeddings and layout.pp > 1:  # the last stage keeps its own copy
            groups.append(replace(ends["embed_tokens"], name="lm_head", role="lm_head"))
    return [expert_share(local_tensor(cfg, g, layout.tp), layout.ep) for g in groups]


def is_expert(group: TensorGroup) -> bool:
    """Whether ``group`` is the routed experts' (their weights, or their biases: gpt-oss)."""
    return group.role == "experts" or group.name.startswith("experts.")


def expert_share(group: TensorGroup, ep: int) -> TensorGroup:
    """One of ``ep`` expert-parallel ranks' share of ``group``: E/ep of the experts."""
    return replace(group, count=group.count // ep) if ep > 1 and is_expert(group) else group


@functools.lru_cache(maxsize=256)
def _stage_params(cfg: ModelConfig, layout: Layout) -> tuple[tuple[int, int], ...]:
    """(parameters, of which the experts') one GPU of each stage holds (what ZeRO,
    recomputation and m leave alone)."""
    out = []
    for stage in range(layout.pp):
        groups = stage_tensors(cfg, layout, stage)
        out.append((sum(g.params for g in groups), sum(g.params for g in groups if is_expert(g))))
    return tuple(out)


def state_bytes(params: int, dtype: str, layout: Layout, experts: int = 0) -> dict[str, int]:
    """Weights, gradients and AdamW state of ``params`` local parameters on one GPU (``experts``
    of them the routed experts'). Mixed precision (bf16/fp16): 2Ψ + 2Ψ + 12Ψ (fp32 master
    weights and both moments, ZeRO's K=12); fp32: 4Ψ + 4Ψ + 8Ψ. ZeRO stage 1 shards the
    optimizer state over the ranks holding the same weights — the dp · cp replicas, the
    experts' over dp · cp / ep —, 2 also the gradients, 3 also the weights."""
    b = checked_dtype_bytes(dtype, TRAINING_DTYPES)
    z = layout.zero
    optimizer = 4 + 4 + 4 if b != 4 else 4 + 4

    def shard(per_param: float, stage: int) -> int:
        if z < stage:
            return math.ceil(per_param * params)
        dense = math.ceil(per_param * (params - experts) / layout.replicas)
        return dense + math.ceil(per_param * experts / (layout.replicas // layout.ep))

    return {"params_bytes": shard(b, 3), "grads_bytes": shard(b, 2), "optimizer_bytes": shard(optimizer, 1)}


def in_flight(layout: Layout, stage: int) -> float:
    """Micro-batches whose activations stage ``stage`` holds at its peak. No pipeline: one
    (gradient accumulation runs them in turn). 1F1B: min(m, p − stage) (its warm-up forwards
    plus one). Interleaved: Megatron's warm-up of 2(p − stage − 1) + (v − 1)·p chunk forwards
    plus one, each chunk 1/v of the stage (stage 0: p·(1 + (p−1)/(p·v)), Korthikanti's factor)."""
    p, v, m = layout.pp, layout.chunks, layout.m
    if p == 1:
        return 1
    if layout.schedule == "interleaved":
        return min(m * v, 2 * (p - stage - 1) + (v - 1) * p + 1) / v
    return min(m, p - stage)


def bubble_fraction(layout: Layout) -> float:
    """Share of a step the pipeline idles: (p−1)/(v·m + p − 1) (Narayanan et al. 2021's bubble
    (p−1)/(v·m) of the ideal time, as a share of the whole)."""
    p, v, m = layout.pp, layout.chunks, layout.m
    return (p - 1) / (v * m + p - 1)


def stage_activations(
    cfg: ModelConfig, layout: Layout, stage: int, seq_len: int, dtype: str
) -> dict[str, int]:
    """Bytes one GPU of ``stage`` keeps for backward for ONE micro-batch, by part: its blocks
    (with the tensor-parallel split, sequence parallel and recomputation), the token ids and
    position tables, the head and loss on the last stage; and two transients, once, not per
    micro-batch: the recomputed block (full recomputation: one block's tensors alive while it
    is recomputed) and, with torchtitan's loss, ``loss_backward`` (what the loss's backward adds
    at its peak, ``torchtitan.loss_bytes``)."""
    b = checked_dtype_bytes(dtype, TRAINING_DTYPES)
    s = Shapes.of(cfg)
    # a context-parallel rank's T/cp tokens of each sequence
    B, T, t = layout.micro_batch, seq_len // layout.cp, layout.tp
    sp = layout.sequence_parallel and layout.tp > 1
    N = B * T
    layers = layers_of(cfg, layout, stage)
    # blocks come in few kinds: (window, sparse, Gated DeltaNet)
    kinds: dict[tuple[int | None, bool, bool], list[int]] = {}
    for i in layers:
        kinds.setdefault((cfg.window_of(i), cfg.moe_layer_flags[i], cfg.linear_layer_flags[i]), [i, 0])[
            1
        ] += 1
    saved = {key: block_saved(cfg, first, B, T, b, dtype, t, sp) for key, (first, _) in kinds.items()}
    if layout.recompute == "op":  # torchtitan's operator-level policy keeps what its op list names
        saved = {key: op_sac_block_saved(cfg, B, T, b, t, sp) for key in kinds}
    if layout.recompute == "selective":  # the attention core is recomputed from q, k, v:
        for part in saved.values():  # its logsumexp and a window mask are not kept
            if "attention_output" in part:  # (a Gated DeltaNet block keeps all it saves)
                part["attention_output"] -= STATS_BYTES * B * (s.H // t) * T
                part["window_mask"] = 0
    parts = {
        "blocks": sum(sum(saved[key].values()) * n for key, (_, n) in kinds.items()),
        "recomputed_block": 0,
    }
    if layout.recompute == "full":  # only each block's input stays (Chen et al. 2016)
        block_input = nbytes((N // t if sp else N) * s.C, b)
        parts["blocks"] = len(layers) * block_input
        # the recomputed block's first saved tensor is that stored input itself
        parts["recomputed_block"] = max(sum(part.values()) for part in saved.values()) - block_input
    rope = cfg.pos_encoding == "rope"
    parts["positions"] = 2 * T * s.D * 4 if rope and dtype == "fp32" else 0
    parts["token_ids"] = INT64_BYTES * N if stage == 0 else 0
    last = stage == layout.pp - 1
    if layout.loss == "chunked":
        parts["head_and_loss"] = head_saved(cfg, N, b, "chunked", t) if last else 0
    else:  # torchtitan's float32 loss, and what its backward adds at the loss's peak
        kept, added = loss_bytes(cfg, N, b, layout.loss, t) if last else (0, 0)
        parts["head_and_loss"], parts["loss_backward"] = kept, added
    return parts


def _ring(n: int, nbytes_: float, all_reduce: bool) -> float:
    """Bytes one rank sends in a ring all-reduce (2(n−1)/n·M) or reduce-scatter/all-gather."""
    return (2 if all_reduce else 1) * (n - 1) / n * nbytes_ if n > 1 else 0.0


def tp_forward_bytes(cfg: ModelConfig, tp: int, tokens: int, dtype: str = "bf16") -> float:
    """Bytes one of ``tp`` ranks sends in one forward over ``tokens`` tokens (a prefill):
    ``stage_comm``'s forward half — two all-reduces per block of the tokens' C-wide activations
    (the attention's and the FFN's outputs) and the vocabulary-parallel embedding's one."""
    M = nbytes(tokens * cfg.d_model, checked_dtype_bytes(dtype, TRAINING_DTYPES))
    return (2 * cfg.n_layers + 1) * _ring(tp, M, True)


def stage_comm(
    cfg: ModelConfig, layout: Layout, stage: int, seq_len: int, dtype: str, params: tuple[int, int]
) -> dict[str, int]:
    """Bytes one GPU of ``stage`` sends per step, by kind.
    tp: per block and micro-batch, two all-reduces of the B·T·C activations forward
    (attention and FFN outputs) and two backward (the inputs' gradients of the column-parallel
    layers); full recomputation repeats the forward two. Sequence parallel swaps each for an
    all-gather + reduce-scatter: the same bytes (Korthikanti et al. 2022). The vocabulary-parallel
    embedding all-reduces its output, the head its input's gradient, and its cross-entropy three
    float32 B·T vectors (max, sum of exponentials, target logit).
    pp: per micro-batch and model chunk, the activations forward and their gradient backward
    (B·T·C, or B·T·C/t under sequence parallel); the first stage sends no forward, the last no
    backward.
    dp: once per step, the gradients of Ψ parameters over the dp · cp replicas. ZeRO 0: one
    all-reduce; 1: reduce-scatter + all-gather of the updated weights (the same bytes); 2: a
    reduce-scatter per micro-batch + the all-gather; 3 (FSDP): per micro-batch an all-gather
    forward, one backward and a reduce-scatter (3Ψ per micro-batch: ZeRO's 1.5× data parallel).
    The experts' gradients go over the dp · cp / ep ranks holding the same experts.
    cp: per micro-batch and layer, the rank's K and V of its B·T/cp tokens (the one cache rule,
    ``kv.kv_cache_bytes_per_token``) sent cp − 1 times forward, K, V and their gradients
    backward; the B·T·C terms above are of those B·T/cp tokens.
    ep: per micro-batch and MoE block, two all-to-alls forward (dispatch, combine) and two
    backward (three pairs under full recomputation), each sending (ep − 1)/ep of the B·T·k·C
    routed activations."""
    b = checked_dtype_bytes(dtype, TRAINING_DTYPES)
    t, p, d, m, v = layout.tp, layout.pp, layout.replicas, layout.m, layout.chunks
    params_, experts = params  # the stage's local parameters, and the experts' among them
    N, C = layout.micro_batch * seq_len // layout.cp, cfg.d_model
    M = nbytes(N * C, b)
    n_blocks = len(layers_of(cfg, layout, stage))
    per_block = (6 if layout.recompute == "full" else 4) * _ring(t, M, True)
    tp_bytes = n_blocks * per_block
    if stage == 0:
        tp_bytes += _ring(t, M, True)  # embedding output
    if stage == p - 1:
        tp_bytes += _ring(t, M, True) + 3 * _ring(t, 4 * N, True)  # head input grad, CE stats
    sp = layout.sequence_parallel and t > 1
    # every chunk sends its output forward and its input's gradient backward, except the
    # model's very last chunk (forward) and very first (backward)
    sends = (v - (stage == p - 1)) + (v - (stage == 0))
    pp_bytes = sends * (M // t if sp else M) if p > 1 else 0
    z = layout.zero

    def reduce_bytes(n: int, grads: float) -> float:  # the gradients of ranks holding the same weights
        if z == 0:
            return _ring(n, grads, True)
        if z == 1:
            return 2 * _ring(n, grads, False)
        if z == 2:
            return m * _ring(n, grads, False) + _ring(n, grads, False)
        return 3 * m * _ring(n, grads, False)

    dense = nbytes(params_ - experts, b)
    dp_bytes = reduce_bytes(d, dense) + reduce_bytes(d // layout.ep, nbytes(experts, b))
    # cp: per micro-batch, each rank's K and V chunk to the next rank cp − 1 times forward, and
    # K, V with their gradients backward (twice that); full recomputation repeats the forward
    kv = kv_cache_bytes_per_token(cfg, dtype, t, layers_of(cfg, layout, stage)) * N
    cp_bytes = (4 if layout.recompute == "full" else 3) * (layout.cp - 1) * kv
    # ep: per MoE block and micro-batch, dispatch and combine all-to-alls forward and backward
    # (a third pair under full recomputation), each (ep − 1)/ep of the rank's N·k·C routed values
    sparse = sum(cfg.moe_layer_flags[i] for i in layers_of(cfg, layout, stage))
    routed = nbytes(N * cfg.experts_per_token * C, b) * (layout.ep - 1) / layout.ep
    ep_bytes = sparse * (6 if layout.recompute == "full" else 4) * routed
    comm = {"tp": round(m * tp_bytes), "pp": round(m * pp_bytes), "dp": round(dp_bytes)}
    if layout.cp > 1:
        comm["cp"] = round(m * cp_bytes)
    if layout.ep > 1:
        comm["ep"] = round(m * ep_bytes)
    return comm


@dataclass(frozen=True)
class StageEstimate:
    stage: int
    blocks: int
    layers: str  # the stage's blocks as ranges: "0–19", "4–7, 20–23"
    params: int  # parameters one GPU of the stage holds (its TP piece)
    params_bytes: int
    grads_bytes: int
    optimizer_bytes: int
    activation_bytes: int  # in-flight micro-batches × per micro-batch + recomputed block
    activation_per_micro_batch: dict[str, int]
    in_flight: float
    total_bytes: int
    comm_bytes: dict[str, int]  # tp, pp, dp (and cp with context parallelism)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ParallelEstimate:
    layout: dict[str, Any]  # Layout.to_dict()
    seq_len: int
    dtype: str
    global_batch: int  # sequences per step: dp × m × micro_batch
    stages: list[dict[str, Any]]  # StageEstimate.to_dict() per stage
    per_gpu: dict[str, int]  # the stage with the largest total
    comm_bytes_per_step: int  # that stage's GPU: tp + pp + dp
    comm_by_kind: dict[str, int]
    bubble_fraction: float
    notes: list[str] = field(default_factory=list)

    @property
    def dp(self) -> int:
        return self.layout["dp"]

    def to_dict(self) -> dict:
        return {**asdict(self), "dp": self.dp}


def parallel_memory(
    cfg: ModelConfig, layout: Layout, seq_len: int | None = None, dtype: str = "bf16"
) -> ParallelEstimate:
    """Per-GPU training memory and communication of ``layout`` (see the module's docstring)."""
    require_decoder_only(cfg, "the parallel layouts")
    seq_len = seq_len or cfg.max_seq_len
    check_seq(seq_len, layout.micro_batch)
    checked_dtype_bytes(dtype, TRAINING_DTYPES)
    check_layout(cfg, layout, seq_len)
    stages = []
    counts = _stage_params(cfg, replace(layout, zero=0, recompute="none", micro_batches=0))
    for stage in range(layout.pp):
        layers = layers_of(cfg, layout, stage)
        params, experts = counts[stage]
        states = state_bytes(params, dtype, layout, experts)
        acts = stage_activations(cfg, layout, stage, seq_len, dtype)
        flight = in_flight(layout, stage)
        per_micro = sum(v for k, v in acts.items() if k not in TRANSIENTS)
        # the loss's backward runs before any block is recomputed: the larger of the two
        activation = math.ceil(flight * per_micro) + max(acts.get(k, 0) for k in TRANSIENTS)
        comm = stage_comm(cfg, layout, stage, seq_len, dtype, (params, experts))
        stages.append(
            StageEstimate(
                stage,
                len(layers),
                _ranges(layers),
                params,
                **states,
                activation_bytes=activation,
                activation_per_micro_batch=acts,
                in_flight=flight,
                total_bytes=sum(states.values()) + activation,
                comm_bytes=comm,
            )
        )
    worst = max(stages, key=lambda s: s.total_bytes)
    per_gpu = {
        "stage": worst.stage,
        "params_bytes": worst.params_bytes,
        "grads_bytes": worst.grads_bytes,
        "optimizer_bytes": worst.optimizer_bytes,
        "activation_bytes": worst.activation_bytes,
        "total_bytes": worst.total_bytes,
    }
    return ParallelEstimate(
        layout.to_dict(),
        seq_len,
        dtype,
        layout.dp * layout.m * layout.micro_batch,
        [s.to_dict() for s in stages],
        per_gpu,
        sum(worst.comm_bytes.values()),
        dict(worst.comm_bytes),
        bubble_fraction(layout) if layout.pp > 1 else 0.0,
        _notes(cfg, layout),
    )


def _ranges(layers: Sequence[int]) -> str:
    """[0, 1, 2, 5, 6] → "0–2, 5–6"."""
    runs, start = [], None
    for i, layer in enumerate(layers):
        if start is None:
            start = layer
        if i + 1 == len(layers) or layers[i + 1] != layer + 1:
            runs.append(f"{start}–{layer}" if layer > start else f"{start}")
            start = None
    return ", ".join(runs)


def _notes(cfg: ModelConfig, layout: Layout) -> list[str]:
    notes = []
    if layout.tp > cfg.n_kv_heads:
        notes.append(
            f"tp={layout.tp} > n_kv_heads={cfg.n_kv_heads}: each KV head is "
            f"replicated on {layout.tp // cfg.n_kv_heads} ranks (k/v weights and "
            f"cache counted on each)"
        )
    if cfg.vocab_size % layout.tp:
        notes.append(
            f"vocab_size={cfg.vocab_size} padded to {layout.tp}·"
            f"{math.ceil(cfg.vocab_size / layout.tp)} rows for the vocabulary split"
        )
    if cfg.tie_embeddings and layout.pp > 1:
        notes.append(
            "tied embeddings with a pipeline: the last stage holds a copy of the "
            "embedding as its LM head (Megatron), their gradients all-reduced"
        )
    if layout.recompute == "selective":
        notes.append(
            "selective recomputation with fused attention: FlashAttention already "
            "recomputes the T×T scores in backward, so only its logsumexp is saved "
            "less"
        )
    if cfg.is_moe:
        notes.append(
            "experts split by tensor parallel along their FFN width"
            + (f", E/{layout.ep} of them on each expert-parallel rank" if layout.ep > 1 else "")
        )
    if cfg.is_mla and layout.tp > 1:
        notes.append(
            f"MLA under tensor parallelism: q_b, kv_b and o split by heads ({cfg.n_heads // layout.tp} "
            f"per rank); q_a, kv_a and their norms, which make the latent every rank's heads are "
            f"rebuilt from, replicated on each rank, as the latent cache is"
        )
    return notes
