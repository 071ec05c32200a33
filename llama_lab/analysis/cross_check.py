"""Cross-check of the closed-form matmul FLOPs against fvcore's ``FlopCountAnalysis``.

fvcore traces the model with ``torch.jit`` and counts one "flop" per multiply-add; it has no
rule for ``aten::scaled_dot_product_attention``, so a handle is registered here (QKᵀ and AV over
the full T×S, as the closed form counts). The model is built on the meta device: tracing needs
only shapes, so even 405B allocates nothing.
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
    difference: int  # fvcore − ours
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


def _extrapolate(one: dict, two: dict, n_layers: int) -> dict:
    """count(L) = count(1) + (L − 1)·(count(2) − count(1)): every block is identical."""
    keys = set(one) | set(two)
    return {k: one.get(k, 0) + (n_layers - 1) * (two.get(k, 0) - one.get(k, 0)) for k in keys}


def fvcore_check(cfg: ModelConfig, seq_len: int, batch: int = 1, method: str = "full") -> FvcoreCheck:
    """fvcore's forward FLOPs (× 2) next to ours. ``method="full"`` traces the whole model on
    meta; ``"scaled"`` traces 1- and 2-layer models of the same widths and extrapolates to
    n_layers (exact, since blocks are identical; much faster for 80-126-layer presets)."""
    if method not in METHODS:
        raise AnalysisError(f"method={method!r} must be one of {', '.join(METHODS)}")
    ours = count_flops(cfg, seq_len, batch).forward  # validates seq_len and batch
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
        op1, skip1 = _trace(traced_cfg.replace(n_layers=1), seq_len, batch)
        op2, skip2 = _trace(traced_cfg.replace(n_layers=2), seq_len, batch)
        by_operator = _extrapolate(op1, op2, cfg.n_layers)
        unsupported = {k: v for k, v in _extrapolate(skip1, skip2, cfg.n_layers).items() if v}
        traced = [1, 2]
        notes.append(f"scaled: traced 1- and 2-layer models, extrapolated to {cfg.n_layers} layers.")
    other_ops = {name: int(count) for name, count in by_operator.items() if name not in MATMUL_OPERATORS}
    if other_ops:
        notes.append(
            f"fvcore also counts {', '.join(sorted(other_ops))} (element-wise, its own "
            f"per-element rule): reported in fvcore_other_ops, not compared."
        )
    by_operator = {name: 2 * int(macs) for name, macs in by_operator.items() if name in MATMUL_OPERATORS}
    total = sum(by_operator.values())
    return FvcoreCheck(
        seq_len=seq_len,
        batch=batch,
        method=method,
        traced_layers=traced,
        fvcore_flops=total,
        ours_flops=ours,
        difference=total - ours,
        relative_difference=(total - ours) / ours,
        fvcore_by_operator=by_operator,
        fvcore_other_ops=other_ops,
        unsupported_ops={name: int(count) for name, count in sorted(unsupported.items())},
        notes=notes,
    )
