"""SmolLM3 (``smollm3``): a LLaMA block whose RoPE is skipped where no_rope_layers says 0 (by
default every no_rope_layer_interval-th layer, 4: NoPE, no position signal but the causal mask);
attention_bias on q/k/v/o, mlp_bias; layer_types (by default sliding on the NoPE layers when
use_sliding_window) picks the layers the mask windows; a tied head by default."""

from __future__ import annotations

from typing import Any

from ...errors import ConfigError
from ...units import plural
from ..bounds import FAMILY_LIMITS
from ..fields import ModelFields
from ..hf.family import Counts, Exact, Family, Feature, Note, failing, head_dim_always_read
from ..hf.keys import ModelType
from ..hf.reader import Reader, layer_list, windows

SMOLLM3 = ModelType(
    "smollm3",
    "SmolLM3ForCausalLM",
    keys=frozenset(
        {
            "attention_bias",
            "mlp_bias",
            "use_sliding_window",
            "sliding_window",
            "layer_types",
            "no_rope_layers",
            "no_rope_layer_interval",
        }
    ),
    nullable=frozenset({"num_key_value_heads", "sliding_window", "layer_types", "no_rope_layers"}),
    null_why=head_dim_always_read("smollm3"),
    holds=frozenset({"nope_blocks"}),
)


def _rotated(r: Reader) -> list[int]:
    """no_rope_layers (1: the layer rotates), or SmolLM3Config's default: 0 on every
    no_rope_layer_interval-th layer."""
    rope = r.int_list("no_rope_layers")
    if rope is None:
        interval = r.count("no_rope_layer_interval", 1, 1 << 62)  # 0: ZeroDivisionError
        return [int((i + 1) % interval != 0) for i in range(r.n_layers)]
    if len(rope) < r.n_layers:
        raise ConfigError(
            f"no_rope_layers has {plural(len(rope), 'entry', 'entries')} for "
            f"{plural(r.n_layers, 'layer')}: SmolLM3Attention "
            f"reads no_rope_layers[layer_idx] for every layer (IndexError)",
            field="no_rope_layers",
        )
    if len(rope) > r.n_layers:
        r.note(
            f"no_rope_layers has {plural(len(rope), 'entry', 'entries')} for "
            f"{plural(r.n_layers, 'layer')}: the entries after "
            f"the last layer are never read; ignored"
        )
    given = r.data.get("no_rope_layer_interval")
    if isinstance(given, int) and given > 0 and not isinstance(given, bool):
        derived = [int((i + 1) % given != 0) for i in range(r.n_layers)]
        if [bool(x) for x in rope[: r.n_layers]] != [bool(x) for x in derived]:
            r.note(
                f"no_rope_layer_interval={given} is not used: no_rope_layers names each "
                f"layer (SmolLM3Config derives it from the interval only when it is absent)"
            )
    return rope


def read(r: Reader) -> dict[str, Any]:
    """SmolLM3Config / SmolLM3ForCausalLM: SmolLM3Attention rotates q and k only where
    ``no_rope_layers[layer]`` is non-zero; the layers layer_types marks "sliding_attention" get
    the sliding-window mask (SmolLM3Config: the NoPE layers, when use_sliding_window and
    sliding_window is set)."""
    attention, mlp = r.flag("attention_bias"), r.flag("mlp_bias")
    rope = _rotated(r)
    nope = [i for i in range(r.n_layers) if not rope[i]]
    window = r.get("sliding_window")
    use_window = r.flag("use_sliding_window")
    layer_types = r.layer_types()
    if layer_types is None:  # SmolLM3Config.__post_init__
        local = nope if use_window and window is not None else []
    else:
        local = [i for i, kind in enumerate(layer_types) if kind == "sliding_attention"]
        if local and window is None:
            raise ConfigError(
                "layer_types names sliding layers but sliding_window is null: SmolLM3Model "
                "builds their sliding-window mask from it",
                field="sliding_window",
            )
        if local and not use_window:
            r.note(
                "layer_types names sliding layers while use_sliding_window is false: SmolLM3Model "
                "still gives them the sliding-window mask (eager and SDPA attention window them; "
                "only flash attention reads use_sliding_window): read as windowed"
            )
    if local:
        window = r.count("sliding_window", 1, FAMILY_LIMITS["sliding_window"])
    sliding_window, local_layers = windows(window, local, r.n_layers)
    return dict(
        qkv_bias=attention,
        o_bias=attention,
        mlp_bias=mlp,
        nope_layers=layer_list(nope, r.n_layers),
        sliding_window=sliding_window,
        local_layers=local_layers,
        **r.floor_head_dim(),
    )


def write(cfg: ModelFields, model_type: str) -> dict[str, Any]:
    local = cfg.local_layer_flags
    return dict(
        attention_bias=cfg.qkv_bias,
        mlp_bias=cfg.mlp_bias,
        no_rope_layers=[int(rope) for rope in cfg.rope_layer_flags],
        use_sliding_window=any(local),
        sliding_window=cfg.sliding_window or None,
        layer_types=["sliding_attention" if flag else "full_attention" for flag in local],
    )


def lacks(cfg: ModelFields, model_type: str) -> list[str]:
    """SmolLM3Config: no_rope_layers, layer_types (any layers) with one window, attention_bias
    for q/k/v/o, mlp_bias."""
    return failing(
        [
            (cfg.qk_norm, "QK-norm"),
            (cfg.is_moe, "experts"),
            (cfg.qkv_bias != cfg.o_bias, "q/k/v and o biases differ"),
        ]
    )


def _has_nope_blocks(cfg: ModelFields) -> bool:
    """Attention blocks that skip RoPE (a Gated DeltaNet block has no RoPE to skip; a model
    without RoPE, the 2017 one, has none)."""
    return cfg.pos_encoding == "rope" and any(
        not rope and not linear for rope, linear in zip(cfg.rope_layer_flags, cfg.linear_layer_flags)
    )


FEATURES = (Feature("nope_blocks", "NoPE blocks", _has_nope_blocks),)


def notes(cfg: ModelFields, counts: Counts) -> list[Note]:
    rotated, attending = sum(cfg.rope_layer_flags), cfg.full_attention_layers
    if cfg.pos_encoding != "rope" or rotated >= attending:
        return []
    nope = attending - rotated
    return [
        Note(
            "positions",
            f"**NoPE blocks** (SmolLM3, Llama 4): {nope} of "
            f"{plural(attending, 'attention block')} {'attends' if nope == 1 else 'attend'} "
            f"without RoPE (no position signal but the causal mask); the other {rotated} "
            f"{'rotates' if rotated == 1 else 'rotate'}.",
        )
    ]


PRESETS: dict[str, dict[str, Any]] = {
    # HuggingFaceTB/SmolLM3-3B config.json (tests/families/published_configs/smollm3-3b.json): every fourth
    # block without RoPE (no_rope_layers), 16 heads of 128 on 4 KV heads, a tied head, RoPE θ 5e6.
    # SmolLM3ForCausalLM on the meta device: 3,075,098,624, the Hub's safetensors total
    "smollm3-3b": dict(
        vocab_size=128256,
        d_model=2048,
        n_layers=36,
        n_heads=16,
        n_kv_heads=4,
        ffn_hidden=11008,
        max_seq_len=65536,
        tie_embeddings=True,
        nope_layers=",".join(str(i) for i in range(3, 36, 4)),
        rope_theta=5e6,
        norm_eps=1e-6,
    ),
}

PUBLISHED = {"smollm3-3b": Exact(3_075_098_624)}  # the Hub's safetensors total

FAMILY = Family(
    "SmolLM3",
    (SMOLLM3,),
    read=read,
    write=write,
    lacks=lacks,
    notes=notes,
    features=FEATURES,
    presets=PRESETS,
    published=PUBLISHED,
)
