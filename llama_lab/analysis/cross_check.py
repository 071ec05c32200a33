"""Cross-check of the closed-form matmul FLOPs against fvcore's ``FlopCountAnalysis``.

fvcore traces the model with ``torch.jit`` and counts one "flop" per multiply-add; it has no
rule for ``aten::scaled_dot_product_attention``, so a handle is registered here (QKᵀ and AV over
the full T×S, as the closed form counts). Under MLA the module zero-pads q, k and v to one head
width for the fused kernel (``model.attention.causal_attention``): the traced SDPA is wider than
the model's maths, and a window layer scores all T×T pairs before masking: ``masked_flops``,
reported and taken out before comparing.
The model is built on the meta device: tracing needs only shapes, so even 405B allocates nothing.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from ..config import ModelConfig
from ..errors import AnalysisError
from ..model import build_model
from .flops import count_flops

METHODS = ("full", "scaled")
# fvcore operator names whose count is multiply-adds of a matmul; others (e.g. its layer_norm
# rule, 5 per element) are element-wise estimates and are reported apart.
MATMUL_OPERATORS = {
    "linear",
    "matmul",
    "mm",
    "bmm",
    "addmm",
    "baddbmm",
    "einsum",
    "scaled_dot_product_attention",
}


@dataclass(frozen=True)
class FvcoreCheck:
    seq_len: int
    batch: int
    method: str  # "full" or "scaled"
    traced_layers: list[int]  # layer counts of the models actually traced
    fvcore_flops: int  # fvcore's matmul multiply-adds × 2
    ours_flops: int  # count_flops(...).forward
    masked_flops: int  # MLA's zero padding, a window's masked scores (masked_flops)
    difference: int  # fvcore − masked − ours
    relative_difference: float
    fvcore_by_operator: dict[str, int]  # matmul operator → FLOPs (× 2 applied)
    fvcore_other_ops: dict[str, int]  # fvcore's non-matmul counts, as it reports them
    unsupported_ops: dict[str, int]  # operators fvcore skipped → times seen
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def sdpa_macs(inputs: list[Any], outputs: list[Any]) -> int:
    """fvcore handle for aten::scaled_dot_product_attention: q (B, H, T, D), k (B, G, S, D),
    v (B, G, S, Dv); QKᵀ is B·H·T·S·D multiply-adds and AV B·H·T·S·Dv, whatever the mask and
    however many KV heads are shared (GQA broadcasts them)."""
    from fvcore.nn.jit_handles import get_shape

    q_shape, k_shape, v_shape = (get_shape(v) for v in inputs[:3])
    *batch_dims, T, D = q_shape
    S, Dv = k_shape[-2], v_shape[-1]
    heads = 1
    for size in batch_dims:
        heads *= size  # B · H
    return heads * T * S * (D + Dv)


def masked_flops(cfg: ModelConfig, seq_len: int, batch: int) -> int:
    """FLOPs a forward's attention multiplies that the model's maths does not count. MLA: q/k
    heads (head_dim) and v heads (v_head_dim) are zero-padded to the wider of the two, so QKᵀ and
    AV each run at that width (2·B·H·T²·(pad_qk + pad_v) per layer). A window W < T: the module
    scores all T×T pairs and masks, where the count takes the T·W a window kernel computes
    (2·B·H·T·(T − W)·(D + Dv) per windowed layer)."""
    B, T, H = batch, seq_len, cfg.n_heads
    if cfg.is_mla:
        width = max(cfg.head_dim, cfg.v_head_dim)
        pad = (width - cfg.head_dim) + (width - cfg.v_head_dim)
        return cfg.n_layers * 2 * B * H * T * T * pad
    local = sum(cfg.local_layer_flags)
    if not local or cfg.sliding_window >= T or cfg.sparse_pattern is not None:
        return 0  # a sparse pattern's count takes the T×T the masked kernel computes
    return local * 2 * B * H * T * (T - cfg.sliding_window) * (cfg.head_dim + cfg.v_head_dim)


def _trace(cfg: ModelConfig, seq_len: int, batch: int) -> tuple[dict, dict]:
    """fvcore's multiply-adds by operator and its skipped operators, for one model."""
    from fvcore.nn import FlopCountAnalysis

    model = build_model(cfg, device="meta").eval()
    input_ids = torch.zeros(batch, seq_len, dtype=torch.long, device="meta")
    analysis = (
        FlopCountAnalysis(model, input_ids)
        .set_op_handle("aten::scaled_dot_product_attention", sdpa_macs)
        .unsupported_ops_warnings(False)
        .uncalled_modules_warnings(False)
    )
    with warnings.catch_warnings(), torch.no_grad():  # a forward: no graph to trace
        warnings.simplefilter("ignore")  # torch.jit TracerWarnings
        try:
            by_operator = dict(analysis.by_operator())
            unsupported = dict(analysis.unsupported_ops())
        except RuntimeError as exc:  # e.g. a B·H·T² score tensor > int64
            raise AnalysisError(
                f"fvcore cannot trace B={batch}, T={seq_len} for this model: torch "
                f"refused to build its tensors ({str(exc).splitlines()[0][:160]}); "
                f"the closed-form count above stands alone"
            ) from None
    return by_operator, unsupported


def _block_kinds(cfg: ModelConfig) -> dict[tuple[bool, bool, bool, bool, bool], int]:
    """How many blocks of each kind (windowed?, experts?, rotated?, Gated DeltaNet?) the model has."""
    kinds: dict[tuple[bool, bool, bool, bool, bool], int] = {}
    for kind in zip(
        cfg.local_layer_flags,
        cfg.moe_layer_flags,
        cfg.rope_layer_flags,
        cfg.linear_layer_flags,
        cfg.temperature_layer_flags,
    ):
        kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


def _of_kind(cfg: ModelConfig, kind: tuple[bool, bool, bool, bool, bool], n_layers: int) -> ModelConfig:
    """``n_layers`` blocks, all of one kind."""
    local, moe, rotated, linear, sharpened = kind
    return cfg.replace(
        n_layers=n_layers,
        local_layers="all" if local else "none",
        moe_layers="all" if moe else "none",
        # a Gated DeltaNet block has no RoPE to skip
        nope_layers="none" if rotated or linear or cfg.pos_encoding != "rope" else "all",
        linear_layers="all" if linear else "none",
        linear_grouped_proj=cfg.linear_grouped_proj and linear,
        attn_temperature_layers="all" if sharpened else "none",
    )


def _scaled_trace(cfg: ModelConfig, seq_len: int, batch: int) -> tuple[dict, dict, list[int]]:
    """count = base + Σ_kind n_kind · block_kind: the first kind's 1- and 2-block models give
    its block and the base (embedding, final norm, head); every other kind's 1-block model gives
    its block (exact: blocks of one kind count the same)."""
    kinds = _block_kinds(cfg)
    first, *others = kinds
    one, skip_one = _trace(_of_kind(cfg, first, 1), seq_len, batch)
    two, skip_two = _trace(_of_kind(cfg, first, 2), seq_len, batch)

    def combine(c1: dict, c2: dict, rest: list[dict]) -> dict:
        keys = set(c1) | set(c2) | {k for r in rest for k in r}
        base = {k: 2 * c1.get(k, 0) - c2.get(k, 0) for k in keys}
        total = {k: base[k] + kinds[first] * (c2.get(k, 0) - c1.get(k, 0)) for k in keys}
        for kind, r in zip(others, rest):
            for k in keys:
                total[k] += kinds[kind] * (r.get(k, 0) - base[k])
        return total

    traced = [_trace(_of_kind(cfg, kind, 1), seq_len, batch) for kind in others]
    by_operator = combine(one, two, [t[0] for t in traced])
    unsupported = combine(skip_one, skip_two, [t[1] for t in traced])
    return by_operator, {k: v for k, v in unsupported.items() if v}, [1, 2] + [1] * len(others)


def fvcore_check(cfg: ModelConfig, seq_len: int, batch: int = 1, method: str = "full") -> FvcoreCheck:
    """fvcore's forward FLOPs (× 2) next to ours. ``method="full"`` traces the whole model on
    meta; ``"scaled"`` traces 1- and 2-layer models of the same widths and extrapolates to
    n_layers, with a 1-layer model of each other block kind (windowed or not, experts or not):
    exact, since blocks of one kind are identical, and much faster for 80-126-layer presets."""
    if method not in METHODS:
        raise AnalysisError(f"method={method!r} must be one of {', '.join(METHODS)}")
    count = count_flops(cfg, seq_len, batch)  # validates seq_len and batch
    ours = count.forward
    if cfg.has_indexer:
        raise AnalysisError(
            "fvcore's jit trace cannot follow DeepSeek Sparse Attention's top-k selection (torch's "
            "tracer has no alias rule for its scatter); the closed form is held against PyTorch's "
            "FlopCounterMode on transformers' own DeepseekV32 module instead "
            "(tests/families/test_deepseek_v32.py)"
        )
    # BERT's pooler runs outside forward (CausalLM.pooled): fvcore's trace never meets it
    untraced = count.by_component.get("pooler", 0)
    if cfg.has_linear_attention:
        raise AnalysisError(
            "fvcore's jit trace cannot follow the Gated DeltaNet blocks (their chunked delta rule "
            "and triangular solves); the closed form is held against PyTorch's FlopCounterMode on "
            "transformers' own Qwen3-Next / Qwen3.5 modules instead (tests/families/test_qwen_next.py)"
        )
    notes = [
        "fvcore counts 1 per multiply-add: its counts are doubled here.",
        "aten::scaled_dot_product_attention counted by a registered handle (QKᵀ + AV over the full T×T).",
    ]
    # the model refuses sequences beyond max_seq_len; widening it changes no matmul
    traced_cfg = cfg.replace(max_seq_len=max(cfg.max_seq_len, seq_len))
    if seq_len > cfg.max_seq_len:
        notes.append(f"traced with max_seq_len={seq_len} (> {cfg.max_seq_len}).")
    if cfg.n_layers <= 2:
        method = "full"  # nothing to extrapolate
    if method == "full":
        by_operator, unsupported = _trace(traced_cfg, seq_len, batch)
        traced = [cfg.n_layers]
    else:
        by_operator, unsupported, traced = _scaled_trace(traced_cfg, seq_len, batch)
        kinds = f" and {len(traced) - 2} 1-layer model(s) of its other block kinds" if len(traced) > 2 else ""
        notes.append(f"scaled: traced 1- and 2-layer models{kinds}, extrapolated to {cfg.n_layers} layers.")
    other_ops = {name: int(count) for name, count in by_operator.items() if name not in MATMUL_OPERATORS}
    if other_ops:
        notes.append(
            f"fvcore also counts {', '.join(sorted(other_ops))} (element-wise, its own "
            f"per-element rule): reported in fvcore_other_ops, not compared."
        )
    by_operator = {name: 2 * int(macs) for name, macs in by_operator.items() if name in MATMUL_OPERATORS}
    total = sum(by_operator.values())
    masked = masked_flops(cfg, seq_len, batch)
    if masked and cfg.is_mla:
        notes.append(
            f"MLA: the module pads v heads ({cfg.v_head_dim}) and q/k heads ({cfg.head_dim}) to one "
            f"width for the fused SDPA kernel; the {masked:,} FLOPs it adds multiply zeros and "
            f"are taken out of the difference (the model's maths has none)."
        )
    elif masked:
        notes.append(
            f"window: the module scores all {seq_len:,}×{seq_len:,} pairs of its windowed layers and "
            f"masks those beyond W={cfg.sliding_window:,}; the count takes the T·W a window kernel "
            f"computes, so the {masked:,} masked FLOPs are taken out of the difference."
        )
    if untraced:
        notes.append(
            f"BERT's pooler runs outside the traced forward (pooled()): its {untraced:,} FLOPs are "
            f"taken out of ours in the difference."
        )
    return FvcoreCheck(
        seq_len=seq_len,
        batch=batch,
        method=method,
        traced_layers=traced,
        fvcore_flops=total,
        ours_flops=ours,
        masked_flops=masked,
        difference=total - masked - (ours - untraced),
        relative_difference=(total - masked - (ours - untraced)) / ours,
        fvcore_by_operator=by_operator,
        fvcore_other_ops=other_ops,
        unsupported_ops={name: int(count) for name, count in sorted(unsupported.items())},
        notes=notes,
    )
