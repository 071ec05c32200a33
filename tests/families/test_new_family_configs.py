"""OLMo 2's, SmolLM3's, Phi-3's (Phi-4-mini's) and GLM-4.5's config.json read and written as
transformers 5 reads them (Olmo2Config / Olmo2ForCausalLM, SmolLM3Config / SmolLM3ForCausalLM,
Phi3Config / Phi3ForCausalLM, Glm4MoeConfig / Glm4MoeForCausalLM): the published
OLMo-2-1124-7B, SmolLM3-3B, Phi-4-mini-instruct, Phi-3-mini-4k-instruct and GLM-4.5-Air files
read as the presets, with notes for what their model never reads; the fields and the defaults
equal AutoConfig.for_model's; transformers' own meta-device count of each published file equal
to the recorded count; refusals by name; the export read back by transformers as the same model,
and the family written the one that expresses the config. (LLaMA Lab's own counts, logits,
cached decoding and FLOPs against transformers: test_families.)"""

import copy
import json
import warnings

import pytest
import torch
from hf_helpers import meta_count, same_scaling, scaling_of, theirs
from hf_helpers import published as published_file

from llama_lab import analysis
from llama_lab.config import (
    PRESETS,
    PUBLISHED_PARAMS,
    PUBLISHED_ROUNDED,
    ConfigError,
    ModelConfig,
    read_hf_config,
)
from llama_lab.config.families import MODEL_TYPES as FAMILIES
from llama_lab.config.families import family_of
from llama_lab.config.hf.keys import KEY_TABLE
from llama_lab.model import build_model

transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore", module="transformers")
transformers.logging.set_verbosity_error()

FILES = {
    "olmo-2-7b": "olmo-2-1124-7b",
    "smollm3-3b": "smollm3-3b",
    "phi-4-mini": "phi-4-mini-instruct",
    "phi-3-mini-4k": "phi-3-mini-4k-instruct",
    "glm-4.5-air": "glm-4.5-air",
    "olmo-3-7b": "olmo-3-7b",
    "olmo-3-32b": "olmo-3-32b",
    "granite-3.1-8b": "granite-3.1-8b-instruct",
    "granite-3.0-2b": "granite-3.0-2b-instruct",
}
NAMES = list(FILES)
MODEL_TYPE = {
    "olmo-2-7b": "olmo2",
    "smollm3-3b": "smollm3",
    "phi-4-mini": "phi3",
    "phi-3-mini-4k": "phi3",
    "glm-4.5-air": "glm4_moe",
    "olmo-3-7b": "olmo3",
    "olmo-3-32b": "olmo3",
    "granite-3.1-8b": "granite",
    "granite-3.0-2b": "granite",
}
# transformers' CausalLM of each published file on the meta device (GLM-4.5-Air: its MTP layer is
# no part of Glm4MoeForCausalLM); the four dense ones are the Hub's safetensors totals
TRANSFORMERS_PARAMS = {
    "olmo-2-7b": 7_298_617_344,
    "smollm3-3b": 3_075_098_624,
    "phi-4-mini": 3_836_021_760,
    "phi-3-mini-4k": 3_821_079_552,
    "glm-4.5-air": 106_852_245_504,
    "olmo-3-7b": 7_298_011_136,
    "olmo-3-32b": 32_233_522_176,
    "granite-3.1-8b": 8_170_848_256,
    "granite-3.0-2b": 2_533_531_648,
}
TINY = dict(
    vocab_size=128,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=2,
)
GLM = dict(
    n_routed_experts=4,
    num_experts_per_tok=2,
    moe_intermediate_size=24,
    n_shared_experts=1,
    first_k_dense_replace=1,
    head_dim=16,
)


def published(name: str) -> dict:
    """The published config.json of preset ``name``."""
    return published_file(FILES[name])


def same_fields(cfg: ModelConfig, hf) -> None:
    """What LLaMA Lab read equals what transformers' config holds, as its model reads it."""
    mt = hf.model_type
    head_dim = getattr(hf, "head_dim", hf.hidden_size // hf.num_attention_heads)
    assert (cfg.n_layers, cfg.d_model, cfg.vocab_size, cfg.ffn_hidden) == (
        hf.num_hidden_layers,
        hf.hidden_size,
        hf.vocab_size,
        hf.intermediate_size,
    )
    assert (cfg.n_heads, cfg.n_kv_heads, cfg.head_dim) == (
        hf.num_attention_heads,
        hf.num_key_value_heads,
        head_dim,
    )
    assert (cfg.norm_eps, cfg.max_seq_len, cfg.tie_embeddings) == (
        hf.rms_norm_eps,
        hf.max_position_embeddings,
        hf.tie_word_embeddings,
    )
    rope = hf.rope_parameters  # one base, or (Olmo 3) one per layer type
    if "rope_theta" in rope:
        assert cfg.rope_theta == rope["rope_theta"]
    else:
        assert (cfg.rope_theta, cfg.rope_local_theta) == (
            rope["full_attention"]["rope_theta"],
            rope["sliding_attention"]["rope_theta"],
        )
    # Phi3RotaryEmbedding / Glm4MoeRotaryEmbedding: int(head_dim × the factor) rotated
    factor = hf.rope_parameters.get("partial_rotary_factor", 1.0) if mt in ("phi3", "glm4_moe") else 1.0
    assert cfg.rope_dim == int(head_dim * factor)
    assert (cfg.norm_position, cfg.qk_norm_scope) == (
        ("output", "projection") if mt in ("olmo2", "olmo3") else ("pre", "head")
    )
    assert cfg.fused_keys == (mt == "phi3")
    rope = (
        [bool(hf.no_rope_layers[i]) for i in range(cfg.n_layers)]
        if mt == "smollm3"
        else [True] * cfg.n_layers
    )
    assert list(cfg.rope_layer_flags) == rope
    if mt in ("smollm3", "olmo3"):
        local = [kind == "sliding_attention" for kind in hf.layer_types]
    elif mt == "phi3":
        local = [hf.sliding_window is not None] * cfg.n_layers
    else:
        local = [False] * cfg.n_layers
    assert list(cfg.local_layer_flags) == local
    if any(local):
        assert cfg.sliding_window == hf.sliding_window
    attention = getattr(hf, "attention_bias", False) if mt != "phi3" else False
    assert cfg.qkv_bias == attention and cfg.o_bias == (attention and mt != "glm4_moe")
    assert cfg.mlp_bias == (hf.mlp_bias if mt in ("smollm3", "granite") else False)
    multipliers = ("embedding_multiplier", "residual_multiplier", "attention_multiplier", "logits_scaling")
    granite = [getattr(hf, name) for name in multipliers] if mt == "granite" else [1, 1, head_dim**-0.5, 1]
    assert [getattr(cfg, name) for name in multipliers] == granite
    assert cfg.qk_norm == (mt in ("olmo2", "olmo3") or (mt == "glm4_moe" and hf.use_qk_norm))
    if mt == "glm4_moe":
        sparse = [i >= hf.first_k_dense_replace for i in range(cfg.n_layers)]
        assert list(cfg.moe_layer_flags) == sparse
        if any(sparse):
            assert (cfg.n_experts, cfg.experts_per_token, cfg.expert_ffn_hidden) == (
                hf.n_routed_experts,
                hf.num_experts_per_tok,
                hf.moe_intermediate_size,
            )
            assert (cfg.n_shared_experts, cfg.moe_groups, cfg.moe_topk_groups) == (
                hf.n_shared_experts,
                hf.n_group,
                hf.topk_group,
            )
            assert (cfg.routed_scaling, cfg.moe_renormalize) == (hf.routed_scaling_factor, hf.norm_topk_prob)
            assert cfg.moe_scoring == "sigmoid"
    else:
        assert not cfg.is_moe


def same_logits(cfg: ModelConfig, hf) -> None:
    """transformers' eager model and LLaMA Lab's, one state dict, the same logits."""
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(
        hf, attn_implementation="eager", experts_implementation="eager"
    ).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.2)
    ours = build_model(cfg).eval()
    ours.load_state_dict(model.state_dict(), strict=True)
    ids = torch.randint(0, cfg.vocab_size, (2, 20))
    with torch.no_grad():
        torch.testing.assert_close(ours(ids), model(ids).logits, rtol=1e-5, atol=1e-5)


# ---- the published files ------------------------------------------------------------------------
def test_the_published_files_are_read_as_the_presets_with_notes():
    version = KEY_TABLE["transformers"]
    expected = {
        "olmo-2-7b": [],
        "smollm3-3b": [
            "pretraining_tp=2 only changes how the training run sharded the matmuls; the maths is the same"
        ],
        "phi-3-mini-4k": [
            f"not read by phi3's model (Phi3ForCausalLM, transformers {version}): 'embd_pdrop'; ignored"
        ],
        "glm-4.5-air": [
            "num_nextn_predict_layers=1: the multi-token-prediction layer(s) are not part of "
            "Glm4MoeForCausalLM (its loader skips model.layers.46 / 92, the MTP layer of GLM-4.5-Air / "
            "GLM-4.5): not counted"
        ],
    }
    for name in NAMES:
        cfg, notes = read_hf_config(published(name))
        assert cfg == PRESETS[name] and family_of(cfg).model_type.name == MODEL_TYPE[name]
        if name in expected:
            assert notes == expected[name], name
    # Phi-4-mini: the keys Phi3ForCausalLM never reads (its projections have no biases at all);
    # its LongRoPE is read (the preset holds it), no longer a note
    cfg, notes = read_hf_config(published("phi-4-mini"))
    assert notes[0] == (
        f"not read by phi3's model (Phi3ForCausalLM, transformers {version}): 'attention_bias', "
        f"'embd_pdrop', 'full_attn_mod', 'interpolate_factor', 'lm_head_bias' and 1 more; ignored"
    )
    assert cfg.rope_scaling.rope_type == "longrope" and cfg.rope_scaling.long_factor[:2] == (1, 1.118320672)
    assert len(notes) == 1


@pytest.mark.parametrize("name", NAMES)
def test_the_fields_read_equal_what_transformers_reads(name):
    data = published(name)
    cfg, _ = read_hf_config(data)
    same_fields(cfg, theirs(data))


def test_what_sets_each_published_model_apart():
    olmo, smol, phi4, phi3, glm = (
        PRESETS[name] for name in ("olmo-2-7b", "smollm3-3b", "phi-4-mini", "phi-3-mini-4k", "glm-4.5-air")
    )
    assert (olmo.norm_position, olmo.qk_norm_scope, olmo.attention_kind) == ("output", "projection", "MHA")
    assert [i for i, rope in enumerate(smol.rope_layer_flags) if not rope] == list(range(3, 36, 4))
    assert (phi4.rope_dim, phi4.head_dim, phi4.sliding_window, phi4.tie_embeddings) == (96, 128, 262144, True)
    assert (phi3.rope_dim, phi3.head_dim, phi3.sliding_window) == (96, 96, 2047)
    assert phi4.fused_keys and phi3.fused_keys and not any(m.fused_keys for m in (olmo, smol, glm))
    assert (glm.rope_dim, glm.head_dim, glm.n_heads * glm.head_dim, glm.d_model) == (64, 128, 12288, 4096)
    assert (glm.qkv_bias, glm.o_bias, glm.qk_norm) == (True, False, False)
    assert [i for i, s in enumerate(glm.moe_layer_flags) if not s] == [0]


@pytest.mark.parametrize("name", NAMES)  # the meta device: a few seconds for all five
def test_transformers_meta_count_of_the_published_file(name):
    assert meta_count(theirs(published(name))) == TRANSFORMERS_PARAMS[name]
    assert analysis.count_params(PRESETS[name]).total == TRANSFORMERS_PARAMS[name]
    back = transformers.AutoConfig.for_model(**copy.deepcopy(PRESETS[name].to_hf_config()))
    assert meta_count(back) == TRANSFORMERS_PARAMS[name]
    if name in PUBLISHED_PARAMS:  # the Hub's safetensors totals, exact
        assert PUBLISHED_PARAMS[name] == TRANSFORMERS_PARAMS[name]


def test_glm_4_5_air_against_its_rounded_card():
    """ "106 billion total parameters and 12 billion active": the total truncated (106.85B), the
    active count without the embedding table and the head (12.18B; 13.42B with both). The
    Hub's own listing of the checkpoint is higher still: its MTP layer is stored beside it."""
    total, active, _ = PUBLISHED_ROUNDED["glm-4.5-air"]
    cfg = PRESETS["glm-4.5-air"]
    counts = analysis.count_params(cfg)
    assert int(counts.total / 1e9) == total / 1e9 == 106
    embedding = cfg.vocab_size * cfg.d_model
    assert counts.by_component["embedding"] == counts.by_component["lm_head"] == embedding
    assert int((counts.active - 2 * embedding) / 1e9) == active / 1e9 == 12
    assert round(counts.active / 1e9, 2) == 13.42
    # active: attention, norms, the dense block, and per sparse block the router, 8 of 128
    # experts and the shared one
    C, F, L = 4096, 1408, 46
    attention = C * (96 * 128 + 2 * 8 * 128) + (96 + 16) * 128 + 96 * 128 * C
    per_sparse_active = C * 128 + 9 * 3 * C * F
    assert counts.active == (
        L * (attention + 2 * C) + 3 * C * 10944 + 45 * per_sparse_active + 2 * embedding + C
    )


# ---- defaults, variants, what the model never reads ---------------------------------------------
@pytest.mark.parametrize("model_type", ["olmo2", "smollm3", "phi3", "glm4_moe"])
def test_a_missing_key_takes_the_config_classs_default(model_type):
    data = {"model_type": model_type, "hidden_size": 64, "num_attention_heads": 8, "intermediate_size": 96}
    data |= {"pad_token_id": None}  # (a class default beyond a small vocab: nn.Embedding refuses)
    cfg, _ = read_hf_config(data)
    hf = theirs(data)
    same_fields(cfg, hf)
    assert meta_count(transformers.AutoConfig.for_model(**cfg.to_hf_config())) == meta_count(hf)
    defaults = {
        "olmo2": (32, 8, 50304, 2048, 1e-5, 10000.0, False),  # KV heads: null, as many as heads
        "smollm3": (36, 4, 128256, 32768, 1e-6, 2e6, True),
        "phi3": (32, 8, 32064, 4096, 1e-5, 10000.0, False),
        "glm4_moe": (46, 8, 151552, 131072, 1e-5, 10000.0, False),
    }[model_type]
    got = (cfg.n_layers, cfg.n_kv_heads, cfg.vocab_size, cfg.max_seq_len, cfg.norm_eps, cfg.rope_theta)
    assert got + (cfg.tie_embeddings,) == defaults
    if model_type == "smollm3":  # no_rope_layer_interval 4
        assert [i for i, rope in enumerate(cfg.rope_layer_flags) if not rope] == list(range(3, 36, 4))
    if model_type == "glm4_moe":  # 0.5 of each head rotated; 128 experts of 1408 from block 1 on
        assert (cfg.partial_rotary_factor, cfg.n_experts, cfg.expert_ffn_hidden) == (0.5, 128, 1408)
        assert (cfg.moe_layers, cfg.experts_per_token, cfg.n_shared_experts) == ("from:1", 8, 1)


VARIANTS = [
    ("olmo2", {}),
    ("olmo2", {"attention_bias": True, "head_dim": 24}),
    ("olmo2", {"num_attention_heads": 6, "num_key_value_heads": 3}),  # 64 / 6: heads of 10
    ("smollm3", {}),
    ("smollm3", {"no_rope_layer_interval": 2}),
    ("smollm3", {"no_rope_layers": [0, 1, 1, 1, 0, 0]}),  # longer than the layers: the tail unread
    ("smollm3", {"use_sliding_window": True, "sliding_window": 5}),  # the NoPE block windowed
    ("smollm3", {"layer_types": ["sliding_attention", "full_attention"] * 2, "sliding_window": 6}),
    ("smollm3", {"attention_bias": True, "mlp_bias": True, "tie_word_embeddings": False}),
    ("phi3", {}),
    ("phi3", {"partial_rotary_factor": 0.75, "sliding_window": 7}),
    ("phi3", {"rope_parameters": {"rope_type": "default", "rope_theta": 5e4, "partial_rotary_factor": 0.5}}),
    # rope_parameters' own factor wins over the top-level one (setdefault)
    (
        "phi3",
        {"rope_parameters": {"rope_theta": 5e4, "partial_rotary_factor": 0.5}, "partial_rotary_factor": 0.25},
    ),
    # a legacy rope_scaling takes rope_parameters' place: its factor, else the top-level key
    (
        "phi3",
        {
            "rope_scaling": {"type": "longrope", "short_factor": [1.0] * 6, "long_factor": [2.0] * 6},
            "rope_parameters": {"rope_theta": 5e4, "partial_rotary_factor": 0.25},
            "partial_rotary_factor": 0.75,
            "rope_theta": 3e4,
        },
    ),
    ("phi3", {"head_dim": 32, "num_key_value_heads": 4}),
    ("glm4_moe", GLM),
    ("glm4_moe", {**GLM, "partial_rotary_factor": None}),  # never folded in: whole heads rotated
    ("glm4_moe", {**GLM, "rope_parameters": {"rope_theta": 1e6, "partial_rotary_factor": 0.25}}),
    ("glm4_moe", {**GLM, "use_qk_norm": True, "attention_bias": True, "n_group": 2, "topk_group": 1}),
    ("glm4_moe", {**GLM, "norm_topk_prob": False, "routed_scaling_factor": 2.5, "n_shared_experts": 2}),
    ("glm4_moe", {**GLM, "first_k_dense_replace": 4}),  # every block dense
    ("glm4_moe", {**GLM, "first_k_dense_replace": 0, "num_local_experts": 6, "n_routed_experts": None}),
]


@pytest.mark.parametrize("model_type,extra", VARIANTS)
def test_tiny_files_read_as_transformers_reads_them(model_type, extra):
    data = {**TINY, "model_type": model_type, **extra}
    if extra.get("n_routed_experts", 0) is None:  # the alias alone (null would be refused)
        data.pop("n_routed_experts")
    cfg, _ = read_hf_config(data)
    hf = theirs(data)
    same_fields(cfg, hf)
    assert analysis.count_params(cfg).total == meta_count(hf)
    assert meta_count(transformers.AutoConfig.for_model(**cfg.to_hf_config())) == meta_count(hf)


@pytest.mark.parametrize(
    "model_type,extra",
    [
        ("olmo2", {"num_attention_heads": 6, "num_key_value_heads": 3}),
        ("smollm3", {"layer_types": ["sliding_attention", "full_attention"] * 2, "sliding_window": 6}),
        ("glm4_moe", {**GLM, "partial_rotary_factor": None}),
        (
            "phi3",
            {
                "rope_scaling": {"type": "default"},
                "rope_parameters": {"rope_theta": 5e4, "partial_rotary_factor": 0.25},
                "partial_rotary_factor": 0.75,
            },
        ),
    ],
)
def test_the_readings_that_differ_from_the_obvious_give_transformers_logits(model_type, extra):
    """Heads of hidden // heads where that does not divide (10 on d 64), a window layer_types
    asks for without use_sliding_window, GLM's null factor (every dimension rotated) and Phi-3's
    rope_scaling that replaces rope_parameters (its factor then the top-level one)."""
    data = {**TINY, "model_type": model_type, **extra}
    cfg, _ = read_hf_config(data)
    if model_type == "olmo2":
        assert cfg.head_dim == 10 and cfg.n_heads * cfg.head_dim < cfg.d_model
    if model_type == "glm4_moe":
        assert cfg.rope_dim == cfg.head_dim
    if model_type == "phi3":
        assert cfg.rope_dim == 12  # 0.75 of 16, the top-level key
    same_logits(cfg, theirs(data))


def test_notes_on_keys_read_and_ignored():
    base = {**TINY, "model_type": "smollm3"}
    _, notes = read_hf_config({**base, "no_rope_layers": [1, 0, 1, 1], "no_rope_layer_interval": 4})
    assert notes == [
        "no_rope_layer_interval=4 is not used: no_rope_layers names each layer (SmolLM3Config "
        "derives it from the interval only when it is absent)"
    ]
    # the published file carries both, in agreement: no note
    assert read_hf_config({**base, "no_rope_layers": [1, 1, 1, 0], "no_rope_layer_interval": 4})[1] == []
    _, notes = read_hf_config({**base, "no_rope_layers": [1, 1, 1, 0, 0]})
    assert notes == [
        "no_rope_layers has 5 entries for 4 layers: the entries after the last layer are never read; ignored"
    ]
    _, notes = read_hf_config({**base, "layer_types": ["sliding_attention"] * 4, "sliding_window": 3})
    assert "still gives them the sliding-window mask" in notes[0]
    data = {
        **TINY,
        "model_type": "phi3",
        "rope_scaling": {"type": "su", "short_factor": [1] * 8, "long_factor": [1] * 8},
    }
    cfg, notes = read_hf_config({**data, "rope_parameters": {"rope_theta": 5.0}, "resid_pdrop": 0.1})
    text = " | ".join(notes)
    assert (
        'rope_parameters={"rope_theta": 5.0} is not used: Phi3Config takes rope_scaling in its place' in text
    )
    assert "resid_pdrop=0.1 is training-time noise, not modelled (no dropout)" in text
    # Phi-3's legacy "su" is LongRoPE, read (not noted)
    assert cfg.rope_scaling.rope_type == "longrope" and cfg.rope_scaling.long_factor == (1.0,) * 8
    assert len(notes) == 2  # rope_parameters unused, resid_pdrop: no note on the scaling
    # Phi3 keeps no bias anywhere: attention_bias is a key Phi3ForCausalLM never reads
    cfg, notes = read_hf_config({**TINY, "model_type": "phi3", "attention_bias": True})
    assert not (cfg.qkv_bias or cfg.o_bias) and "'attention_bias'" in notes[0]
    # GLM: the MTP count nothing in Glm4MoeForCausalLM reads, null or 0: no note
    for mtp in (None, 0):
        assert (
            read_hf_config({**TINY, **GLM, "model_type": "glm4_moe", "num_nextn_predict_layers": mtp})[1]
            == []
        )


@pytest.mark.parametrize(
    "model_type,extra,field,match",
    [
        (
            "phi3",
            {"rope_scaling": {"type": "linear", "factor": 2.0}},
            "rope_scaling",
            "Phi3Config takes only 'default' or 'longrope'",
        ),
        (
            "phi3",
            {"partial_rotary_factor": 0.5, "rope_scaling": {"type": "longrope", "short_factor": [1.0] * 8}},
            "rope_scaling",
            r"rope_scaling\['short_factor'\] must be a list of 4 numbers",
        ),
        ("phi3", {"partial_rotary_factor": None}, "partial_rotary_factor", "partial_rotary_factor is null"),
        ("phi3", {"partial_rotary_factor": 1.5}, "partial_rotary_factor", r"must be a number in \(0, 1\]"),
        (
            "phi3",
            {"rope_parameters": {"partial_rotary_factor": 0}},
            "partial_rotary_factor",
            r"rope_parameters\['partial_rotary_factor'\]=0",
        ),
        ("phi3", {"partial_rotary_factor": 0.2}, "partial_rotary_factor", "rotates 3 of head_dim=16"),
        (
            "glm4_moe",
            {**GLM, "rope_parameters": {"partial_rotary_factor": None}},
            "partial_rotary_factor",
            "must be a number",
        ),
        (
            "smollm3",
            {"no_rope_layers": [1, 0]},
            "no_rope_layers",
            "no_rope_layers has 2 entries for 4 layers",
        ),
        ("smollm3", {"no_rope_layers": [1, 0, True, 1]}, "no_rope_layers", "must be a list of block indices"),
        ("smollm3", {"no_rope_layer_interval": 0}, "no_rope_layer_interval", "no_rope_layer_interval"),
        ("smollm3", {"layer_types": ["sliding_attention"] * 4}, "sliding_window", "sliding_window is null"),
        ("smollm3", {"layer_types": ["full_attention"] * 3}, "layer_types", "for each of the 4 layers"),
        ("glm4_moe", {**GLM, "n_routed_experts": 0}, "n_routed_experts", "cannot route over no experts"),
        (
            "glm4_moe",
            {**GLM, "n_group": 4, "topk_group": 2},
            "moe_groups",
            "ranks a group by its two best experts",
        ),
        ("olmo2", {"head_dim": None}, "head_dim", "olmo2's attention reads head_dim whenever"),
        (
            "glm4_moe",
            {**GLM, "num_local_experts": None},
            "num_local_experts",
            "cannot be built for no expert count",
        ),
        (
            "glm4_moe",
            {**GLM, "num_key_value_heads": None},
            "num_key_value_heads",
            "null is not a value Glm4MoeConfig",
        ),
        ("glm4_moe", {**GLM, "use_qk_norm": "yes"}, "use_qk_norm", "use_qk_norm='yes' must be true or false"),
        ("phi3", {"hidden_act": "gelu"}, "hidden_act", "hidden_act='gelu' is not modelled"),
    ],
)
def test_a_bad_file_is_refused_by_name(model_type, extra, field, match):
    with pytest.raises(ConfigError, match=match) as info:
        read_hf_config({**TINY, "model_type": model_type, **extra})
    assert info.value.field == field


@pytest.mark.parametrize(
    "model_type,extra",
    [
        ("phi3", {"rope_scaling": {"type": "linear", "factor": 2.0}}),
        ("phi3", {"partial_rotary_factor": None}),
        ("smollm3", {"no_rope_layers": [1, 0]}),
        ("smollm3", {"no_rope_layer_interval": 0}),
        ("smollm3", {"layer_types": ["full_attention"] * 3}),
    ],
)
def test_transformers_refuses_those_files_too(model_type, extra):
    with pytest.raises(Exception):  # noqa: B017 - each class raises its own error
        meta_count(theirs({**TINY, "model_type": model_type, **extra}))


# ---- writing one --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_the_presets_export_round_trips_without_a_note(name):
    cfg = PRESETS[name]
    exported = cfg.to_hf_config()
    assert exported["model_type"] == MODEL_TYPE[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ModelConfig.from_hf_config(exported) == cfg
    back = transformers.AutoConfig.for_model(**json.loads(json.dumps(exported)))
    same_fields(cfg, back)
    assert read_hf_config(back.to_dict())[0] == cfg


_LLAMA = read_hf_config({**TINY, "model_type": "llama"})[0]


@pytest.mark.parametrize(
    "changes,model_type",
    [
        ({"nope_layers": "1,3"}, "smollm3"),
        ({"nope_layers": "0,2", "sliding_window": 5, "local_layers": "0"}, "smollm3"),
        ({"fused_keys": True}, "phi3"),
        ({"fused_keys": True, "partial_rotary_factor": 0.5, "sliding_window": 6}, "phi3"),
        ({"partial_rotary_factor": 0.5}, "glm4_moe"),  # dense, separate projections
        ({"partial_rotary_factor": 0.75, "qkv_bias": True, "o_bias": False, "qk_norm": True}, "glm4_moe"),
        ({"norm_position": "output", "qk_norm": True, "qk_norm_scope": "projection"}, "olmo2"),
        # an OLMo 2 block with a window: Olmo 3 (OLMo 2 refuses it)
        (
            {"norm_position": "output", "qk_norm": True, "qk_norm_scope": "projection", "sliding_window": 8},
            "olmo3",
        ),
        (
            {
                "norm_position": "output",
                "qk_norm": True,
                "qk_norm_scope": "projection",
                "qkv_bias": True,
                "o_bias": True,
            },
            "olmo2",
        ),
        (
            {
                "n_experts": 4,
                "experts_per_token": 2,
                "expert_ffn_hidden": 24,
                "n_shared_experts": 1,
                "moe_layers": "from:2",
                "moe_scoring": "sigmoid",
                "moe_groups": 2,
                "moe_topk_groups": 1,
                "routed_scaling": 2.0,
            },
            "glm4_moe",  # no MLA: of the DeepSeekMoE routers only GLM-4.5 takes it
        ),
    ],
)
def test_the_family_written_is_the_one_that_expresses_the_config(changes, model_type):
    cfg = _LLAMA.replace(**changes)
    assert family_of(cfg).model_type.name == model_type
    exported = cfg.to_hf_config()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ModelConfig.from_hf_config(exported) == cfg
    back = transformers.AutoConfig.for_model(**json.loads(json.dumps(exported)))
    same_fields(cfg, back)
    assert read_hf_config(back.to_dict())[0] == cfg
    assert meta_count(back) == analysis.count_params(cfg).total


@pytest.mark.parametrize(
    "changes,reasons",
    [
        (
            {"fused_keys": True, "qkv_bias": True},
            ["phi3 (biases)", "glm4_moe (fused qkv_proj / gate_up_proj keys)"],
        ),
        (
            {"nope_layers": "1", "partial_rotary_factor": 0.5},
            ["smollm3 (partial RoPE)", "glm4_moe (NoPE blocks)"],
        ),
        (
            {"partial_rotary_factor": 0.5, "o_bias": True},
            ["glm4_moe (an o_proj bias)", "separate q/k/v and gate/up keys"],
        ),
        ({"partial_rotary_factor": 0.5, "sliding_window": 6}, ["glm4_moe (a sliding window)"]),
        (
            {"qk_norm": True, "qk_norm_scope": "projection"},
            ["qwen3 (QK-norm over the whole projection)", "olmo2 (not OLMo 2's block"],
        ),
        (
            {"norm_position": "output", "qk_norm": True, "qk_norm_scope": "projection", "mlp_bias": True},
            ["olmo2 (MLP biases)", "olmo3 (MLP biases)", "llama (not a LLaMA block"],
        ),
        ({"norm_position": "output"}, ["olmo2 (no QK-norm over the projections)"]),
    ],
)
def test_a_config_no_family_expresses_is_refused_naming_the_rule(changes, reasons):
    with pytest.raises(ConfigError, match="no supported family expresses this config") as info:
        _LLAMA.replace(**changes).to_hf_config()
    text = str(info.value)
    for reason in reasons:
        assert reason in text
    for model_type in FAMILIES:
        assert f"{model_type} (" in text


_YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}


@pytest.mark.parametrize(
    "rope",
    [
        {},
        {"rope_theta": 1234.0},  # the full-attention layers' only: Olmo3Config pops it once
        {"rope_theta": 1234.0, "rope_scaling": _YARN},  # YaRN merged into full_attention
        {"rope_scaling": _YARN},
        {
            "rope_parameters": {
                "full_attention": {"rope_type": "default", "rope_theta": 7.0},
                "sliding_attention": {"rope_type": "default", "rope_theta": 9.0},
            }
        },
        {"rope_parameters": {"full_attention": {"rope_type": "default"}}, "rope_theta": 777.0},
        {"rope_parameters": {"rope_type": "yarn", "factor": 2.0, "rope_theta": 55.0}, "rope_theta": 66.0},
        {"layer_types": ["full_attention"] * 4, "rope_theta": 1234.0},
    ],
)
def test_olmo3_rope_bases_are_what_its_config_class_builds(rope):
    data = {**TINY, "model_type": "olmo3", **rope}
    theirs = transformers.AutoConfig.for_model(**data).rope_parameters
    cfg, notes = read_hf_config(data)
    assert (cfg.rope_theta, cfg.rope_local_theta) == (
        theirs["full_attention"]["rope_theta"],
        theirs["sliding_attention"]["rope_theta"],
    )
    # the full-attention layers' scaling read as the class builds it, the sliding ones plain
    same_scaling(cfg, theirs["full_attention"])
    assert scaling_of(theirs["sliding_attention"]) is None
    assert cfg.rope_scaling is None or not cfg.rope_scaling_local
    assert not any("not modelled: positions use plain RoPE" in note for note in notes)


def test_a_granite_file_without_a_multiplier_takes_its_config_classs_one():
    # GraniteConfig's default attention_multiplier is 1.0: the scores are not scaled at all
    cfg, _ = read_hf_config({**TINY, "model_type": "granite"})
    assert (cfg.attention_multiplier, cfg.embedding_multiplier, cfg.residual_multiplier) == (1.0, 1.0, 1.0)
    assert cfg.has_granite_multipliers and family_of(cfg).model_type.name == "granite"
    # the same block at the plain scale is a LLaMA
    assert family_of(cfg.replace(attention_multiplier=None)).model_type.name == "llama"
