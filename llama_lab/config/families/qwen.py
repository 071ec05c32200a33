"""Qwen2, Qwen3 and Qwen3-MoE (``qwen2``, ``qwen3``, ``qwen3_moe``): Qwen2's q/k/v biases (o_proj
has none); Qwen3's QK-norm (an RMSNorm over each q and k head before RoPE), head_dim 128 unless
given and attention_bias on all four projections; sliding layers from max_window_layers on when
use_sliding_window (or as layer_types says); Qwen3-MoE's experts (128 of width 768, top-8, not
renormalised unless norm_topk_prob) every decoder_sparse_step-th block but mlp_only_layers."""

from __future__ import annotations

from typing import Any

from ..fields import ModelFields
from ..hf.family import Counts, Exact, Family, Note, Wrapper, failing
from ..hf.keys import ModelType
from ..hf.reader import Reader, windows

_WINDOW_KEYS = frozenset({"sliding_window", "use_sliding_window", "max_window_layers", "layer_types"})
QWEN2 = ModelType(
    "qwen2",
    "Qwen2ForCausalLM",
    keys=_WINDOW_KEYS,
    nullable=frozenset({"num_key_value_heads", "head_dim", "sliding_window", "layer_types"}),
)
QWEN3 = ModelType(
    "qwen3",
    "Qwen3ForCausalLM",
    keys=_WINDOW_KEYS | {"attention_bias"},
    nullable=frozenset({"num_key_value_heads", "sliding_window", "layer_types"}),
)
QWEN3_MOE = ModelType(
    "qwen3_moe",
    "Qwen3MoeForCausalLM",
    keys=frozenset(
        {
            "attention_bias",
            "use_sliding_window",
            "sliding_window",
            "num_experts",
            "num_local_experts",
            "num_experts_per_tok",
            "moe_intermediate_size",
            "norm_topk_prob",
            "decoder_sparse_step",
            "mlp_only_layers",
        }
    ),
    nullable=frozenset({"head_dim", "sliding_window", "mlp_only_layers"}),
)


def _windows(r: Reader) -> tuple[int, str]:
    """(window, local layer set) of Qwen2/Qwen3: layer_types when given, else the layers from
    max_window_layers on when use_sliding_window."""
    window = r.get("sliding_window")
    layer_types = r.layer_types()
    if layer_types is not None:
        local = [i for i, kind in enumerate(layer_types) if kind == "sliding_attention"]
    elif r.flag("use_sliding_window") and window is not None:
        start = r.count("max_window_layers", 0, 1 << 62)
        local = list(range(min(start, r.n_layers), r.n_layers))
    else:
        local = []
    return windows(window, local, r.n_layers)


def _experts(r: Reader) -> dict[str, Any]:
    """Qwen3-MoE's experts: every decoder_sparse_step-th block but mlp_only_layers."""
    experts = r.get("num_experts")
    if "num_experts" not in r.data and "num_local_experts" in r.data:
        experts = r.data["num_local_experts"]  # Qwen3MoeConfig's attribute_map
    step = r.count("decoder_sparse_step", 0, 1 << 62)
    dense = set(r.int_list("mlp_only_layers") or [])
    sparse = [i for i in range(r.n_layers) if i not in dense and step and (i + 1) % step == 0]
    return dict(
        n_experts=experts,
        experts_per_token=r.get("num_experts_per_tok"),
        expert_ffn_hidden=r.get("moe_intermediate_size"),
        moe_renormalize=r.flag("norm_topk_prob"),
        moe_layers="all" if len(sparse) == r.n_layers else ",".join(map(str, sparse)) or "none",
    )


def read(r: Reader) -> dict[str, Any]:
    out: dict[str, Any]
    if r.name == "qwen2":
        out = dict(qkv_bias=True, o_bias=False, mlp_bias=False)
    else:
        attention = r.flag("attention_bias")
        out = dict(qkv_bias=attention, o_bias=attention, mlp_bias=False, qk_norm=True)
    if r.name == "qwen3_moe":
        if r.flag("use_sliding_window"):
            out.update(sliding_window=r.get("sliding_window") or 0)
        out.update(_experts(r))
    else:
        out["sliding_window"], out["local_layers"] = _windows(r)
    return out


def write(cfg: ModelFields, model_type: str) -> dict[str, Any]:
    local = cfg.local_layer_flags
    out: dict[str, Any] = {}
    if model_type in ("qwen3", "qwen3_moe"):
        out["attention_bias"] = cfg.qkv_bias
    if model_type in ("qwen2", "qwen3"):
        out.update(
            use_sliding_window=any(local),
            sliding_window=cfg.sliding_window or None,
            max_window_layers=cfg.n_layers,
            layer_types=["sliding_attention" if flag else "full_attention" for flag in local],
        )
    else:
        out.update(
            use_sliding_window=any(local),
            sliding_window=cfg.sliding_window or None,
            num_experts=cfg.n_experts,
            num_experts_per_tok=cfg.experts_per_token,
            moe_intermediate_size=cfg.expert_ffn_hidden,
            norm_topk_prob=cfg.moe_renormalize,
            decoder_sparse_step=1,
            mlp_only_layers=[i for i, sparse in enumerate(cfg.moe_layer_flags) if not sparse],
        )
    return out


def lacks(cfg: ModelFields, model_type: str) -> list[str]:
    same_attention_bias = cfg.qkv_bias == cfg.o_bias
    if model_type == "qwen2":
        return failing(
            [
                (cfg.qk_norm, "QK-norm"),
                (cfg.is_moe, "experts"),
                (
                    not (cfg.qkv_bias and not cfg.o_bias and not cfg.mlp_bias),
                    "q/k/v biases without o/MLP biases",
                ),
            ]
        )
    if model_type == "qwen3":
        return failing(
            [
                (not cfg.qk_norm, "QK-norm"),
                (cfg.is_moe, "experts"),
                (not same_attention_bias, "q/k/v and o biases differ"),
                (cfg.mlp_bias, "MLP biases"),
            ]
        )
    local = cfg.local_layer_flags
    return failing(
        [
            (not cfg.qk_norm, "QK-norm"),
            (not cfg.is_moe, "experts"),
            (any(local) and not all(local), "a window on some layers only"),
            (not same_attention_bias, "q/k/v and o biases differ"),
            (cfg.mlp_bias, "MLP biases"),
        ]
    )


def notes(cfg: ModelFields, counts: Counts) -> list[Note]:
    """QK-norm: Qwen3's per head, or OLMo 2's over the whole projections (Llama 4's after RoPE:
    its own note)."""
    if not cfg.qk_norm or cfg.qk_norm_scope == "rope_l2":
        return []
    q_width, k_width = cfg.qk_norm_widths
    where = (
        f"the {cfg.head_dim} dimensions of every q and k head (Qwen3)"
        if cfg.qk_norm_scope == "head"
        else f"all {q_width:,} dimensions of q and the {k_width:,} of k, not per head (OLMo 2)"
    )
    return [
        Note(
            "attention",
            f"**QK-norm**: an RMSNorm over {where} before RoPE, {q_width + k_width:,} parameters per "
            f"{'attention ' if cfg.has_linear_attention else ''}block.",
        )
    ]


PRESETS: dict[str, dict[str, Any]] = {
    # Qwen/Qwen2.5-7B config.json: q/k/v biases, o_proj none (use_sliding_window false)
    "qwen2.5-7b": dict(
        vocab_size=152064,
        d_model=3584,
        n_layers=28,
        n_heads=28,
        n_kv_heads=4,
        ffn_hidden=18944,
        max_seq_len=131072,
        qkv_bias=True,
        rope_theta=1e6,
        norm_eps=1e-6,
    ),
    # Qwen/Qwen3-8B config.json: head_dim 128, QK-norm
    "qwen3-8b": dict(
        vocab_size=151936,
        d_model=4096,
        n_layers=36,
        n_heads=32,
        n_kv_heads=8,
        head_dim=128,
        ffn_hidden=12288,
        max_seq_len=40960,
        qk_norm=True,
        rope_theta=1e6,
        norm_eps=1e-6,
    ),
    # Qwen/Qwen3-30B-A3B config.json: 128 experts of width 768, top-8, norm_topk_prob true
    "qwen3-30b-a3b": dict(
        vocab_size=151936,
        d_model=2048,
        n_layers=48,
        n_heads=32,
        n_kv_heads=4,
        head_dim=128,
        ffn_hidden=6144,
        max_seq_len=40960,
        qk_norm=True,
        n_experts=128,
        experts_per_token=8,
        expert_ffn_hidden=768,
        rope_theta=1e6,
        norm_eps=1e-6,
    ),
}

PUBLISHED = {
    "qwen2.5-7b": Exact(7_615_616_512),
    "qwen3-8b": Exact(8_190_735_360),
    "qwen3-30b-a3b": Exact(30_532_122_624),
}

FAMILY = Family(
    "Qwen",
    (QWEN2, QWEN3, QWEN3_MOE),
    read=read,
    write=write,
    lacks=lacks,
    notes=notes,
    presets=PRESETS,
    published=PUBLISHED,
    # Qwen2.5-VL: its text decoder (Qwen2_5_VLTextConfig, the text keys at the file's top level in
    # the released files) builds Qwen2's layers, read as qwen2; its ViT and patch merger counted
    wrappers=(
        Wrapper(
            "qwen2_5_vl",
            "qwen2",
            "Qwen2_5_VLConfig",
            tie_default=False,
            vision="qwen2_5_vl",
            text_at_top=True,
        ),
    ),
)
