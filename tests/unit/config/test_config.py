import dataclasses
import json
import warnings

import pytest

from llama_lab.config import (
    LIMITS,
    PRESETS,
    ConfigError,
    HFConfigWarning,
    ModelConfig,
    apply_overrides,
    get_preset,
    llama_ffn_hidden,
    parse_config_json,
    read_hf_config,
    seed_ffn_hidden,
)

SPEC_PRESETS = [
    "seed-demo",
    "seed-demo-mha",
    "transformer-2017",
    "llama-7b",
    "llama-2-7b",
    "llama-2-13b",
    "llama-2-70b",
    "llama-3-8b",
    "llama-3-70b",
    "llama-3.1-405b",
    "tinyllama-1.1b",
    "debug",
]


def test_every_spec_preset_exists():
    assert set(SPEC_PRESETS) <= set(PRESETS)


def test_defaults_are_the_seed_demo():
    cfg = ModelConfig()
    assert (
        cfg.vocab_size,
        cfg.d_model,
        cfg.n_layers,
        cfg.n_heads,
        cfg.n_kv_heads,
        cfg.ffn_hidden,
        cfg.max_seq_len,
    ) == (32000, 512, 4, 8, 2, 1365, 128)
    assert cfg == PRESETS["seed-demo"]


def test_derived_properties():
    cfg = PRESETS["llama-2-70b"]
    assert cfg.head_dim == 128 and cfg.n_rep == 8 and cfg.attention_kind == "GQA"
    assert PRESETS["llama-2-7b"].attention_kind == "MHA"
    assert ModelConfig(n_kv_heads=1).attention_kind == "MQA"


def test_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        PRESETS["seed-demo"].d_model = 3


def test_transformer_2017_recipe():
    cfg = PRESETS["transformer-2017"]
    assert (
        cfg.norm_position,
        cfg.norm_type,
        cfg.pos_encoding,
        cfg.ffn_type,
        cfg.bias,
        cfg.init,
        cfg.final_norm,
    ) == ("post", "layernorm", "sinusoidal", "relu", True, "xavier", False)
    assert cfg.ffn_hidden == 4 * cfg.d_model and cfg.attention_kind == "MHA"


@pytest.mark.parametrize(
    "name,d,kwargs,expected",
    [
        ("llama-2-7b", 4096, {}, 11008),
        ("llama-3-8b", 4096, dict(multiple_of=1024, ffn_dim_multiplier=1.3), 14336),
        ("llama-2-70b", 8192, dict(multiple_of=4096, ffn_dim_multiplier=1.3), 28672),
        ("llama-3.1-405b", 16384, dict(multiple_of=1024, ffn_dim_multiplier=1.2), 53248),
    ],
)
def test_meta_ffn_rule(name, d, kwargs, expected):
    assert llama_ffn_hidden(d, **kwargs) == expected == PRESETS[name].ffn_hidden


def test_seed_ffn_rule():
    assert seed_ffn_hidden(512) == 1365  # the demo model
    assert seed_ffn_hidden(4096) == 10922  # 8/3·4096 = 10922.67, floored
    assert seed_ffn_hidden(4096, multiple_of=64) == 10880  # the seed's code: int(8d/3/64)*64
    # the seed's table says 10923 for SwiGLU(8/3 d) at d=4096: that is round(), not its own code
    assert round(8 * 4096 / 3) == 10923


BAD = [
    (dict(n_heads=8, n_kv_heads=3), "n_heads=8 is not divisible by n_kv_heads=3"),
    (dict(d_model=500), "d_model=500 is not divisible by n_heads=8"),
    (dict(d_model=24, n_heads=8, n_kv_heads=8), "head_dim=3"),
    (dict(n_layers=0), "n_layers=0 must be at least 1"),
    (dict(n_layers=-4), "n_layers=-4"),
    (dict(vocab_size=1), "vocab_size=1 must be at least 2"),
    (dict(n_layers=10**9), "n_layers=1000000000 exceeds the upper bound"),
    (dict(d_model=2**20, n_heads=8), "d_model=1048576 exceeds"),
    (dict(ffn_hidden=0), "ffn_hidden=0"),
    (dict(max_seq_len=10**9), "max_seq_len"),
    (dict(d_model=4.5), "d_model=4.5 must be an integer"),
    (dict(n_layers=True), "n_layers=True must be an integer"),
    (dict(norm_position="middle"), "norm_position='middle' must be one of"),
    (dict(norm_type="batchnorm"), "norm_type='batchnorm'"),
    (dict(pos_encoding="alibi"), "pos_encoding='alibi'"),
    (dict(ffn_type="reglu"), "ffn_type='reglu'"),
    (dict(init="zeros"), "init='zeros'"),
    (dict(bias="yes"), "bias='yes' must be true or false"),
    (dict(rope_theta=0), "rope_theta=0"),
    (dict(rope_theta=float("nan")), "rope_theta=nan"),
    (dict(norm_eps=-1e-5), "norm_eps=-1e-05"),
    (dict(norm_eps=float("inf")), "norm_eps=inf"),
    (dict(norm_eps=2.0), "norm_eps=2.0 must be < 1"),
    (dict(d_model=4, n_heads=8, n_kv_heads=8), "n_heads=8 exceeds d_model=4"),
    (dict(n_kv_heads=16), "n_heads=8 is not divisible by n_kv_heads=16"),
]


@pytest.mark.parametrize("kwargs,message", BAD)
def test_validation_names_field_value_rule(kwargs, message):
    with pytest.raises(ConfigError) as info:
        ModelConfig(**kwargs)
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)


def test_rope_odd_head_dim_allowed_without_rope():
    cfg = ModelConfig(d_model=24, n_heads=8, n_kv_heads=8, pos_encoding="sinusoidal")
    assert cfg.head_dim == 3


def test_dict_round_trip_and_unknown_fields():
    cfg = PRESETS["llama-3-8b"]
    assert ModelConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    with pytest.raises(ConfigError, match="unknown config field.*'hiden'"):
        ModelConfig.from_dict({"hiden": 3})
    with pytest.raises(ConfigError, match="must be a JSON object"):
        ModelConfig.from_dict([1, 2])


def _exportable(name: str) -> bool:
    """A preset some supported family expresses (all but the 2017 recipe)."""
    from llama_lab.config.families import family_of

    try:
        family_of(PRESETS[name])
    except ConfigError:
        return False
    return True


@pytest.mark.parametrize("name", [n for n in PRESETS if _exportable(n)])
def test_hf_round_trip(name):
    cfg = PRESETS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ModelConfig.from_hf_config(cfg.to_hf_config()) == cfg


def test_hf_round_trip_through_transformers():
    transformers = pytest.importorskip("transformers")
    cfg = PRESETS["llama-3-8b"]
    hf = transformers.LlamaConfig(**cfg.to_hf_config())
    back, notes = read_hf_config(hf.to_dict())
    assert back == cfg


def test_hf_keys_that_change_nothing_counted_are_noted_the_others_refused():
    hf = PRESETS["llama-3.1-405b"].to_hf_config()
    hf["attention_dropout"] = 0.1
    with pytest.warns(HFConfigWarning) as record:
        cfg = ModelConfig.from_hf_config(hf)
    messages = " ".join(str(r.message) for r in record)
    assert "attention_dropout" in messages
    # its llama3 RoPE scaling changes the logits: read (written as rope_parameters), not noted
    assert "rope" not in messages and cfg.rope_scaling.rope_type == "llama3"
    assert cfg == PRESETS["llama-3.1-405b"]
    # a scaling transformers cannot build (llama3 without its frequency factors) is refused
    with pytest.raises(ConfigError, match="llama3' needs high_freq_factor, low_freq_factor"):
        ModelConfig.from_hf_config(hf | {"rope_scaling": {"rope_type": "llama3", "factor": 8.0}})
    # LlamaForCausalLM never reads sliding_window (transformers' own code): a note, not a refusal
    with pytest.warns(HFConfigWarning, match="not read by llama's model .*'sliding_window'; ignored"):
        assert ModelConfig.from_hf_config(hf | {"sliding_window": 4096}) == PRESETS["llama-3.1-405b"]


def test_hf_post_norm_refused():
    with pytest.raises(ConfigError, match="norm_position='post'"):
        PRESETS["transformer-2017"].to_hf_config()


def test_a_config_json_without_model_type_is_refused_naming_it():
    with pytest.raises(ConfigError, match="no model_type: transformers picks the model's family") as info:
        read_hf_config({"hidden_size": 64})
    assert info.value.field == "model_type"


def test_parse_config_json_errors():
    with pytest.raises(ConfigError, match="not valid JSON"):
        parse_config_json("{nope")
    with pytest.raises(ConfigError, match="JSON object"):
        parse_config_json("[]")
    cfg, notes = parse_config_json(json.dumps(PRESETS["llama-2-7b"].to_hf_config()))
    assert cfg == PRESETS["llama-2-7b"] and notes == []


def test_overrides():
    cfg = apply_overrides(get_preset("seed-demo"), ["n_kv_heads=8", "bias=true", "rope_theta=5e5"])
    assert cfg.n_kv_heads == 8 and cfg.bias is True and cfg.rope_theta == 5e5
    for bad, msg in [
        ("n_kv_heads", "field=value"),
        ("nope=3", "unknown config field"),
        ("n_layers=four", "must be an integer"),
        ("bias=maybe", "true or false"),
        ("n_kv_heads=3", "not divisible"),
    ]:
        with pytest.raises(ConfigError, match=msg):
            apply_overrides(get_preset("seed-demo"), [bad])


def test_unknown_preset():
    with pytest.raises(ConfigError, match="unknown preset 'llama-9'"):
        get_preset("llama-9")


def test_limits_cover_spec_bounds():
    assert LIMITS["d_model"] == 131072 and LIMITS["n_layers"] == 4096
    assert LIMITS["vocab_size"] == 4194304 and LIMITS["ffn_hidden"] == 1048576
    assert LIMITS["max_seq_len"] == 16777216


def test_hf_v5_rope_parameters():
    cfg, notes = read_hf_config(
        {
            **PRESETS["llama-3-8b"].to_hf_config(),
            "rope_theta": None,
            "rope_parameters": {"rope_theta": 500000.0, "rope_type": "default"},
        }
    )
    assert cfg.rope_theta == 500000.0 and notes == []
    llama3 = {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192}
    llama3 |= {"low_freq_factor": 1.0, "high_freq_factor": 4.0}
    cfg, notes = read_hf_config(
        {**PRESETS["llama-3-8b"].to_hf_config(), "rope_parameters": {"rope_theta": 5e5, **llama3}}
    )
    assert cfg.rope_theta == 5e5 and cfg.rope_scaling.as_dict() == llama3 and notes == []


def test_overrides_coerce_by_the_fields_own_types():
    """The override parser reads ModelConfig's resolved annotations, not their text: ints,
    floats, bools and choices, the derived fields' "auto", and a choice whose value is "none"."""
    from llama_lab.config import parse_override

    assert parse_override("n_layers=12") == ("n_layers", 12)
    assert parse_override("rope_theta=5e5") == ("rope_theta", 500000.0)
    assert parse_override("bias=on") == ("bias", True)
    assert parse_override("norm_type=layernorm") == ("norm_type", "layernorm")
    assert parse_override("pos_encoding=none") == ("pos_encoding", "none")
    assert parse_override("head_dim=auto") == ("head_dim", None)
    assert PRESETS["debug"].replace(pos_encoding="none").pos_encoding == "none"
    with pytest.raises(ConfigError, match="n_layers= is empty"):
        parse_override("n_layers=")
