"""The exact local shard of every parameter on every rank, as PyTorch's FSDP2 (``fully_shard``)
and our tensor-parallel plan (``llama_lab.train.tensor_parallel``) lay them out, and the bytes
each rank then holds: parameters, gradients, AdamW's two moments, saved activations.

Tensor parallel (tp ranks, one group): by parameter name —

- ``embed_tokens.weight`` and ``lm_head.weight``: vocabulary rows, V/tp each (Shard(0));
- the fused ``self_attn.qkv_proj`` and ``mlp.gate_up_proj`` (weight and bias): every *part*
  (q, k, v; gate, up) split by heads / rows into tp equal chunks, rank r holding
  [q_r; k_r; v_r] — (H + 2G)·D/tp rows, 2F/tp rows; a non-gated ``mlp.up_proj``: F/tp rows;
- ``self_attn.o_proj.weight`` and ``mlp.down_proj.weight``: input columns (Shard(1));
- everything else (norms, QK-norms, row-parallel biases, learned positions): replicated.

FSDP2 then shards dim 0 of each (tensor-parallel local) parameter over the dp ranks with
``torch.chunk``'s semantics: chunks of ceil(n/dp) rows, so the last ranks may hold fewer rows or
none (5 rows over 2 ranks: 3 and 2; over 4 ranks: 2, 2, 1, 0). Bytes are of the local shard's
elements (FSDP2's padding to equal chunks, inside its communication buffers, is not counted).
Global rank = dp_rank · tp + tp_rank (a (dp, tp) device mesh, row-major).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..config import ModelConfig
from ..errors import AnalysisError, ConfigError
from ..model import build_model
from ..units import plain_fields
from . import memory
from .scope import check_planned

STRATEGIES = ("fsdp", "tp", "fsdp+tp")
MIN_RANKS, MAX_RANKS = 2, 8
DEFAULT_2D_TP = 2
FP32_BYTES = 4
ADAM_MOMENTS = 2  # exp_avg and exp_avg_sq; AdamW's step counters are not counted

# name suffix -> the tensor-parallel rule: ("rows", 0) / ("cols", 1) sharded, "parts" (each
# fused part split by rows, rank r holding its piece of every part), or replicated (absent)
TP_RULES = {
    "model.embed_tokens.weight": "rows",
    "lm_head.weight": "rows",
    "self_attn.qkv_proj.weight": "parts",
    "self_attn.qkv_proj.bias": "parts",
    "mlp.gate_up_proj.weight": "parts",
    "mlp.gate_up_proj.bias": "parts",
    "mlp.up_proj.weight": "rows",
    "mlp.up_proj.bias": "rows",
    "self_attn.o_proj.weight": "cols",
    "mlp.down_proj.weight": "cols",
}


def tp_rule(name: str) -> str:
    """ "rows", "cols", "parts" or "replicate": how tensor parallelism splits parameter ``name``."""
    for suffix, rule in TP_RULES.items():
        if name == suffix or name.endswith("." + suffix):
            return rule
    return "replicate"


def check_tensor_parallel(cfg: ModelConfig, tp: int) -> None:
    """Refuse (ConfigError) a config our tensor-parallel plan cannot split into tp equal parts."""
    if tp == 1:
        return
    if cfg.is_moe or cfg.moe_style == "llama4":  # (Llama 4's dense blocks: feed_forward.*)
        raise ConfigError(
            f"tensor parallel of experts is not modelled (n_experts={cfg.n_experts}, tp={tp}): use fsdp"
        )
    for field in ("n_heads", "n_kv_heads", "ffn_hidden", "vocab_size"):
        value = getattr(cfg, field)
        if value % tp:
            raise ConfigError(
                f"tp={tp} does not divide {field}={value}: tensor parallelism splits it into tp equal parts",
                field="tp",
            )


def check_shard_layout(cfg: ModelConfig, strategy: str, ranks: int, tp: int | None = None) -> tuple[int, int]:
    """(dp, tp) of ``ranks`` processes under ``strategy``; refuses what cannot run."""
    check_planned(cfg, "shard")
    if strategy not in STRATEGIES:
        raise AnalysisError(f"strategy={strategy!r} must be one of {', '.join(STRATEGIES)}", field="strategy")
    if isinstance(ranks, bool) or not isinstance(ranks, int) or not MIN_RANKS <= ranks <= MAX_RANKS:
        raise AnalysisError(
            f"ranks={ranks!r} must be an integer from {MIN_RANKS} to {MAX_RANKS}", field="ranks"
        )
    if tp is not None and (isinstance(tp, bool) or not isinstance(tp, int) or tp < 1):
        raise AnalysisError(f"tp={tp!r} must be a positive integer", field="tp")
    if strategy == "fsdp":
        if tp not in (None, 1):
            raise AnalysisError(
                f"strategy='fsdp' has no tensor parallelism: tp={tp} must be omitted (use 'fsdp+tp')",
                field="strategy",
            )
        return ranks, 1
    if strategy == "tp":
        if tp not in (None, ranks):
            raise AnalysisError(
                f"strategy='tp' puts every rank in one tensor-parallel group: "
                f"tp={tp} must equal ranks={ranks}",
                field="tp",
                also=("ranks",),
            )
        check_tensor_parallel(cfg, ranks)
        return 1, ranks
    tp = DEFAULT_2D_TP if tp is None else tp
    if ranks < 4:
        raise AnalysisError(
            f"strategy='fsdp+tp' needs ranks >= 4 (dp >= 2 and tp >= 2), got ranks={ranks}", field="strategy"
        )
    if tp < 2 or ranks % tp or ranks // tp < 2:
        raise AnalysisError(
            f"strategy='fsdp+tp': tp={tp} must be >= 2 and divide ranks={ranks} "
            f"leaving dp = ranks // tp >= 2",
            field="strategy",
        )
    check_tensor_parallel(cfg, tp)
    return ranks // tp, tp


def tp_local_shape(cfg: ModelConfig, name: str, shape: tuple[int, ...], tp: int) -> tuple[int, ...]:
    """The shape of parameter ``name`` (global ``shape``) on one tensor-parallel rank."""
    rule = tp_rule(name) if tp > 1 else "replicate"
    if rule == "replicate":
        return tuple(shape)
    dim = 1 if rule == "cols" else 0
    if shape[dim] % tp:
        raise ConfigError(f"tp={tp} does not divide dim {dim} of {name} {tuple(shape)}", field="tp")
    return tuple(n // tp if i == dim else n for i, n in enumerate(shape))


def fsdp_chunk_rows(n: int, parts: int, index: int) -> int:
    """Rows of chunk ``index`` when ``torch.chunk`` cuts n rows into ``parts``: ceil(n/parts)
    each, the last ones fewer or none."""
    size = math.ceil(n / parts) if n else 0
    return max(0, min(size, n - index * size))


def fsdp_local_shape(shape: tuple[int, ...], dp: int, dp_rank: int) -> tuple[int, ...]:
    """FSDP2's shard of a (tensor-parallel local) ``shape`` on ``dp_rank``: dim 0 chunked."""
    if dp == 1 or not shape:
        return tuple(shape)
    return (fsdp_chunk_rows(shape[0], dp, dp_rank), *shape[1:])


def local_shapes(cfg: ModelConfig, dp: int, tp: int, dp_rank: int) -> dict[str, tuple[int, ...]]:
    """Every parameter's local shape on a rank of data-parallel index ``dp_rank`` (the same on
    every tensor-parallel rank: the splits are equal), tied weights once, in
    ``named_parameters`` order."""
    model = build_model(cfg, device="meta")
    return {
        name: fsdp_local_shape(tp_local_shape(cfg, name, tuple(p.shape), tp), dp, dp_rank)
        for name, p in model.named_parameters()
    }


@dataclass(frozen=True)
class RankShard:
    """What one rank holds (bytes): parameters, gradients, AdamW's exp_avg and exp_avg_sq (its
    ``step`` counters, one scalar per parameter, are not counted) and the activations saved for
    backward in one forward with the loss (None where memory.activation_bytes has no ``tp``)."""

    rank: int
    dp_rank: int
    tp_rank: int
    params_bytes: int
    grads_bytes: int
    optimizer_bytes: int
    activation_bytes: int | None

    def figures(self) -> dict:
        return {key: getattr(self, key) for key in BYTE_FIELDS}

    def to_dict(self) -> dict:
        return plain_fields(self)


BYTE_FIELDS = ("params_bytes", "grads_bytes", "optimizer_bytes", "activation_bytes")


def loss_path(strategy: str) -> str:
    """The loss each strategy trains through: FSDP the model's chunked loss (``model.loss``),
    tensor parallel the vocabulary-parallel cross-entropy of the sharded logits."""
    return "chunked" if strategy == "fsdp" else "logits"


def predicted_activation_bytes(cfg: ModelConfig, seq_len: int, batch: int, strategy: str, tp: int) -> int:
    """memory.activation_bytes of one rank's forward (``batch`` sequences of ``seq_len``
    predicted tokens) through its strategy's loss path, on one of ``tp`` ranks."""
    return memory.activation_bytes(cfg, seq_len, batch, "fp32", loss=loss_path(strategy), tp=tp)


def rank_shards(
    cfg: ModelConfig, strategy: str, dp: int, tp: int, seq_len: int = 32, batch: int = 2
) -> list[RankShard]:
    """Per global rank (dp·tp of them), the bytes FSDP2 and our tensor-parallel plan leave there
    in float32: parameters and gradients 4 bytes per local element, AdamW 2 × 4. ``batch``
    sequences per data-parallel rank."""
    ranks = dp * tp
    want = check_shard_layout(cfg, strategy, ranks, None if strategy != "fsdp+tp" else tp)
    if want != (dp, tp):
        raise AnalysisError(
            f"strategy={strategy!r} on {ranks} ranks is dp={want[0]}, tp={want[1]}, not dp={dp}, tp={tp}",
            field="strategy",
        )
    activations = predicted_activation_bytes(cfg, seq_len, batch, strategy, tp)
    shards = []
    for dp_rank in range(dp):
        elements = sum(math.prod(s) for s in local_shapes(cfg, dp, tp, dp_rank).values())
        weights = FP32_BYTES * elements
        shards += [
            RankShard(
                dp_rank * tp + tp_rank,
                dp_rank,
                tp_rank,
                weights,
                weights,
                ADAM_MOMENTS * weights,
                activations,
            )
            for tp_rank in range(tp)
        ]
    return shards
