"""Mistral and Mixtral (``mistral``, ``mixtral``): a LLaMA whose blocks attend through a sliding
window (MistralConfig: every layer, 4096 unless the file says null), and Mixtral's mixture of
experts on every layer (8 experts, top-2, renormalised). The sidebar's group of the fields the
first families added (head_dim, biases, QK-norm, windows, experts) is declared here."""

from __future__ import annotations

from typing import Any

from ...units import plural
from ..fields import ModelFields
from ..hf.family import LAYER_SET_HELP, Counts, Exact, Family, FieldGroup, FieldSpec, Note, Wrapper, failing
from ..hf.keys import ModelType
from ..hf.reader import Reader

MISTRAL = ModelType(
    "mistral",
    "MistralForCausalLM",
    keys=frozenset({"sliding_window"}),
    nullable=frozenset({"head_dim", "sliding_window"}),
)
MIXTRAL = ModelType(
    "mixtral",
    "MixtralForCausalLM",
    keys=frozenset({"sliding_window", "num_local_experts", "num_experts", "num_experts_per_tok"}),
    nullable=frozenset({"head_dim", "sliding_window"}),
)


def read(r: Reader) -> dict[str, Any]:
    out: dict[str, Any] = dict(sliding_window=r.get("sliding_window") or 0)
    if r.name == "mixtral":
        out.update(
            n_experts=r.get("num_local_experts"),
            experts_per_token=r.get("num_experts_per_tok"),
            moe_renormalize=True,
        )
    return out


def write(cfg: ModelFields, model_type: str) -> dict[str, Any]:
    out: dict[str, Any] = dict(sliding_window=cfg.sliding_window if any(cfg.local_layer_flags) else None)
    if model_type == "mixtral":
        out.update(num_local_experts=cfg.n_experts, num_experts_per_tok=cfg.experts_per_token)
    return out


def lacks(cfg: ModelFields, model_type: str) -> list[str]:
    local = cfg.local_layer_flags
    window_all = not any(local) or all(local)
    biases = cfg.qkv_bias or cfg.o_bias or cfg.mlp_bias
    if model_type == "mistral":
        return failing(
            [
                (cfg.qk_norm, "QK-norm"),
                (not window_all, "a window on some layers only"),
                (cfg.is_moe, "experts"),
                (biases, "biases"),
            ]
        )
    return failing(
        [
            (cfg.qk_norm, "QK-norm"),
            (not window_all, "a window on some layers only"),
            (not cfg.is_moe or not all(cfg.moe_layer_flags), "experts on every layer"),
            (cfg.expert_ffn_hidden != cfg.ffn_hidden, "an expert width apart"),
            (not cfg.moe_renormalize, "unnormalised top-k"),
            (biases, "biases"),
        ]
    )


def _deepseek_style(cfg: ModelFields) -> bool:
    return cfg.n_shared_experts > 0 or cfg.moe_scoring != "softmax" or cfg.moe_groups > 1


def notes(cfg: ModelFields, counts: Counts) -> list[Note]:
    """The sliding window (any family's but Llama 4's chunks) and a plain mixture of experts
    (Mixtral's and Qwen3-MoE's: no shared expert, softmax routing, no groups)."""
    out = []
    local = sum(cfg.local_layer_flags)
    if local and not cfg.chunked_attention:
        rest = cfg.n_layers - local
        out.append(
            Note(
                "window",
                f"**Sliding window** (sparse attention, Mistral): {local} of "
                f"{plural(cfg.n_layers, 'block')} {'lets' if local == 1 else 'let'} each query see only "
                f"its last {cfg.sliding_window:,} keys, so their scores cost T·W instead of T² and their "
                f"KV cache stops growing at W tokens"
                + (
                    f"; the other {rest} {'attends' if rest == 1 else 'attend'} every earlier token."
                    if rest
                    else "."
                ),
            )
        )
    plain_moe = cfg.is_moe and cfg.moe_style == "standard" and not cfg.shared_expert_gate
    if plain_moe and not _deepseek_style(cfg):
        out.append(
            Note(
                "experts",
                f"**Mixture of experts** (Mixtral / Qwen3-MoE): "
                f"{plural(sum(cfg.moe_layer_flags), 'sparse block')} of {cfg.n_experts} experts; a router "
                f"picks {cfg.experts_per_token} per token. All experts are weights to store "
                f"({counts.experts / counts.total:.0%} of the {counts.total:,} parameters); a "
                f"token uses {counts.active:,} ({counts.active / counts.total:.1%}).",
            )
        )
    return out


_LLAMA: dict[str, Any] = dict(vocab_size=32000, norm_eps=1e-5, rope_theta=10000.0)

PRESETS: dict[str, dict[str, Any]] = {
    # mistralai/Mistral-7B-v0.1 config.json: sliding_window 4096 on every layer
    "mistral-7b": dict(
        d_model=4096,
        n_layers=32,
        n_heads=32,
        n_kv_heads=8,
        ffn_hidden=14336,
        max_seq_len=32768,
        sliding_window=4096,
        **_LLAMA,
    ),
    # mistralai/Mistral-Nemo-Base-2407 config.json: head_dim 128 ≠ 5120/32, vocab 131072
    "mistral-nemo-12b": dict(
        vocab_size=131072,
        d_model=5120,
        n_layers=40,
        n_heads=32,
        n_kv_heads=8,
        head_dim=128,
        ffn_hidden=14336,
        max_seq_len=1024000,
        rope_theta=1e6,
        norm_eps=1e-5,
    ),
    # mistralai/Mixtral-8x7B-v0.1 config.json: 8 experts, top-2, renormalised
    "mixtral-8x7b": dict(
        d_model=4096,
        n_layers=32,
        n_heads=32,
        n_kv_heads=8,
        ffn_hidden=14336,
        max_seq_len=32768,
        n_experts=8,
        experts_per_token=2,
        **{**_LLAMA, "rope_theta": 1e6},
    ),
}

PUBLISHED = {
    "mistral-7b": Exact(7_241_732_096),
    "mistral-nemo-12b": Exact(12_247_782_400),
    "mixtral-8x7b": Exact(46_702_792_704),
}

# The fields the first families beyond LLaMA added (Mistral, Mixtral, Qwen)
FIELDS = FieldGroup(
    "Families (Mistral, Mixtral, Qwen)",
    (
        FieldSpec(
            "head_dim",
            "head_dim (0 = d_model / n_heads)",
            "int",
            help="Qwen3 and Mistral-Nemo set 128 whatever d_model / n_heads is.",
            minimum=0,
        ),
        FieldSpec("qkv_bias", "q/k/v biases", "follow"),
        FieldSpec("o_bias", "output-projection bias", "follow"),
        FieldSpec("mlp_bias", "FFN biases", "follow"),
        FieldSpec("qk_norm", "QK-norm (RMSNorm on q and k per head)", "toggle"),
        FieldSpec(
            "sliding_window",
            "sliding window W (0 = none)",
            "int",
            help="Mistral: a local layer's query sees only its last W keys, and its KV "
            "cache holds at most W tokens.",
            minimum=0,
        ),
        FieldSpec("local_layers", "layers with the window", "text", help=LAYER_SET_HELP),
        FieldSpec(
            "n_experts",
            "experts E (0 = dense FFN)",
            "int",
            help="Mixtral / Qwen3-MoE: a router sends each token to k of E expert FFNs.",
            minimum=0,
        ),
        FieldSpec("experts_per_token", "experts per token k", "int", minimum=0),
        FieldSpec("expert_ffn_hidden", "expert width (0 = ffn_hidden)", "int", minimum=0),
        FieldSpec("moe_layers", "sparse layers", "text", help=LAYER_SET_HELP),
        FieldSpec("moe_renormalize", "renormalise the top-k router probabilities", "toggle"),
    ),
)

FAMILY = Family(
    "Mistral",
    (MISTRAL, MIXTRAL),
    read=read,
    write=write,
    lacks=lacks,
    notes=notes,
    presets=PRESETS,
    published=PUBLISHED,
    field_groups=(FIELDS,),
    # Mistral 3 (Mistral Small 3.1 / 3.2): Pixtral and its projector counted beside the text
    # decoder its text_config names (AutoConfig: mistral, or Mistral Small 4's mistral4); the
    # wrapper's own tie_word_embeddings (default true) alone ties the head
    wrappers=(
        Wrapper(
            "mistral3",
            "mistral",
            "Mistral3Config",
            tie_default=True,
            fixed=False,
            vision="pixtral",
            tie_from_text=False,
        ),
    ),
)
