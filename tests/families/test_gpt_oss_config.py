"""gpt-oss's config.json read and written as transformers 5 reads it (GptOssConfig,
GptOssForCausalLM): the published gpt-oss-20b and -120b files read as the presets, with notes
for what their model never reads; the fields and the defaults equal AutoConfig.for_model's; the
export read back by transformers as the same model; MXFP4 as the stored format; refusals by
name. The live module against transformers: tests/families/test_gpt_oss_model.py."""

import json
import warnings

import pytest
import torch
from hf_helpers import meta_count, published, same_scaling, theirs

from llama_lab import analysis
from llama_lab.config import PRESETS, PUBLISHED_ROUNDED, ConfigError, ModelConfig, read_hf_config
from llama_lab.config.families import MODEL_TYPES as FAMILIES
from llama_lab.config.families import family_of
from llama_lab.config.hf.quant import stored_quant

transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore", module="transformers")

NAMES = ["gpt-oss-20b", "gpt-oss-120b"]
# GptOssForCausalLM on the meta device for each published file (its quantization_config left out)
TRANSFORMERS_PARAMS = {"gpt-oss-20b": 20_914_757_184, "gpt-oss-120b": 116_829_156_672}
TINY = dict(
    model_type="gpt_oss",
    vocab_size=128,
    hidden_size=64,
    intermediate_size=48,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    num_local_experts=4,
    num_experts_per_tok=2,
    sliding_window=8,
    max_position_embeddings=64,
)


def same_fields(cfg: ModelConfig, hf) -> None:
    """What LLaMA Lab read equals what transformers' config holds."""
    local = tuple(kind == "sliding_attention" for kind in hf.layer_types)
    assert cfg.local_layer_flags == local
    if any(local):
        assert cfg.sliding_window == hf.sliding_window
    assert (cfg.n_layers, cfg.d_model, cfg.vocab_size) == (
        hf.num_hidden_layers,
        hf.hidden_size,
        hf.vocab_size,
    )
    assert (cfg.n_heads, cfg.n_kv_heads, cfg.head_dim) == (
        hf.num_attention_heads,
        hf.num_key_value_heads,
        hf.head_dim,
    )
    assert (cfg.n_experts, cfg.experts_per_token) == (hf.num_local_experts, hf.num_experts_per_tok)
    assert cfg.ffn_hidden == cfg.expert_ffn_hidden == hf.intermediate_size
    assert all(cfg.moe_layer_flags) and cfg.moe_style == "gpt_oss" and cfg.attention_sinks
    assert cfg.qkv_bias == cfg.o_bias == hf.attention_bias and cfg.mlp_bias
    assert (cfg.swiglu_limit, cfg.swiglu_alpha) == (hf.swiglu_limit, hf.swiglu_alpha)
    assert cfg.rope_theta == hf.rope_parameters["rope_theta"]
    assert (cfg.norm_eps, cfg.max_seq_len) == (hf.rms_norm_eps, hf.max_position_embeddings)
    assert cfg.tie_embeddings == hf.tie_word_embeddings
    same_scaling(cfg, hf.rope_parameters)


# ---- the published files ------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_the_published_file_is_read_as_the_preset_with_notes(name):
    cfg, notes = read_hf_config(published(name))
    assert cfg == PRESETS[name]
    assert family_of(cfg).model_type.name == "gpt_oss"
    text = " | ".join(notes)
    assert notes[0].startswith("quantization_config: MXFP4 expert weights")
    assert "one e8m0 scale per 32 values: 4.25 bits a weight" in notes[0]
    # keys GptOssForCausalLM never reads (the experts do not use hidden_act): noted, not refused
    assert "not read by gpt_oss's model (GptOssForCausalLM" in text
    for key in ("'experts_per_token'", "'initial_context_length'", "'hidden_act'"):
        assert key in text
    # its YaRN is read (as GptOssConfig builds it: test_the_fields_read_equal_…), not noted
    assert cfg.rope_scaling.rope_type == "yarn" and "rope_scaling" not in text


@pytest.mark.parametrize("name", NAMES)
def test_the_fields_read_equal_what_transformers_reads(name):
    data = published(name)
    cfg, _ = read_hf_config(data)
    same_fields(cfg, theirs(data))
    layers = data["num_hidden_layers"]
    assert cfg.local_layers == ",".join(map(str, range(0, layers, 2)))  # sliding on even layers
    assert (cfg.sliding_window, cfg.head_dim, cfg.n_kv_heads) == (128, 64, 8)


@pytest.mark.parametrize("name", NAMES)
def test_the_presets_count_what_transformers_builds_and_the_model_card_says(name):
    cfg = PRESETS[name]
    counts = analysis.count_params(cfg)
    assert counts.total == TRANSFORMERS_PARAMS[name]  # presets.py's comment, held here
    total, active, _ = PUBLISHED_ROUNDED[name]
    # the model card's Table 1, to its two decimals; its active count takes the unembedding
    # and not the embedding
    assert round(counts.total / 1e9, 2) == total / 1e9
    assert round((counts.active - counts.by_component["embedding"]) / 1e9, 2) == active / 1e9


@pytest.mark.parametrize("name", NAMES)  # the meta device: about a second for both
def test_transformers_meta_module_of_the_published_file_has_the_presets_count(name):
    assert meta_count(theirs(published(name))) == TRANSFORMERS_PARAMS[name]
    back = transformers.AutoConfig.for_model(**PRESETS[name].to_hf_config())
    assert meta_count(back) == TRANSFORMERS_PARAMS[name]


# ---- defaults, aliases, what the model never reads ---------------------------------------------
def test_a_missing_key_takes_gpt_oss_configs_default():
    data = {
        "model_type": "gpt_oss",
        "vocab_size": 128,
        "hidden_size": 64,
        "intermediate_size": 48,
        "num_hidden_layers": 5,
        "num_attention_heads": 16,
    }
    cfg, notes = read_hf_config(data)
    hf = theirs(data)
    same_fields(cfg, hf)
    # no layer_types: sliding on even layers; GptOssConfig's KV heads, head_dim and experts
    assert cfg.local_layers == "0,2,4" and cfg.sliding_window == 128
    assert (cfg.n_kv_heads, cfg.head_dim, cfg.n_experts, cfg.experts_per_token) == (8, 64, 128, 4)
    assert (cfg.rope_theta, cfg.norm_eps, cfg.tie_embeddings) == (150000.0, 1e-5, False)
    # no rope_parameters: the class's default is YaRN, read as the class builds it (same_fields)
    assert hf.rope_parameters["rope_type"] == "yarn" == cfg.rope_scaling.rope_type
    assert not any("rope" in n for n in notes)
    assert analysis.count_params(cfg).total == meta_count(hf)


def test_null_kv_heads_and_head_dim_are_refused_as_gpt_oss_config_refuses_them():
    # GptOssConfig's __post_init__ would derive both, but transformers 5's strict int refuses
    # the null first: so does LLaMA Lab
    for key in ("num_key_value_heads", "head_dim"):
        with pytest.raises(Exception):  # noqa: B017 - transformers' strict dataclass error
            theirs({**TINY, key: None})
        with pytest.raises(ConfigError, match=f"^{key} is null; a number is required") as info:
            read_hf_config({**TINY, key: None})
        assert info.value.field == key


def test_null_layer_types_is_the_default_and_the_alias_names_the_experts():
    cfg, _ = read_hf_config({**TINY, "layer_types": None})
    assert cfg.local_layers == "0,2"
    data = {k: v for k, v in TINY.items() if k != "num_local_experts"} | {"num_experts": 3}
    cfg, _ = read_hf_config(data)
    assert cfg.n_experts == 3 == theirs(data).num_local_experts


def test_hidden_act_is_never_read_by_gpt_oss_so_it_is_a_note():
    cfg, notes = read_hf_config({**TINY, "hidden_act": "gelu"})
    assert cfg == read_hf_config(TINY)[0]
    assert any("not read by gpt_oss's model" in n and "'hidden_act'" in n for n in notes)
    with pytest.raises(ConfigError, match="hidden_act=5 must be a string"):
        read_hf_config({**TINY, "hidden_act": 5})


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"layer_types": ["full_attention", "sliding_attention", "sliding_attention"]},
        {"layer_types": ["sliding_attention"] * 3},
        {"layer_types": ["full_attention"] * 3},
        {"attention_bias": False, "swiglu_limit": 0.5, "swiglu_alpha": 2.0, "tie_word_embeddings": True},
    ],
    ids=["default", "mixed", "all-sliding", "all-full", "no-bias"],
)
def test_tiny_files_count_what_transformers_builds(extra):
    data = {**TINY, **extra}
    cfg, _ = read_hf_config(data)
    hf = theirs(data)
    same_fields(cfg, hf)
    assert analysis.count_params(cfg).total == meta_count(hf)
    if extra.get("layer_types") == ["full_attention"] * 3:
        assert (cfg.sliding_window, cfg.local_layers) == (0, "all")  # no window anywhere


# ---- writing one --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"layer_types": ["full_attention"] * 3},
        {"layer_types": ["sliding_attention"] * 3},
        {"attention_bias": False, "swiglu_limit": 0.5, "swiglu_alpha": 2.0},
    ],
    ids=["default", "all-full", "all-sliding", "no-bias"],
)
def test_the_export_is_read_back_by_transformers_as_the_same_model(extra):
    cfg, _ = read_hf_config({**TINY, **extra})
    exported = cfg.to_hf_config()
    assert exported["model_type"] == "gpt_oss" and "hidden_act" not in exported
    back = transformers.AutoConfig.for_model(**json.loads(json.dumps(exported)))
    # the class's default YaRN, read into the config and written out (same_fields compares it)
    assert back.rope_parameters["rope_type"] == "yarn"
    same_fields(cfg, back)
    again, notes = read_hf_config(back.to_dict())
    assert again == cfg
    assert analysis.count_params(cfg).total == meta_count(back)


@pytest.mark.parametrize("name", NAMES)
def test_the_presets_export_round_trips_without_a_note(name):
    cfg = PRESETS[name]
    exported = cfg.to_hf_config()
    assert exported["layer_types"] == published(name)["layer_types"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ModelConfig.from_hf_config(exported) == cfg
    same_fields(cfg, transformers.AutoConfig.for_model(**exported))


_GPT_OSS = read_hf_config(TINY)[0]


@pytest.mark.parametrize(
    "changes,reason",
    [
        ({"attention_sinks": False}, "gpt_oss (no attention sinks"),
        ({"o_bias": False}, "q/k/v and o biases differ"),
        ({"mlp_bias": False}, "no MLP biases (gpt-oss's experts have them)"),
        ({"moe_layers": "0,2"}, "dense layers (gpt-oss's are all sparse)"),
        ({"expert_ffn_hidden": 32}, "an expert width apart from ffn_hidden"),
        ({"qk_norm": True}, "QK-norm"),
        ({"moe_style": "standard", "swiglu_limit": 7.0, "swiglu_alpha": 1.702}, "no gpt-oss experts"),
    ],
)
def test_a_config_gpt_oss_cannot_express_is_refused_naming_the_rule(changes, reason):
    cfg = _GPT_OSS.replace(**changes)
    with pytest.raises(ConfigError, match="no supported family expresses this config") as info:
        cfg.to_hf_config()
    assert reason in str(info.value)


def test_sinks_without_gpt_oss_experts_have_no_family():
    # attention sinks on a Mixtral-style model: every other family lacks sinks, gpt_oss its experts
    cfg = PRESETS["mixtral-8x7b"].replace(attention_sinks=True)
    with pytest.raises(ConfigError) as info:
        cfg.to_hf_config()
    text = str(info.value)
    assert "mixtral (attention sinks)" in text
    assert "gpt_oss (no gpt-oss experts (moe_style='gpt_oss')" in text
    for model_type in FAMILIES:
        assert f"{model_type} (" in text


# ---- MXFP4 --------------------------------------------------------------------------------------
def test_mxfp4_is_the_stored_format_of_the_published_files():
    data = published("gpt-oss-120b")
    stored = stored_quant(data)
    assert (stored.method, stored.bits, stored.group_size, stored.zero_point, stored.dtype) == (
        "mxfp4",
        4,
        32,
        False,
        "bf16",
    )
    assert stored.not_converted == tuple(data["quantization_config"]["modules_to_not_convert"])
    assert stored.block_rows == 0
    assert stored_quant({**data, "torch_dtype": "float16"}).dtype == "fp16"
    weights = analysis.quant.stored_weights(stored)
    assert (weights.dtype, weights.group_size, weights.scale_dtype) == ("mxfp4", 32, "e8m0")


def test_transformers_mxfp4_layout_is_one_uint8_scale_per_32_values():
    """*_blocks hold 16 bytes (32 e2m1 values) per *_scales byte: transformers' own unpacking."""
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors

    experts, rows, groups = 2, 3, 5
    blocks = torch.zeros(experts, rows, groups, 16, dtype=torch.uint8)
    scales = torch.full((experts, rows, groups), 127, dtype=torch.uint8)  # e8m0: 2^0
    weights = convert_moe_packed_tensors(blocks, scales)
    assert weights.shape == (experts, groups * 32, rows)


@pytest.mark.parametrize(
    "qc,match",
    [
        ({"quant_method": "gptq", "bits": 4}, "quant_method='gptq' is not modelled yet"),
        ({"quant_method": "bitsandbytes"}, "quant_method='bitsandbytes' is not modelled yet"),
        (
            {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.mlp.experts"]},
            "MXFP4 converts every layer's experts and nothing else",
        ),
        (
            {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.3.mlp"]},
            "keeps 'model.layers.3.mlp' unquantised",
        ),
        ({"quant_method": "mxfp4", "modules_to_not_convert": "lm_head"}, "must be a list of module names"),
    ],
)
def test_a_gpt_oss_quantisation_not_modelled_is_refused_by_name(qc, match):
    with pytest.raises(ConfigError, match=match) as info:
        read_hf_config({**TINY, "quantization_config": qc})
    assert info.value.field == "quantization_config"


def test_mxfp4_on_another_family_is_refused_naming_it():
    data = {**PRESETS["mixtral-8x7b"].to_hf_config(), "quantization_config": {"quant_method": "mxfp4"}}
    with pytest.raises(ConfigError, match="mxfp4' is not modelled yet for model_type='mixtral'"):
        read_hf_config(data)


# ---- refusals by name ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "extra,field,match",
    [
        ({"layer_types": ["sliding_attention", "full_attention"]}, "layer_types", "each of the 3 layers"),
        (
            {"layer_types": ["sliding_attention", "full_attention", "chunked_attention"]},
            "layer_types",
            "must name 'full_attention' or 'sliding_attention'",
        ),
        ({"layer_types": "sliding_attention"}, "layer_types", "must be a list of strings"),
        ({"sliding_window": None}, "sliding_window", "GptOssModel builds its sliding-window mask"),
        ({"sliding_window": 0}, "sliding_window", "sliding_window=0 must be at least 1"),
        ({"attention_bias": None}, "attention_bias", "attention_bias is null; true or false"),
        ({"attention_bias": "yes"}, "attention_bias", "must be true or false"),
        ({"num_experts_per_tok": 5}, "experts_per_token", "experts_per_token=5"),
    ],
)
def test_a_bad_gpt_oss_file_is_refused_by_name(extra, field, match):
    with pytest.raises(ConfigError, match=match) as info:
        read_hf_config({**TINY, **extra})
    assert info.value.field == field


def test_a_null_window_is_refused_because_gpt_oss_cannot_run_without_one():
    """GptOssConfig takes sliding_window=null, but its model's forward builds the sliding mask
    for every call and raises: LLaMA Lab refuses the file rather than read a model that cannot
    run (a window of 0 would mask every key of a sliding layer)."""
    hf = theirs({**TINY, "sliding_window": None, "layer_types": ["full_attention"] * 3})
    model = transformers.AutoModelForCausalLM.from_config(hf, attn_implementation="eager")
    with pytest.raises(ValueError, match="sliding_window"):
        model(torch.zeros(1, 4, dtype=torch.long))
