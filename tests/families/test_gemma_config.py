"""Gemma 2's and Gemma 3's config.json read and written as transformers 5 reads them
(Gemma2Config / Gemma2ForCausalLM, Gemma3TextConfig / Gemma3ForCausalLM, the gemma3 wrapper
Gemma3Config read as its text decoder): the published gemma-2-9b, gemma-3-1b-it and
gemma-3-27b-it files read as the presets, with notes for what their model never reads; the
fields and the defaults equal AutoConfig.for_model's; the export read back by transformers as the
same model; transformers' own meta-device count of each published file against the Gemma
reports' embedding / non-embedding split; refusals by name. (LLaMA Lab's own counts and module
against transformers: test_families.)"""

import copy
import inspect
import json
import warnings

import pytest
import torch
from hf_helpers import meta_count, meta_model, same_scaling, scaling_of, theirs
from hf_helpers import published as published_file

from llama_lab.config import PRESETS, PUBLISHED_SPLIT, ConfigError, ModelConfig, read_hf_config
from llama_lab.config.families import MODEL_TYPES as FAMILIES
from llama_lab.config.families import family_of
from llama_lab.config.hf.keys import KEY_TABLE

transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore", module="transformers")

FILES = {"gemma-2-9b": "gemma-2-9b", "gemma-3-1b": "gemma-3-1b-it", "gemma-3-27b": "gemma-3-27b-it"}
NAMES = list(FILES)
# transformers' CausalLM of each published file (the wrapper's text decoder) on the meta device
TRANSFORMERS_PARAMS = {
    "gemma-2-9b": 9_241_705_984,
    "gemma-3-1b": 999_885_952,
    "gemma-3-27b": 27_009_346_304,
}
TINY = dict(
    vocab_size=128,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=7,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    sliding_window=8,
    max_position_embeddings=64,
)
TINY2 = dict(TINY, model_type="gemma2")
TINY3 = dict(TINY, model_type="gemma3_text")
VISION = dict(
    model_type="siglip_vision_model",
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=1,
    num_attention_heads=2,
    image_size=28,
    patch_size=14,
)


def published(name: str) -> dict:
    """The published config.json of preset ``name``."""
    return published_file(FILES[name])


def same_fields(cfg: ModelConfig, hf) -> None:
    """What LLaMA Lab read equals what transformers' config holds (and its model reads)."""
    gemma3 = type(hf).__name__ == "Gemma3TextConfig"  # (a wrapper's text_config may name another type)
    local = tuple(kind == "sliding_attention" for kind in hf.layer_types)
    assert cfg.local_layer_flags == local
    if any(local):
        assert cfg.sliding_window == hf.sliding_window
    assert (cfg.n_layers, cfg.d_model, cfg.vocab_size, cfg.ffn_hidden) == (
        hf.num_hidden_layers,
        hf.hidden_size,
        hf.vocab_size,
        hf.intermediate_size,
    )
    assert (cfg.n_heads, cfg.n_kv_heads, cfg.head_dim) == (
        hf.num_attention_heads,
        hf.num_key_value_heads,
        hf.head_dim,
    )
    assert cfg.query_pre_attn_scalar == hf.query_pre_attn_scalar
    assert cfg.qkv_bias == cfg.o_bias == hf.attention_bias and not cfg.mlp_bias
    assert (cfg.norm_eps, cfg.max_seq_len) == (hf.rms_norm_eps, hf.max_position_embeddings)
    assert cfg.tie_embeddings == hf.tie_word_embeddings
    assert cfg.logit_softcap == (hf.final_logit_softcapping or 0.0)
    # Gemma3Attention never applies attn_logit_softcapping (see the test below)
    assert cfg.attn_softcap == (0.0 if gemma3 else (hf.attn_logit_softcapping or 0.0))
    assert cfg.qk_norm == gemma3
    if gemma3:
        assert cfg.rope_theta == hf.rope_parameters["full_attention"]["rope_theta"]
        assert cfg.rope_local_theta == hf.rope_parameters["sliding_attention"]["rope_theta"]
        same_scaling(cfg, hf.rope_parameters["full_attention"])
        local = scaling_of(hf.rope_parameters["sliding_attention"])
        assert local == (cfg.rope_scaling.as_dict() if cfg.rope_scaling and cfg.rope_scaling_local else None)
    else:
        assert cfg.rope_theta == cfg.rope_local_theta == hf.rope_parameters["rope_theta"]
    assert hf.hidden_activation == "gelu_pytorch_tanh" and not hf.use_bidirectional_attention
    recipe = (cfg.norm_position, cfg.norm_type, cfg.ffn_type, cfg.norm_plus_one, cfg.embed_scale)
    assert recipe == ("sandwich", "rmsnorm", "geglu", True, True) and cfg.final_norm


# ---- the published files ------------------------------------------------------------------------
def test_the_published_files_are_read_as_the_presets_with_notes():
    cfg, notes = read_hf_config(published("gemma-2-9b"))
    assert cfg == PRESETS["gemma-2-9b"] and family_of(cfg).model_type.name == "gemma2"
    # Gemma2Config has no hidden_act (its MLP reads hidden_activation): a key nothing reads;
    # the note names the transformers release the key table was generated from
    version = KEY_TABLE["transformers"]
    assert notes == [
        f"not read by gemma2's model (Gemma2ForCausalLM, transformers {version}): 'cache_implementation', "
        "'hidden_act', 'sliding_window_size'; ignored"
    ]
    cfg, notes = read_hf_config(published("gemma-3-1b"))
    assert cfg == PRESETS["gemma-3-1b"] and family_of(cfg).model_type.name == "gemma3_text"
    assert notes == [
        f"not read by gemma3_text's model (Gemma3ForCausalLM, transformers {version}): "
        "'cache_implementation'; ignored"
    ]
    cfg, notes = read_hf_config(published("gemma-3-27b"))
    # the preset is the text decoder; the file's SigLIP tower and projector are counted beside it
    assert cfg.vision is not None and cfg.vision.kind == "siglip"
    cfg = cfg.replace(vision=None)
    assert cfg == PRESETS["gemma-3-27b"] and family_of(cfg).model_type.name == "gemma3_text"
    # the whole model counted: nothing left out to note (its linear ×8 RoPE on the full-attention
    # layers is read, no longer a note)
    assert notes == []
    assert cfg.rope_scaling.as_dict() == {"rope_type": "linear", "factor": 8.0} and not cfg.rope_scaling_local


@pytest.mark.parametrize("name", NAMES)
def test_the_fields_read_equal_what_transformers_reads(name):
    data = published(name)
    cfg, _ = read_hf_config(data)
    same_fields(cfg, theirs(data))


def test_the_layer_patterns_of_the_published_files():
    nine, one, big = (PRESETS[name] for name in ("gemma-2-9b", "gemma-3-1b", "gemma-3-27b"))
    assert [i for i, s in enumerate(nine.local_layer_flags) if not s] == list(range(1, 42, 2))
    assert [i for i, s in enumerate(one.local_layer_flags) if not s] == [5, 11, 17, 23]
    assert [i for i, s in enumerate(big.local_layer_flags) if not s] == list(range(5, 62, 6))
    assert (nine.sliding_window, one.sliding_window, big.sliding_window) == (4096, 512, 1024)
    assert (big.query_pre_attn_scalar, big.head_dim, big.vocab_size) == (168, 128, 262208)
    assert (nine.attn_softcap, nine.logit_softcap) == (50.0, 30.0)


def _split(model) -> tuple[int, int]:
    """(embedding, non-embedding) parameters of a transformers CausalLM (its tied head once)."""
    total = sum(p.numel() for p in model.parameters())
    embedding = model.get_input_embeddings().weight.numel()
    return embedding, total - embedding


@pytest.mark.parametrize("name", NAMES)  # the meta device: about a second for all three
def test_transformers_meta_count_of_the_published_file(name):
    """transformers' own CausalLM of each file against the report's split: Gemma 2 9B's
    non-embedding count is exact and its embedding counts 256,128 rows (the file: 256,000); Gemma
    3 1B's both round to the report's millions; Gemma 3 27B's non-embedding does, and its
    embedding 1,409.6M reaches the report's 1,416M with the multimodal projector's 6.2M."""
    data = published(name)
    model = meta_model(theirs(data))
    embedding, non_embedding = _split(model)
    assert embedding + non_embedding == TRANSFORMERS_PARAMS[name]
    emb, non, unit, _ = PUBLISHED_SPLIT[name]
    hidden = theirs(data).hidden_size
    if name == "gemma-2-9b":
        assert non_embedding == non == 8_324_201_984
        assert embedding == 256_000 * hidden and emb == 256_128 * hidden
    elif name == "gemma-3-1b":
        assert (
            (round(embedding / unit), round(non_embedding / unit)) == (emb / unit, non / unit) == (302, 698)
        )
    else:
        assert round(non_embedding / unit) == non / unit == 25_600
        assert round(embedding / unit) == 1_410 != emb / unit
        wrapper = transformers.AutoConfig.for_model(**copy.deepcopy(data))
        with torch.device("meta"):
            full = transformers.Gemma3ForConditionalGeneration(wrapper)
        projector = sum(p.numel() for p in full.model.multi_modal_projector.parameters())
        vision = sum(p.numel() for p in full.model.vision_tower.parameters())
        assert projector == 1152 * hidden + 1152
        assert round((embedding + projector) / unit) == emb / unit == 1_416
        assert round(vision / unit) == 417  # the report's vision encoder (counted: test_vision)
        language = sum(p.numel() for p in full.model.language_model.parameters())
        assert language == TRANSFORMERS_PARAMS[name]  # the text decoder (its head tied)


@pytest.mark.parametrize("name", NAMES)
def test_the_presets_export_builds_the_published_files_model(name):
    exported = PRESETS[name].to_hf_config()
    assert (
        meta_count(transformers.AutoConfig.for_model(**copy.deepcopy(exported))) == TRANSFORMERS_PARAMS[name]
    )


# ---- defaults, the wrapper, what the model never reads -----------------------------------------
@pytest.mark.parametrize("model_type", ["gemma2", "gemma3_text"])
def test_a_missing_key_takes_the_config_classs_default(model_type):
    data = {"model_type": model_type, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 96}
    cfg, notes = read_hf_config(data)
    hf = theirs(data)
    same_fields(cfg, hf)
    assert notes == []
    assert (cfg.n_layers, cfg.n_kv_heads, cfg.head_dim, cfg.query_pre_attn_scalar) == (26, 4, 256, 256)
    assert cfg.sliding_window == 4096 and cfg.tie_embeddings
    if model_type == "gemma2":
        assert (cfg.vocab_size, cfg.max_seq_len, cfg.rope_theta) == (256000, 8192, 10000.0)
        assert (cfg.attn_softcap, cfg.logit_softcap) == (50.0, 30.0)
        assert cfg.local_layers == ",".join(map(str, range(0, 26, 2)))
    else:
        assert (cfg.vocab_size, cfg.max_seq_len) == (262208, 131072)
        assert (cfg.rope_theta, cfg.rope_local_theta) == (1e6, 1e4)  # Gemma3TextConfig.default_theta
        assert (cfg.attn_softcap, cfg.logit_softcap) == (0.0, 0.0)
        assert [i for i, s in enumerate(cfg.local_layer_flags) if not s] == [5, 11, 17, 23]
    assert meta_count(transformers.AutoConfig.for_model(**cfg.to_hf_config())) == meta_count(hf)


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"sliding_window_pattern": 2},
        {"sliding_window_pattern": 1},  # every layer global
        {"layer_types": ["full_attention", "sliding_attention"] * 3 + ["full_attention"]},
        {"layer_types": ["sliding_attention"] * 7},
        {"rope_theta": 5e5, "rope_local_base_freq": 2e4},
        {"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 3e5}}},
        {"rope_parameters": {"sliding_attention": {"rope_theta": 99.0}, "full_attention": None}},
        {"rope_parameters": {"full_attention": {"rope_theta": 3e5}}, "rope_theta": 7.0},
        {"rope_scaling": {"rope_type": "linear", "factor": 8.0}},
        {"attention_bias": True, "final_logit_softcapping": 15.0, "tie_word_embeddings": False},
        {"query_pre_attn_scalar": 24, "use_bidirectional_attention": False},
        {"use_bidirectional_attention": None, "attn_logit_softcapping": None},
    ],
)
def test_tiny_gemma3_files_read_as_transformers_reads_them(extra):
    data = {**TINY3, **extra}
    cfg, _ = read_hf_config(data)
    hf = theirs(data)
    same_fields(cfg, hf)
    assert meta_count(transformers.AutoConfig.for_model(**cfg.to_hf_config())) == meta_count(hf)


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"layer_types": ["full_attention"] * 7},
        {"layer_types": ["sliding_attention"] * 7},
        {"rope_parameters": {"rope_type": "default", "rope_theta": 5e5}},
        {"attn_logit_softcapping": None, "final_logit_softcapping": None},
        {"attention_bias": True, "query_pre_attn_scalar": 24, "tie_word_embeddings": False},
    ],
)
def test_tiny_gemma2_files_read_as_transformers_reads_them(extra):
    data = {**TINY2, **extra}
    cfg, _ = read_hf_config(data)
    hf = theirs(data)
    same_fields(cfg, hf)
    assert meta_count(transformers.AutoConfig.for_model(**cfg.to_hf_config())) == meta_count(hf)


def test_notes_on_keys_read_and_ignored():
    # Gemma 3's legacy keys beside rope_parameters, the pattern beside layer_types, a flat
    # rope_parameters (Gemma3RotaryEmbedding reads only the per-layer-type entries)
    data = {
        **TINY3,
        "rope_parameters": {"rope_type": "default", "rope_theta": 5e5, "full_attention": {"rope_theta": 3e5}},
        "rope_theta": 7.0,
        "layer_types": ["sliding_attention"] * 6 + ["full_attention"],
        "sliding_window_pattern": 2,
    }
    cfg, notes = read_hf_config(data)
    same_fields(cfg, theirs(data))
    text = " | ".join(notes)
    assert "sliding_window_pattern=2 is not used: layer_types names each layer's kind" in text
    assert (
        "rope_theta=7.0 is not used: rope_parameters['full_attention']['rope_theta'] gives the base" in text
    )
    assert "rope_parameters key(s) 'rope_theta', 'rope_type' are not read" in text
    # hidden_act is no field of Gemma's config classes: whatever its value, a note
    for value in ("silu", None, 5):
        cfg2, notes = read_hf_config({**TINY2, "hidden_act": value})
        assert cfg2 == read_hf_config(TINY2)[0]
        assert any("not read by gemma2's model" in n and "'hidden_act'" in n for n in notes)


def test_gemma3_attention_never_applies_its_score_cap_in_this_transformers():
    """Gemma3Attention stores attn_logit_softcapping and passes no softcap to the attention
    function (Gemma2Attention does): a gemma3_text file's cap is a note and changes nothing."""
    gemma2 = inspect.getsource(transformers.models.gemma2.modeling_gemma2.Gemma2Attention.forward)
    gemma3 = inspect.getsource(transformers.models.gemma3.modeling_gemma3.Gemma3Attention.forward)
    assert "softcap=self.attn_logit_softcapping" in gemma2 and "softcap" not in gemma3
    cfg, notes = read_hf_config({**TINY3, "attn_logit_softcapping": 50.0})
    assert cfg == read_hf_config(TINY3)[0] and cfg.attn_softcap == 0.0
    assert notes == [
        f"attn_logit_softcapping=50.0 is not applied by Gemma3Attention in transformers "
        f"{KEY_TABLE['transformers']} (it keeps the value and never passes it to the attention "
        f"function): ignored"
    ]
    # the same logits with and without it, in transformers itself
    ids = torch.arange(6).view(1, 6)
    logits = []
    for cap in (None, 0.01):
        torch.manual_seed(0)
        hf = transformers.AutoConfig.for_model(**{**TINY3, "attn_logit_softcapping": cap})
        model = transformers.AutoModelForCausalLM.from_config(hf, attn_implementation="eager").eval()
        with torch.no_grad():
            logits.append(model(ids).logits)
    assert torch.equal(logits[0], logits[1])


def test_the_wrapper_is_read_as_its_text_decoder_with_the_text_configs_defaults():
    text = {"hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 96, "num_hidden_layers": 3}
    for inner, said in [
        ({**text, "model_type": "gemma3_text"}, None),
        (
            text,
            "text_config names no model_type, but Gemma3Config builds a Gemma3TextConfig whatever it says",
        ),
        (
            {**text, "model_type": "llama"},
            "text_config names model_type 'llama', but Gemma3Config builds a Gemma3TextConfig",
        ),
    ]:
        wrapper = {"model_type": "gemma3", "text_config": inner, "vision_config": VISION}
        cfg, notes = read_hf_config(wrapper)
        hf = transformers.AutoConfig.for_model(**copy.deepcopy(wrapper)).text_config
        assert type(hf).__name__ == "Gemma3TextConfig"
        same_fields(cfg, hf)
        if said:  # the whole model is counted: a note only for what the file says otherwise
            assert notes[0].startswith(
                "the text decoder of a 'gemma3' model (its text_config, model_type 'gemma3_text')"
            )
            assert said in notes[0]
        else:
            assert not any("names" in note for note in notes)
    # no text_config at all, or null: Gemma3TextConfig's defaults
    for wrapper in ({"model_type": "gemma3"}, {"model_type": "gemma3", "text_config": None}):
        cfg, notes = read_hf_config(wrapper)
        same_fields(cfg, transformers.AutoConfig.for_model(**copy.deepcopy(wrapper)).text_config)
        assert (cfg.d_model, cfg.n_layers) == (2304, 26) and "names no model_type" in notes[0]


@pytest.mark.parametrize(
    "outer,inner", [(None, None), (False, None), (None, False), (True, False), (False, True)]
)
def test_the_wrappers_tie_word_embeddings_ties_the_head(outer, inner):
    """Gemma3ForConditionalGeneration ties lm_head by its own config's tie_word_embeddings
    (PreTrainedModel.tie_weights), not its text_config's."""
    text = {**TINY3, **({} if inner is None else {"tie_word_embeddings": inner})}
    wrapper = {"model_type": "gemma3", "text_config": text, "vision_config": VISION}
    if outer is not None:
        wrapper["tie_word_embeddings"] = outer
    cfg, notes = read_hf_config(wrapper)
    with torch.device("meta"):
        model = transformers.Gemma3ForConditionalGeneration(
            transformers.AutoConfig.for_model(**copy.deepcopy(wrapper))
        )
    tied = model.lm_head.weight is model.model.language_model.embed_tokens.weight
    assert cfg.tie_embeddings == tied == (outer is not False)
    assert any("is not what ties the head" in note for note in notes) == (inner is not None and inner != tied)


# ---- refusals by name ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "base,extra,field,match",
    [
        (
            TINY2,
            {"hidden_activation": "gelu"},
            "hidden_activation",
            "hidden_activation='gelu' is not modelled",
        ),
        (TINY3, {"hidden_activation": "silu"}, "hidden_activation", "'gelu_pytorch_tanh'"),
        (
            TINY3,
            {"use_bidirectional_attention": True},
            "use_bidirectional_attention",
            "LLaMA Lab's decoders are causal",
        ),
        (
            TINY2,
            {"use_bidirectional_attention": True},
            "use_bidirectional_attention",
            "=true is not modelled",
        ),
        (
            TINY2,
            {"use_bidirectional_attention": "yes"},
            "use_bidirectional_attention",
            "must be true or false",
        ),
        (TINY3, {"rope_parameters": 5}, "rope_parameters", "must be an object keyed by layer type"),
        (TINY3, {"rope_parameters": [1]}, "rope_parameters", "must be an object keyed by layer type"),
        (
            TINY3,
            {"rope_parameters": {"full_attention": 3}},
            "rope_parameters",
            r"\['full_attention'\]=3 must be",
        ),
        (
            TINY3,
            {"rope_parameters": {"sliding_attention": {"rope_theta": "x"}}},
            "rope_parameters",
            r"rope_parameters\['sliding_attention'\]\['rope_theta'\]='x' must be a positive number",
        ),
        (
            TINY3,
            {"rope_parameters": {"full_attention": {"rope_theta": None}}},
            "rope_parameters",
            r"\['full_attention'\]\['rope_theta'\] is null",
        ),
        (TINY3, {"rope_theta": None}, "rope_theta", "rope_theta is null: Gemma3TextConfig keeps it"),
        (TINY3, {"rope_local_base_freq": None}, "rope_local_base_freq", "rope_local_base_freq is null"),
        (TINY3, {"rope_local_base_freq": -1}, "rope_local_base_freq", "must be a positive number"),
        (TINY3, {"rope_scaling": "linear"}, "rope_scaling", "must be an object or null"),
        (
            TINY3,
            {
                "rope_parameters": {"sliding_attention": {}},
                "rope_scaling": {"rope_type": "linear", "factor": 2.0},
            },
            "rope_scaling",
            "which this file's rope_parameters lacks",
        ),
        (TINY3, {"sliding_window_pattern": None}, "sliding_window_pattern", "must be an integer"),
        (TINY3, {"sliding_window_pattern": 0}, "sliding_window_pattern", "must be at least 1"),
        (TINY2, {"attn_logit_softcapping": 0.0}, "attn_logit_softcapping", "positive number or null"),
        (TINY2, {"final_logit_softcapping": -30.0}, "final_logit_softcapping", "divides the logits by it"),
        (TINY3, {"final_logit_softcapping": "30"}, "final_logit_softcapping", "positive number or null"),
        (TINY2, {"layer_types": ["full_attention"] * 3}, "layer_types", "each of the 7 layers"),
        (TINY2, {"sliding_window": 0}, "sliding_window", "sliding_window=0 must be at least 1"),
        (TINY2, {"query_pre_attn_scalar": 168.0}, "query_pre_attn_scalar", "must be an integer"),
    ],
)
def test_a_bad_gemma_file_is_refused_by_name(base, extra, field, match):
    with pytest.raises(ConfigError, match=match) as info:
        read_hf_config({**base, **extra})
    assert info.value.field == field


@pytest.mark.parametrize("model_type", ["gemma2", "gemma3_text"])
@pytest.mark.parametrize(
    "key", ["hidden_activation", "query_pre_attn_scalar", "attention_bias", "head_dim", "num_key_value_heads"]
)
def test_a_null_the_config_class_refuses_is_refused(model_type, key):
    data = {**TINY, "model_type": model_type, key: None}
    with pytest.raises(Exception):  # noqa: B017 - transformers' strict dataclass error
        theirs(data)
    with pytest.raises(ConfigError, match=f"^{key} is null; .* is required") as info:
        read_hf_config(data)
    assert info.value.field == key


@pytest.mark.parametrize("model_type", ["gemma2", "gemma3_text"])
def test_a_null_window_is_refused_because_gemma_cannot_run_without_one(model_type):
    data = {**TINY, "model_type": model_type, "sliding_window": None, "layer_types": ["full_attention"] * 7}
    model = transformers.AutoModelForCausalLM.from_config(theirs(data), attn_implementation="eager")
    with pytest.raises(ValueError, match="sliding_window"):
        model(torch.zeros(1, 4, dtype=torch.long))
    with pytest.raises(ConfigError, match="builds its sliding-window mask on every forward") as info:
        read_hf_config(data)
    assert info.value.field == "sliding_window"


def test_nulls_the_classes_take_are_read_as_they_read_them():
    # no caps, not bidirectional, layer_types derived; a null base of a layer type no layer has
    cfg, _ = read_hf_config(
        {**TINY2, "attn_logit_softcapping": None, "final_logit_softcapping": None, "layer_types": None}
    )
    assert (cfg.attn_softcap, cfg.logit_softcap, cfg.local_layers) == (0.0, 0.0, "0,2,4,6")
    data = {
        **TINY3,
        "layer_types": ["sliding_attention"] * 7,
        "rope_theta": None,
        "use_bidirectional_attention": None,
    }
    cfg, _ = read_hf_config(data)
    assert theirs(data).rope_parameters["full_attention"]["rope_theta"] is None  # kept, never read
    # no full-attention layer: the base nobody reads takes Gemma3TextConfig's default
    assert (cfg.rope_theta, cfg.rope_local_theta, cfg.local_layers) == (1e6, 1e4, "all")
    model = transformers.AutoModelForCausalLM.from_config(theirs(data), attn_implementation="eager")
    model(torch.zeros(1, 4, dtype=torch.long))  # transformers runs it: the null base is never read


# ---- writing one --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_the_presets_export_round_trips_without_a_note(name):
    cfg = PRESETS[name]
    exported = cfg.to_hf_config()
    assert exported["model_type"] == ("gemma2" if name == "gemma-2-9b" else "gemma3_text")
    assert exported["hidden_activation"] == "gelu_pytorch_tanh" and "hidden_act" not in exported
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ModelConfig.from_hf_config(exported) == cfg
    back = transformers.AutoConfig.for_model(**json.loads(json.dumps(exported)))
    same_fields(cfg, back)
    again, notes = read_hf_config(back.to_dict())
    assert again == cfg
    # Gemma3TextConfig.to_dict writes its private pattern: a key nothing reads
    assert all("'_sliding_window_pattern'" in note for note in notes)


@pytest.mark.parametrize(
    "changes,model_type",
    [
        ({}, "gemma3_text"),
        ({"qk_norm": False, "rope_local_theta": None, "rope_theta": 1e4}, "gemma2"),
        ({"qk_norm": False, "rope_local_theta": None, "attn_softcap": 50.0, "logit_softcap": 30.0}, "gemma2"),
        ({"logit_softcap": 30.0, "qkv_bias": True, "o_bias": True}, "gemma3_text"),
        ({"local_layers": "all"}, "gemma3_text"),
        ({"sliding_window": 0, "local_layers": "all"}, "gemma3_text"),  # no window: every layer global
        ({"query_pre_attn_scalar": 24, "tie_embeddings": False}, "gemma3_text"),
    ],
)
def test_the_family_written_is_the_one_that_expresses_the_config(changes, model_type):
    cfg = read_hf_config(TINY3)[0].replace(**changes)
    assert family_of(cfg).model_type.name == model_type
    exported = cfg.to_hf_config()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ModelConfig.from_hf_config(exported) == cfg
    back = transformers.AutoConfig.for_model(**json.loads(json.dumps(exported)))
    same_fields(cfg, back)
    assert read_hf_config(back.to_dict())[0] == cfg


_GEMMA3 = read_hf_config(TINY3)[0]


@pytest.mark.parametrize(
    "changes,reasons",
    [
        (
            {"attn_softcap": 50.0},
            [
                "gemma2 (QK-norm, a RoPE base of its own",
                "gemma3_text (attention soft-capping (Gemma3Attention",
            ],
        ),
        (
            {"qk_norm": False},
            ["gemma2 (a RoPE base of its own on the sliding layers)", "gemma3_text (no QK-norm)"],
        ),
        ({"mlp_bias": True}, ["gemma2 (MLP biases, QK-norm", "gemma3_text (MLP biases)"]),
        ({"o_bias": True}, ["gemma3_text (q/k/v and o biases differ)"]),
        ({"attention_sinks": True}, ["gemma3_text (attention sinks)"]),
    ],
)
def test_a_config_neither_gemma_family_expresses_is_refused_naming_the_rule(changes, reasons):
    with pytest.raises(ConfigError, match="no supported family expresses this config") as info:
        _GEMMA3.replace(**changes).to_hf_config()
    text = str(info.value)
    for reason in reasons:
        assert reason in text
    assert "llama (not a LLaMA block" in text
    for model_type in FAMILIES:
        assert f"{model_type} (" in text


@pytest.mark.parametrize(
    "changes,shown",
    [
        ({"ffn_type": "swiglu"}, "ffn_type='swiglu'"),
        ({"norm_position": "pre"}, "norm_position='pre'"),
        ({"norm_plus_one": False}, "norm_plus_one=False"),
        ({"embed_scale": False}, "embed_scale=False"),
    ],
)
def test_half_a_gemma_block_has_no_family(changes, shown):
    with pytest.raises(ConfigError, match="needs a LLaMA-style config .* or a Gemma-style one") as info:
        _GEMMA3.replace(**changes).to_hf_config()
    assert shown in str(info.value)
    # a LLaMA block with one of Gemma's fields: named too
    with pytest.raises(ConfigError, match="logit_softcap=30.0"):
        PRESETS["llama-3-8b"].replace(logit_softcap=30.0).to_hf_config()
    assert family_of(PRESETS["llama-3-8b"]).model_type.name == "llama"
