"""DeepSeek-V3.2 (``deepseek_v32``): DeepSeek-V3's MLA and DeepSeekMoE with DeepSeek Sparse
Attention (DSA) — a lightning indexer in every attention block (transformers' DeepseekV32Indexer:
index_n_heads heads of index_head_dim from q's bottleneck, one cached key of index_head_dim per
token, a weight per head) scores every earlier key, and each query attends only its index_topk
best. DeepseekV32Config always takes q through its bottleneck and rotates MLA's heads on
adjacent pairs (no rope_interleave key), the indexer's on halves.

GLM-5's ``glm_moe_dsa`` stays refused: its indexer rotates adjacent pairs and most of its layers
reuse an earlier layer's top-k (``indexer_types`` "shared", GlmMoeDsaAttention), which LLaMA Lab
does not model."""

from __future__ import annotations

from typing import Any

from ...errors import ConfigError
from ..fields import ModelFields
from ..hf.family import Counts, Family, Feature, FieldGroup, FieldSpec, Note, failing
from ..hf.keys import ModelType
from ..hf.reader import Reader, layer_list
from . import deepseek

INDEXER_KEYS = ("index_n_heads", "index_head_dim", "index_topk")
# DeepSeek-V3's keys less the ones DeepseekV32Config has not (rope_interleave, the MTP module's:
# a note), plus the indexer's, the per-layer kinds and num_experts (n_routed_experts's old name)
DEEPSEEK_V32 = ModelType(
    "deepseek_v32",
    "DeepseekV32ForCausalLM",
    keys=(deepseek.DEEPSEEK_V3.keys - {"rope_interleave", "num_nextn_predict_layers", "num_mtp_layers"})
    | {*INDEXER_KEYS, "mlp_layer_types", "layer_types", "num_experts"},
    # DeepseekV32Config (a strict dataclass) refuses a null head_dim, num_key_value_heads or
    # norm_topk_prob, which DeepseekV3Config takes; the per-layer kinds null mean "derive"
    nullable=frozenset({"mlp_layer_types", "layer_types", "num_experts"}),
    holds=deepseek.DEEPSEEK_V3.holds | {"dsa_indexer"},
)


def _sparse_layers(r: Reader) -> str | None:
    """mlp_layer_types (one of "dense" / "sparse" per layer) as moe_layers; None when absent (the
    first first_k_dense_replace layers dense, as DeepseekV32Config derives it)."""
    kinds = r.str_list("mlp_layer_types")
    if kinds is None:
        return None
    if len(kinds) != r.n_layers or set(kinds) - {"dense", "sparse"}:
        raise ConfigError(
            f"mlp_layer_types must name 'dense' or 'sparse' for each of the {r.n_layers} layers",
            field="mlp_layer_types",
        )
    return layer_list([i for i, kind in enumerate(kinds) if kind == "sparse"], r.n_layers)


def read(r: Reader) -> dict[str, Any]:
    layer_types = r.str_list("layer_types")
    if layer_types is not None and set(layer_types) != {"indexed_attention"}:
        raise ConfigError(
            "layer_types must be 'indexed_attention' on every layer (DeepseekV32Model attends so on all)",
            field="layer_types",
        )
    if r.get("num_experts") is not None:  # DeepseekV32Config.__post_init__ re-routes it
        r = Reader({**r.data, "n_routed_experts": r.data["num_experts"]}, r.model_type, r.n_layers, r.notes)
    out = deepseek.read(r)
    if not out["q_lora_rank"]:
        raise ConfigError(
            "q_lora_rank is null or 0: DeepseekV32Attention always takes q through its bottleneck "
            "(and the indexer reads it)",
            field="q_lora_rank",
        )
    sparse = _sparse_layers(r)
    if sparse is not None and out["n_experts"]:
        out["moe_layers"] = sparse
    return dict(out, rope_interleave=True, **{key: r.get(key) for key in INDEXER_KEYS})


def write(cfg: ModelFields, model_type: str) -> dict[str, Any]:
    out = deepseek.write(cfg, "deepseek_v3")
    del out["rope_interleave"]  # DeepseekV32Config has none: MLA always rotates adjacent pairs
    return dict(out, **{key: getattr(cfg, key) for key in INDEXER_KEYS})


def lacks(cfg: ModelFields, model_type: str) -> list[str]:
    return deepseek.lacks(cfg, "deepseek_v3") + failing(
        [
            (not cfg.has_indexer, "no DSA indexer"),
            (not cfg.q_lora_rank, "q from one q_proj"),
            (not cfg.rope_interleave, "RoPE on halves"),
        ]
    )


FEATURES = (Feature("dsa_indexer", "DeepSeek Sparse Attention's indexer", lambda cfg: cfg.has_indexer),)


def notes(cfg: ModelFields, counts: Counts) -> list[Note]:
    if not cfg.has_indexer:
        return []
    Hi, Di, K = cfg.index_n_heads, cfg.index_head_dim, cfg.index_topk
    return [
        Note(
            "attention",
            f"**DeepSeek Sparse Attention**: a lightning indexer in every block ({Hi} heads of {Di} from "
            f"q's bottleneck, one key of {Di} per token, a weight per head) scores each earlier key as "
            f"Σ_h w_h · relu(q_h · k); a query attends only its {K:,} best, so past {K:,} tokens the "
            f"attention of a new token stops growing while the indexer's scores (Hi · Di = {Hi * Di:,} "
            f"multiply-adds per key) still do. The indexer caches {Di} more values per token and layer.",
        )
    ]


PRESETS: dict[str, dict[str, Any]] = {
    # deepseek-ai/DeepSeek-V3.2-Exp config.json (DeepSeek-V3.2's is the same architecture;
    # tests/families/published_configs/deepseek-v3.2-exp.json, SOURCES.md): DeepSeek-V3's shapes
    # with an indexer of 64 heads of 128 picking the top 2,048 keys. DeepseekV32ForCausalLM on the
    # meta device: 671,877,929,216 (its MTP module, num_nextn_predict_layers, not counted). The
    # model card publishes no count; its inference demo's config is "config_671B_v3.2.json"
    # (README.md @114c2cb: "export CONFIG=config_671B_v3.2.json")
    "deepseek-v3.2-exp": dict(
        deepseek.PRESETS["deepseek-v3"], index_n_heads=64, index_head_dim=128, index_topk=2048
    ),
}

FIELDS = FieldGroup(
    "DeepSeek Sparse Attention (DeepSeek-V3.2)",
    (
        FieldSpec(
            "index_n_heads",
            "indexer heads (index_n_heads; 0 = no indexer)",
            "int",
            help="DeepSeek-V3.2's lightning indexer picks each query's index_topk keys. Needs MLA with "
            "a q bottleneck (q_lora_rank > 0).",
            minimum=0,
        ),
        FieldSpec("index_head_dim", "indexer head width (index_head_dim)", "int"),
        FieldSpec("index_topk", "keys a query attends (index_topk)", "int"),
    ),
)

FAMILY = Family(
    "DeepSeek-V3.2",
    (DEEPSEEK_V32,),
    read=read,
    write=write,
    lacks=lacks,
    notes=notes,
    key_notes=deepseek.key_notes,
    features=FEATURES,
    presets=PRESETS,
    field_groups=(FIELDS,),
)
