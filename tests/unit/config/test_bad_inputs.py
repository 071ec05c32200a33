"""Issues 6 and 11: every way bad input can enter gets one clear message naming the rule broken.

Each row: (id, entry point, input, a substring the message must contain). Entry points are the
CLI (exit 2, one line on stderr), config files, uploaded config.json text, URL query values and
``--set`` overrides, uploaded training text and local checkpoint folders. Special files (FIFOs,
devices, symlink loops) and size bounds of every reader: tests/unit/config/test_bad_files.py.
"""

import dataclasses
import json
import math
import os
import re
import time
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llama_lab.analysis import analyze
from llama_lab.cli import main
from llama_lab.config import PRESETS, ConfigError, ModelConfig, parse_config_json
from llama_lab.config.model_config import NULLABLE
from llama_lab.experiments import LiveSettings
from llama_lab.model import build_model
from llama_lab.train import TrainSettings, data

HF = PRESETS["debug"].replace(norm_eps=1e-5).to_hf_config()

CLI_CASES = [
    ("set-indivisible-heads", ["analyze", "--set", "n_kv_heads=3"], "not divisible by n_kv_heads=3"),
    ("set-zero-layers", ["analyze", "--set", "n_layers=0"], "n_layers=0 must be at least 1"),
    ("set-negative-d", ["analyze", "--set", "d_model=-512"], "d_model=-512 must be at least 1"),
    ("set-huge-layers", ["analyze", "--set", "n_layers=1000000000"], "exceeds the upper bound"),
    ("set-huge-vocab", ["analyze", "--set", "vocab_size=99999999999"], "vocab_size=99999999999 exceeds"),
    ("set-nan-theta", ["analyze", "--set", "rope_theta=nan"], "rope_theta=nan must be a finite number"),
    ("set-inf-eps", ["analyze", "--set", "norm_eps=inf"], "norm_eps=inf"),
    ("set-float-for-int", ["analyze", "--set", "d_model=512.5"], "must be an integer"),
    ("set-word-for-bool", ["analyze", "--set", "bias=perhaps"], "must be true or false"),
    ("set-unknown-field", ["analyze", "--set", "dropout=0.1"], "unknown config field 'dropout'"),
    ("set-no-equals", ["analyze", "--set", "n_layers"], "must look like field=value"),
    ("set-bad-choice", ["analyze", "--set", "ffn_type=moe"], "ffn_type='moe' must be one of"),
    (
        "set-odd-rope",
        ["analyze", "--set", "d_model=24", "--set", "n_heads=8", "--set", "n_kv_heads=8"],
        "must be even for pos_encoding='rope'",
    ),
    ("unknown-preset", ["analyze", "--preset", "gpt-5"], "unknown preset 'gpt-5'"),
    ("zero-seq", ["analyze", "--seq-len", "0"], "must be at least 1"),
    ("word-batch", ["analyze", "--batch", "many"], "'many' is not an integer"),
    ("bad-dtype", ["analyze", "--dtype", "fp64"], "invalid choice: 'fp64'"),
    ("bad-device", ["bench", "--device", "tpu"], "invalid choice: 'tpu'"),
    ("negative-lr", ["train", "--lr", "-0.1"], "must be > 0 and at most 10"),
    ("nan-lr", ["train", "--lr", "nan"], "must be > 0 and at most 10"),
    ("huge-lr", ["train", "--lr", "1e38"], "must be > 0 and at most 10"),
    ("endless-steps", ["train", "--steps", "1000000000000000000"], "at most 1,000,000"),
    ("steps-as-expression", ["train", "--steps", "10**18"], "is not an integer"),
    ("huge-seed", ["gradnorms", "--seed", "100000000000000000000"], "at most 2,147,483,647"),
    ("huge-bench-steps", ["bench", "--steps", "99999"], "at most 10,000"),
    ("negative-grad-clip", ["train", "--grad-clip", "-1"], "must be > 0"),
    (
        "over-budget-train",
        ["train", "--preset", "tinyllama-1.1b", "--steps", "2000"],
        "live runs on the CPU are limited to 3 TFLOP",
    ),
    ("over-budget-bench", ["bench", "--preset", "llama-2-7b", "--device", "cpu"], "--no-budget"),
    ("negative-warmup", ["train", "--warmup", "-5"], "must be at least 0"),
    (
        "missing-data-file",
        ["train", "--preset", "debug", "--data", "/no/such.txt"],
        "--data '/no/such.txt' does not exist",
    ),
    (
        "endless-data-file",
        ["train", "--preset", "debug", "--data", "/dev/zero"],
        "is a character device, not a regular file",
    ),
    ("folder-as-data", ["train", "--preset", "debug", "--data", "/"], "is a folder, not a regular file"),
    ("unknown-command", ["serve"], "invalid choice: 'serve'"),
    ("fp16-on-cpu", ["bench", "--preset", "debug", "--device", "cpu", "--dtype", "fp16"], "fp16"),
    ("oversized-live-run", ["bench", "--preset", "llama-3.1-405b", "--device", "cpu", "--no-budget"], "free"),
    ("seq-beyond-model", ["gradnorms", "--preset", "debug", "--seq-len", "500"], "max_seq_len"),
]


@pytest.mark.parametrize("argv,needle", [c[1:] for c in CLI_CASES], ids=[c[0] for c in CLI_CASES])
def test_cli_bad_input(capsys, argv, needle):
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, err
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], err
    assert "Traceback" not in err


CONFIG_TEXT_CASES = [
    ("empty", "", "is empty"),
    ("whitespace", "  \n ", "is empty"),
    ("truncated", '{"d_model": 64,', "not valid JSON"),
    ("not-json", "d_model: 64", "not valid JSON"),
    ("list", "[1, 2, 3]", "must hold a JSON object"),
    ("string", '"llama"', "must hold a JSON object"),
    ("null", "null", "must hold a JSON object"),
    ("deep-nesting", "[" * 100_000, "nested too deeply"),
    ("huge", '{"x": "' + "a" * 1_100_000 + '"}', "at most 1,000,000"),
    ("unknown-field", '{"d_model": 64, "colour": "red"}', "unknown config field(s) 'colour'"),
    ("string-size", '{"d_model": "512"}', "d_model='512' must be an integer"),
    ("nan-size", '{"d_model": NaN}', "d_model=NaN is not a finite number"),
    ("bool-size", '{"n_layers": true}', "n_layers=True must be an integer"),
    ("float-size", '{"n_layers": 4.0}', "n_layers=4.0 must be an integer"),
    ("hf-no-model-type", '{"hidden_size": 64}', "no model_type"),
    ("hf-bad-heads", json.dumps({**HF, "num_key_value_heads": 3}), "not divisible by n_kv_heads=3"),
    ("hf-zero-vocab", json.dumps({**HF, "vocab_size": 0}), "vocab_size=0 must be at least 2"),
    (
        "hf-string-layers",
        json.dumps({**HF, "num_hidden_layers": "two"}),
        "num_hidden_layers='two' must be an integer",
    ),
    ("hf-negative-eps", json.dumps({**HF, "rms_norm_eps": -1}), "norm_eps=-1"),
    ("hf-list-instead-of-number", json.dumps({**HF, "hidden_size": [64]}), "d_model=[64] must be an integer"),
    (
        "hf-huge-context",
        json.dumps({**HF, "max_position_embeddings": 10**12}),
        "max_seq_len=1000000000000 exceeds",
    ),
    (
        "hf-infinite-width",
        json.dumps(HF).replace('"hidden_size": 64', '"hidden_size": 1e400'),
        "hidden_size=1e400 is beyond the range of a float",
    ),
    (
        "hf-string-bias",
        json.dumps({**HF, "attention_bias": "yes"}),
        "attention_bias='yes' must be true or false",
    ),
    ("ours-infinite-theta", '{"rope_theta": 1e400}', "rope_theta=1e400 is beyond the range of a float"),
]


@pytest.mark.parametrize(
    "text,needle", [c[1:] for c in CONFIG_TEXT_CASES], ids=[c[0] for c in CONFIG_TEXT_CASES]
)
def test_config_text_bad_input(text, needle):
    with pytest.raises(ConfigError) as info:
        parse_config_json(text, source="upload.json")
    assert needle in str(info.value)


# ---- issue 11: every JSON number, null and string of a config is checked ----------------------
def _with(base: dict, key: str, raw: str) -> str:
    """``base`` as JSON text with ``key`` set to the raw JSON ``raw`` (a literal json.dumps
    would not write: NaN, 401 digits)."""
    return json.dumps({**base, key: "@@"}).replace('"@@"', raw)


OURS = PRESETS["debug"].to_dict()
JSON_VALUE_CASES = [
    # numbers no config holds, in our format and in a HF config.json, at the top and nested
    ("nan", "NaN", "is not a finite number (NaN and Infinity are refused)"),
    ("infinity", "Infinity", "=Infinity is not a finite number"),
    ("minus-infinity", "-Infinity", "=-Infinity is not a finite number"),
    ("float-overflow", "1e400", "=1e400 is beyond the range of a float"),
    ("float-401-digits", "1" + "0" * 400 + ".0", "is a number written with 403 characters"),
    ("float-underflow", "1e-400", "is below the smallest float"),
    ("int-5001-digits", "1" + "0" * 5000, "is an integer of 5,001 digits; a config number has at most 20"),
    ("int-negative-huge", "-" + "9" * 5000, "is an integer of 5,000 digits"),
    ("int-21-digits", "1" + "0" * 20, "is an integer of 21 digits"),
    # strings that are not printable Unicode text
    ("lone-surrogate", '"\\ud800"', "holds a lone surrogate (not Unicode text) '\\ud800'"),
    ("low-surrogate", '"ab\\udfffcd"', "holds a lone surrogate"),
    ("nul", '"llama\\u0000"', "holds a control character '\\x00'"),
    ("escape", '"\\u001b[31mred"', "holds a control character '\\x1b'"),
    ("c1-control", '"\\u009b"', "holds a control character '\\x9b'"),
    ("delete", '"\\u007f"', "holds a control character '\\x7f'"),
]


@pytest.mark.parametrize("fmt", ["ours", "hf"])
@pytest.mark.parametrize("where", ["top", "nested", "in-list"])
@pytest.mark.parametrize(
    "raw,needle", [c[1:] for c in JSON_VALUE_CASES], ids=[c[0] for c in JSON_VALUE_CASES]
)
def test_json_values_no_config_holds(fmt, where, raw, needle):
    key = {"ours": "rope_theta", "hf": "rope_theta"}[fmt]
    base = OURS if fmt == "ours" else HF
    text = {
        "top": _with(base, key, raw),
        "nested": _with(base, "rope_parameters" if fmt == "hf" else key, '{"a": ' + raw + "}"),
        "in-list": _with(base, "eos_token_id" if fmt == "hf" else key, "[1, " + raw + "]"),
    }[where]
    with pytest.raises(ConfigError) as info:
        parse_config_json(text, source="upload.json")
    message = str(info.value)
    assert needle in message and message.startswith("upload.json: "), message
    assert len(message) < 400  # the digits are never echoed
    path = {
        "top": key,
        "nested": ("rope_parameters" if fmt == "hf" else key) + ".a",
        "in-list": ("eos_token_id" if fmt == "hf" else key) + "[1]",
    }[where]
    assert f"{path}=" in message, message


@pytest.mark.parametrize("key", ['"\\ud800"', '"a\\u0007b"', '"x\\u0000"'])
def test_key_names_must_be_printable_unicode(key):
    with pytest.raises(ConfigError, match="the key .* holds (a lone surrogate|a control character)"):
        parse_config_json("{" + key + ": 1}")


@pytest.mark.parametrize(
    "text,needle",
    [
        ('{"d_model": 64, "d_model": 128}', "key 'd_model' appears twice"),
        (json.dumps(HF)[:-1] + ', "hidden_size": 4096}', "key 'hidden_size' appears twice"),
        ('{"a": ' * 33 + "1" + "}" * 33, "is nested more than 32 levels deep"),
        ("[" * 2_000 + "]" * 2_000, "nested too deeply"),
        ('{"a": ' * 100_000, "not valid JSON|nested too deeply"),
        ("1e400", "beyond the range of a float"),
        ("12345", "must hold a JSON object, got int"),
        ("true", "must hold a JSON object, got bool"),
        ('"\\ud800"', "lone surrogate"),
        ("\x00", "not valid JSON"),
        ('{"d_model": 64}\x00', "not valid JSON"),
    ],
)
def test_json_documents_no_config_is(text, needle):
    with pytest.raises(ConfigError, match=needle):
        parse_config_json(text, source="upload.json")


def test_valid_unicode_and_a_byte_order_mark_are_accepted():
    cfg, _ = parse_config_json("\ufeff" + json.dumps({**HF, "_name_or_path": "Zoë/模型 🦙\t"}))
    assert cfg.d_model == HF["hidden_size"]
    assert parse_config_json(json.dumps(OURS).encode("utf-8"))[0] == PRESETS["debug"]  # bytes too
    with pytest.raises(ConfigError, match=r"upload.json is not UTF-8 text: byte 0xe9 at offset"):
        parse_config_json('{"x": "café"}'.encode("latin-1"), source="upload.json")


# ---- nulls: refused where a value is required, kept where the config class means "unset" --------
def _family_of(cfg):
    from llama_lab.config.families import family_of

    try:
        return family_of(cfg).model_type.name
    except ConfigError:  # a recipe no family expresses (the 2017 one)
        return None


def _family_base(model_type):
    return next(cfg.to_hf_config() for cfg in PRESETS.values() if _family_of(cfg) == model_type)


def _null_cases():
    from llama_lab.config.families import MODEL_TYPES as FAMILIES
    from llama_lab.config.hf.table import COMMON_KEYS, NULL_MEANS_UNSET

    for model_type, family in sorted(FAMILIES.items()):
        for key in sorted(COMMON_KEYS | family.keys):
            # a common key the config class has no field for (Gemma's hidden_act) takes any value;
            # so does one MarianConfig, which has none of the common keys, never reads
            fieldless = key == "hidden_act" and key not in family.defaults
            fieldless |= not family.common and key in COMMON_KEYS - family.reads
            allowed = key in family.nullable or key in NULL_MEANS_UNSET or fieldless
            yield pytest.param(model_type, key, allowed, id=f"{model_type}-{key}")


@pytest.mark.parametrize("model_type,key,allowed", list(_null_cases()))
def test_hf_null_is_refused_where_a_value_is_required(model_type, key, allowed):
    text = json.dumps({**_family_base(model_type), key: None})
    if allowed:
        parse_config_json(text)
        return
    with pytest.raises(ConfigError) as info:
        parse_config_json(text)
    assert str(info.value).startswith(f"{key} is null; ") and "is required" in str(info.value)


def test_hf_null_hidden_size_is_an_error_not_a_default():
    with pytest.raises(ConfigError, match="hidden_size is null; a number is required"):
        parse_config_json(json.dumps({**HF, "hidden_size": None}))
    with pytest.raises(ConfigError, match="num_attention_heads is null; a number is required"):
        parse_config_json(json.dumps({**HF, "num_attention_heads": None}))


def test_hf_nulls_that_mean_unset_read_as_transformers_reads_them():
    mistral = _family_base("mistral")
    assert mistral["sliding_window"]
    assert parse_config_json(json.dumps({**mistral, "sliding_window": None}))[0].sliding_window == 0
    llama = {**HF, "head_dim": None, "num_key_value_heads": None}
    cfg = parse_config_json(json.dumps(llama))[0]
    assert cfg.head_dim == HF["hidden_size"] // HF["num_attention_heads"]
    assert cfg.n_kv_heads == cfg.n_heads
    qwen3_moe = _family_base("qwen3_moe")
    cfg = parse_config_json(json.dumps({**qwen3_moe, "mlp_only_layers": None}))[0]
    assert all(cfg.moe_layer_flags)
    qwen2 = _family_base("qwen2")
    cfg = parse_config_json(json.dumps({**qwen2, "layer_types": None, "use_sliding_window": False}))[0]
    assert not any(cfg.local_layer_flags)


def test_null_policy_matches_the_transformers_config_classes():
    transformers = pytest.importorskip("transformers")
    if int(transformers.__version__.split(".")[0]) < 5:
        pytest.skip("transformers < 5 validates no types")
    # Qwen3MoeConfig takes num_local_experts=null (MixtralConfig num_experts=null, its alias) but
    # is then left with no expert count at all
    # (DeepseekV2Config num_experts=null, its alias of n_routed_experts, likewise); it takes
    # num_experts_per_tok and topk_method null, which its router then cannot run with (top-k of
    # None experts, no top-k method)
    deliberate = {
        ("qwen3_moe", "num_local_experts"),
        ("mixtral", "num_experts"),
        *(("deepseek_v2", key) for key in ("num_experts", "num_experts_per_tok", "topk_method")),
        # DeepseekV3Config likewise takes null for keys its model cannot be built or run without
        *(
            ("deepseek_v3", key)
            for key in (
                "first_k_dense_replace",
                "n_group",
                "topk_group",
                "num_experts_per_tok",
                "num_local_experts",
                "v_head_dim",
            )
        ),
        # GptOssConfig takes a null expert count (no model can be built) and a null window
        # (its forward raises on every call, full layers too)
        ("gpt_oss", "num_experts"),
        ("gpt_oss", "sliding_window"),
        # Gemma2Config and Gemma3TextConfig take a null window too; their forward raises likewise
        ("gemma2", "sliding_window"),
        ("gemma3_text", "sliding_window"),
        ("olmo3", "sliding_window"),  # Olmo3Config likewise (its sliding mask raises)
        # MarianConfig takes a null alias (hidden_size, num_attention_heads, num_hidden_layers),
        # which nulls d_model, encoder_attention_heads or encoder_layers: no model can be built
        *(("marian", key) for key in ("hidden_size", "num_attention_heads", "num_hidden_layers")),
        # the config classes without a head_dim field keep a null one as an attribute, which
        # their attention then takes (no projection can be built); Glm4MoeConfig's alias of
        # n_routed_experts takes null likewise
        *((mt, "head_dim") for mt in ("olmo2", "olmo3", "smollm3", "phi3", "glm4_moe", "granite")),
        ("glm4_moe", "num_local_experts"),
        ("deepseek_v32", "num_local_experts"),  # DeepseekV32Config's alias likewise
        # Mistral4Config takes DeepSeek-V3's nulls, which its model cannot run with either
        *(
            ("mistral4", key)
            for key in (
                "first_k_dense_replace",
                "n_group",
                "topk_group",
                "num_experts_per_tok",
                "num_local_experts",
                "v_head_dim",
            )
        ),
    }
    for param in _null_cases():
        model_type, key, allowed = param.values
        data = {**_family_base(model_type), key: None}
        try:
            transformers.CONFIG_MAPPING[model_type].from_dict(data)
            theirs = True
        except Exception:  # noqa: BLE001 - strict dataclass
            theirs = False
        assert allowed == theirs or (model_type, key) in deliberate, (model_type, key, allowed)


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(ModelConfig)])
def test_our_format_null_is_refused_unless_the_field_derives(name):
    optional = name in NULLABLE  # None: follow the field's rule (rope_scaling: plain RoPE)
    text = json.dumps({**OURS, name: None})
    if optional:
        assert parse_config_json(text)[0] == ModelConfig.from_dict({**OURS, name: None})
        return
    with pytest.raises(ConfigError, match=rf"^{name} is null; (a number|true or false|a string) is required"):
        parse_config_json(text)


# ---- many keys, long keys: few notes, short messages, fast --------------------------------------
@pytest.mark.parametrize("fmt", ["ours", "hf"])
def test_sixty_thousand_unknown_keys_give_one_short_message_fast(fmt):
    doc = dict(OURS if fmt == "ours" else HF)
    doc.update({f"x{i}": i for i in range(60_000)})  # 0.8 MB: under the size cap
    text = json.dumps(doc)
    start = time.perf_counter()
    if fmt == "ours":  # our format has no key to ignore: refused
        with pytest.raises(ConfigError) as info:
            parse_config_json(text)
        message = str(info.value)
    else:  # a key LlamaForCausalLM never reads: one note
        _, notes = parse_config_json(text)
        (message,) = [note for note in notes if "not read by" in note]
    assert time.perf_counter() - start < 5
    assert "'x0', 'x1', 'x10', 'x100', 'x1000' and 59,995 more" in message, message
    assert len(message) < 1_500


@pytest.mark.parametrize("fmt", ["ours", "hf"])
def test_a_megabyte_key_name_is_cut_in_the_message(fmt):
    key = "k" * 900_000
    text = json.dumps({**(OURS if fmt == "ours" else HF), key: 1})
    if fmt == "ours":
        with pytest.raises(ConfigError) as info:
            parse_config_json(text)
        message = str(info.value)
    else:  # not read by the model: a note, cut the same way
        message = " ".join(parse_config_json(text)[1])
    assert "k" * 60 + "'…" in message and len(message) < 1_500


def test_notes_are_capped_and_each_is_cut():
    from llama_lab.config.messages import MAX_NOTES, cap_notes

    notes = cap_notes([f"note {i}" for i in range(60_000)])
    assert len(notes) == MAX_NOTES + 1 and notes[-1] == "… and 59,995 more notes"
    assert cap_notes(["x" * 10_000])[0].endswith("…") and len(cap_notes(["x" * 10_000])[0]) < 310
    llama3 = {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192}
    llama3 |= {"low_freq_factor": 1.0, "high_freq_factor": 4.0}
    huge_scaling = {**llama3, **{f"k{i}": i for i in range(50_000)}}  # keys llama3 never reads
    _, notes = parse_config_json(json.dumps({**HF, "rope_scaling": huge_scaling}))
    assert len(notes) == 1 and len(notes[0]) < 400 and "rope_scaling" in notes[0]


QUERY_CASES = [
    ("unknown-preset", {"preset": "llama-99"}, "unknown preset 'llama-99'"),
    ("bad-heads", {"preset": "seed-demo", "n_kv_heads": "3"}, "not divisible by n_kv_heads=3"),
    ("word-layers", {"preset": "seed-demo", "n_layers": "lots"}, "n_layers='lots' must be an integer"),
    ("huge-layers", {"preset": "seed-demo", "n_layers": "1000000000"}, "exceeds the upper bound"),
    ("bad-choice", {"preset": "seed-demo", "norm_type": "batchnorm"}, "norm_type='batchnorm'"),
    ("negative-seq", {"preset": "seed-demo", "seq": "-4"}, "must be between 1 and"),
    ("seq-beyond-model", {"preset": "seed-demo", "seq": "100000"}, "must be between 1 and 128"),
    ("bad-dtype", {"preset": "seed-demo", "dtype": "fp64"}, "dtype='fp64' must be one of"),
]


@pytest.mark.parametrize("query,needle", [c[1:] for c in QUERY_CASES], ids=[c[0] for c in QUERY_CASES])
def test_url_query_bad_input(query, needle):
    from llama_lab.ui.state import QUERY_BATCH, QUERY_DTYPE, QUERY_PRESET, QUERY_SEQ, values_from_query

    names = {"preset": QUERY_PRESET, "seq": QUERY_SEQ, "batch": QUERY_BATCH, "dtype": QUERY_DTYPE}
    query = {names.get(k, k): v for k, v in query.items()}
    values, errors = values_from_query(query)
    assert errors and any(needle in e for e in errors), errors
    assert values  # a usable fallback view is always returned


# ---- --set and URL values: the same checks as a file's values -----------------------------------
OVERRIDE_CASES = [
    ("int-30-digits", "d_model=" + "9" * 30, "d_model='999999999999999999999999'… has 30 digits"),
    ("int-5000-digits", "n_layers=" + "1" * 5000, "is 5,000 characters long; a value has at most 200"),
    ("nan", "rope_theta=nan", "rope_theta=nan must be a finite number (NaN and infinity are refused)"),
    ("NaN", "norm_eps=NaN", "norm_eps=NaN must be a finite number"),
    ("inf", "rope_theta=inf", "rope_theta=inf must be a finite number"),
    ("minus-infinity", "rope_theta=-Infinity", "rope_theta=-Infinity must be a finite number"),
    ("float-overflow", "rope_theta=1e400", "rope_theta=1e400 must be a finite number (it is beyond"),
    ("float-401-digits", "rope_theta=1" + "0" * 100 + ".0", "must be a number (at most 64 characters"),
    ("hex", "rope_theta=0x10", "rope_theta='0x10' must be a number"),
    ("null-int", "d_model=null", "d_model='null' is null; a number is required (only head_dim"),
    ("none-bool", "bias=None", "bias='None' is null; true or false is required"),
    ("empty-int", "n_layers=", "n_layers= is empty; a number is required"),
    ("empty-choice", "norm_type=", "norm_type= is empty; a string is required"),
    ("unicode-digits", "d_model=١٢٨", "d_model='١٢٨' must be an integer"),
    ("fullwidth-digits", "d_model=５１２", "d_model='５１２' must be an integer"),
    ("escape", "norm_type=rms\x1b[2Jnorm", "holds the control character or lone surrogate '\\x1b'"),
    ("nul", "pos_encoding=rope\x00", "holds the control character or lone surrogate '\\x00'"),
    ("surrogate", "init=\ud800", "holds the control character or lone surrogate '\\ud800'"),
    ("long-layer-list", "local_layers=" + ",".join(["1"] * 500), "is 999 characters long"),
    ("long-field-name", "x" * 10_000 + "=1", "unknown config field 'xxxxxxxx"),
]


@pytest.mark.parametrize(
    "override,needle", [c[1:] for c in OVERRIDE_CASES], ids=[c[0] for c in OVERRIDE_CASES]
)
def test_set_override_values_are_checked(override, needle):
    from llama_lab.config import apply_overrides

    with pytest.raises(ConfigError) as info:
        apply_overrides(PRESETS["debug"], [override])
    assert needle in str(info.value) and len(str(info.value)) < 600, str(info.value)


def test_set_overrides_that_are_fine():
    from llama_lab.config import apply_overrides

    cfg = apply_overrides(
        PRESETS["debug"],
        ["head_dim=auto", "rope_theta=5e5", "n_layers=+3", "vocab_size=1_024", "norm_eps= 1e-5 "],
    )
    assert (cfg.n_layers, cfg.vocab_size, cfg.rope_theta, cfg.norm_eps) == (3, 1024, 5e5, 1e-5)


@pytest.mark.parametrize(
    "value,needle",
    [
        ("9" * 40, "has 40 digits"),
        ("nan", "must be a finite number"),
        ("\x1b]8;;x\x07", "control character"),
        ("null", "is null"),
    ],
)
def test_url_values_are_checked_like_set(value, needle):
    from llama_lab.ui.state import values_from_query

    field = "rope_theta" if value == "nan" else "n_layers"
    _, errors = values_from_query({field: value})
    assert errors and needle in errors[0], errors


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from([f.name for f in dataclasses.fields(ModelConfig)]), value=st.text(max_size=40))
def test_any_override_text_gives_a_config_or_a_config_error(name, value):
    from llama_lab.config import apply_overrides

    try:
        apply_overrides(PRESETS["debug"], [f"{name}={value}"])
    except ConfigError as exc:
        assert len(str(exc)) < 2_000


TEXT_CASES = [
    ("latin-1", "café au lait ".encode("latin-1") * 100, "not UTF-8"),
    ("empty", b"", "is empty"),
    ("too-short", b"hello", "at least 1,000"),
    ("oversized", b"a" * 2_000, "the limit is 1,500 bytes"),  # with max_bytes=1,500 below
    ("binary", bytes(range(256)) * 5, "not UTF-8"),
]


@pytest.mark.parametrize("raw,needle", [c[1:] for c in TEXT_CASES], ids=[c[0] for c in TEXT_CASES])
def test_uploaded_text_bad_input(raw, needle):
    with pytest.raises(ConfigError) as info:
        data.load_user_text(raw, max_bytes=1_500, name="notes.txt")
    assert needle in str(info.value)


# ---- property: any config either analyses or raises ConfigError, never anything else ----------
ANY_VALUE = st.one_of(
    st.integers(-10, 70_000),
    st.integers(),
    st.floats(allow_nan=True),
    st.booleans(),
    st.none(),
    st.text(max_size=8),
    st.sampled_from(
        [
            "pre",
            "post",
            "rmsnorm",
            "layernorm",
            "rope",
            "sinusoidal",
            "learned",
            "none",
            "swiglu",
            "relu",
            "gelu",
            "normal",
            "xavier",
        ]
    ),
)
SMALL_INT = st.integers(1, 64)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fields=st.fixed_dictionaries(
        {},
        optional={
            "vocab_size": st.one_of(SMALL_INT, ANY_VALUE),
            "d_model": st.one_of(SMALL_INT, ANY_VALUE),
            "n_layers": st.one_of(SMALL_INT, ANY_VALUE),
            "n_heads": st.one_of(SMALL_INT, ANY_VALUE),
            "n_kv_heads": st.one_of(SMALL_INT, ANY_VALUE),
            "ffn_hidden": st.one_of(SMALL_INT, ANY_VALUE),
            "max_seq_len": st.one_of(SMALL_INT, ANY_VALUE),
            "norm_position": ANY_VALUE,
            "norm_type": ANY_VALUE,
            "pos_encoding": ANY_VALUE,
            "ffn_type": ANY_VALUE,
            "bias": ANY_VALUE,
            "final_norm": ANY_VALUE,
            "tie_embeddings": ANY_VALUE,
            "init": ANY_VALUE,
            "rope_theta": ANY_VALUE,
            "norm_eps": ANY_VALUE,
        },
    ),
    seq_len=st.integers(1, 1 << 20),
    batch=st.integers(1, 4096),
    dtype=st.sampled_from(["fp32", "bf16", "fp16"]),
)
def test_any_config_analyses_or_raises_config_error(fields, seq_len, batch, dtype):
    try:
        cfg = ModelConfig(**fields)
    except ConfigError:
        return
    result = analyze(cfg, seq_len=seq_len, batch=batch, dtype=dtype)
    assert result["params"]["total"] > 0 and math.isfinite(result["flops"]["forward"])
    json.dumps(result, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(
    doc=st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=6),
        max_leaves=20,
    )
)
def test_any_json_document_parses_or_raises_config_error(doc):
    try:
        parse_config_json(json.dumps(doc))
    except ConfigError:
        pass


JSON_VALUE = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True)
    | st.text(max_size=6)
    | st.sampled_from(["silu", "full_attention", "sliding_attention", "default"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    model_type=st.sampled_from(
        ["llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "gemma2", "gemma3_text"]
    ),
    data=st.data(),
)
def test_any_value_of_any_read_key_of_any_family_parses_or_raises_config_error(model_type, data):
    from llama_lab.config.families import MODEL_TYPES as FAMILIES
    from llama_lab.config.hf.table import COMMON_KEYS

    keys = sorted(COMMON_KEYS | FAMILIES[model_type].keys)
    changes = data.draw(
        st.dictionaries(st.sampled_from(keys), JSON_VALUE | st.integers(-3, 80), min_size=1, max_size=3)
    )
    doc = {**_family_base(model_type), **changes}
    try:
        cfg, notes = parse_config_json(json.dumps(doc))
    except ConfigError as exc:
        assert len(str(exc)) < 2_000
        return
    assert len(notes) <= 6 and cfg.n_layers >= 1


def test_memory_guard_refuses_oversized_live_run_without_allocating():
    from llama_lab.errors import ExperimentError
    from llama_lab.experiments import live_pass

    with pytest.raises(ExperimentError, match="free"):
        live_pass(PRESETS["llama-3.1-405b"], 128, 1, LiveSettings(device="cpu"))


def test_decoding_past_max_seq_len_is_refused():
    m = build_model(PRESETS["debug"])
    with pytest.raises(ValueError, match="exceeds max_seq_len"):
        m.generate(torch.zeros(1, 60, dtype=torch.long), max_new_tokens=10)


# ---- numbers and terminal output (issue 11) ------------------------------------------------------
def test_json_output_is_strict_even_with_nan(monkeypatch, capsys):
    """NaN and ±inf become null, each named with its reason under "non_finite"."""
    import json as json_mod

    from llama_lab import experiments

    monkeypatch.setattr(
        experiments,
        "bench",
        lambda *a, **k: {
            "mfu": float("nan"),
            "tokens_per_s": float("inf"),
            "nested": {"x": [1.0, float("-inf")]},
            "device": "cpu",
        },
    )
    assert main(["bench", "--preset", "debug", "--steps", "1", "--json"]) == 0
    out = capsys.readouterr().out
    parsed = json_mod.loads(out, parse_constant=lambda c: pytest.fail(f"{c} is not JSON"))
    assert parsed["mfu"] is None and parsed["tokens_per_s"] is None
    assert parsed["nested"]["x"] == [1.0, None]
    assert set(parsed["non_finite"]) == {"mfu", "tokens_per_s", "nested.x[1]"}
    assert "was nan" in parsed["non_finite"]["mfu"]


@pytest.mark.parametrize("hostile", ["\x1b[31mred\x1b[0m", "a\u202eb", "bell\x07", "\x9b2J"])
def test_terminal_output_strips_control_characters(capsys, hostile):
    code = main(["analyze", "--preset", "debug", "--set", f"norm_type={hostile}"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error:")
    assert not any(ch in err for ch in "\x1b\u202e\x07\x9b")


@pytest.mark.parametrize("target", ["fifo", "folder", "loop", "/dev/null"])
def test_report_output_must_be_a_regular_file(tmp_path, capsys, target):
    path = {"fifo": tmp_path / "pipe", "folder": tmp_path, "loop": tmp_path / "loop"}.get(
        target, Path(target)
    )
    if target == "fifo":
        os.mkfifo(path)
    if target == "loop":
        os.symlink(path, path)
    start = time.monotonic()
    assert main(["report", "--preset", "debug", "-o", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot write" in err[0]
    assert time.monotonic() - start < 5  # refused before the report is built


def test_a_nan_loss_names_the_step_and_the_likely_cause():
    from llama_lab.train.divergence import divergence_reason

    reason = divergence_reason(float("nan"), float("nan"), 7, 3.0, 3.0, lr=5.0)
    assert "at step 7" in reason and "learning rate 5 is far too high" in reason
    assert "fp16 overflowed" in divergence_reason(float("inf"), 1.0, 3, 3.0, 3.0, dtype="fp16")
    assert "before any update" in divergence_reason(float("nan"), 1.0, 0, None, 3.0)


@pytest.mark.parametrize(
    "options,rule",
    [
        ({"lr": 1e38}, "lr=1e+38 must be a finite number > 0 and ≤ 10"),
        ({"lr": float("nan")}, "lr=nan must be a finite number"),
        ({"seed": 10**20}, "seed=100000000000000000000 must be an integer from 0 to 2,147,483,647"),
        ({"steps": 10**18}, "must be an integer from 1 to 1,000,000"),
        ({"warmup_steps": -1}, "warmup_steps=-1 must be an integer from 0"),
        ({"grad_clip": 0.0}, "grad_clip=0.0 must be a finite number > 0"),
    ],
)
def test_training_settings_out_of_range_are_refused_with_the_rule(options, rule):
    from llama_lab.errors import ExperimentError
    from llama_lab.train import train

    settings = {"steps": 2, "lr": 1e-3, **options}
    with pytest.raises(ExperimentError) as info:
        train(
            PRESETS["debug"],
            TrainSettings(steps=settings.pop("steps"), lr=settings.pop("lr"), seq_len=8, batch=2, **settings),
        )
    assert rule in str(info.value)


# ---- hostile values that used to escape as Python errors ------------------------------------------
@pytest.mark.parametrize("name", ["rope_theta", "norm_eps"])
def test_an_integer_beyond_every_float_is_refused_naming_the_field(name):
    with pytest.raises(ConfigError, match=rf"^{name}=<an integer of about 401 digits> is beyond") as info:
        ModelConfig(**{name: 10**400})
    assert info.value.field == name


def test_training_without_validation_batches_is_refused_naming_the_setting():
    from llama_lab.errors import ExperimentError
    from llama_lab.train import train

    with pytest.raises(ExperimentError, match="eval_batches=0 must be an integer from 1"):
        train(PRESETS["debug"], TrainSettings(steps=2, seq_len=8, batch=2, eval_batches=0))


def test_a_depth_sweep_whose_last_gradient_is_zero_says_why_it_has_no_slope(monkeypatch):
    from types import SimpleNamespace

    from llama_lab.errors import ExperimentError
    from llama_lab.experiments import depth

    def fake(cfg, *args, **kwargs):  # the last block gets no gradient at depth 4
        arm = SimpleNamespace(ffn_out_grad_norm=[1.0, 0.0 if cfg.n_layers == 4 else 0.5])
        return SimpleNamespace(
            arms=lambda position: [arm], last_ratio_by_seed=lambda: [1.0], seeds=(0,), data="random"
        )

    monkeypatch.setattr(depth, "gradnorms_over_seeds", fake)
    with pytest.raises(
        ExperimentError, match=r"is 0 or not finite at depth L=4 .*slope against depth is undefined"
    ):
        depth.depth_sweep(PRESETS["debug"], depths=(2, 4))


def test_counts_in_messages_are_singular_for_one():
    from llama_lab.units import each_of, plural

    assert (plural(1, "training step"), plural(2, "seed"), plural(2000, "step")) == (
        "1 training step",
        "2 seeds",
        "2,000 steps",
    )
    assert (plural(1, "entry", "entries"), plural(3, "entry", "entries")) == ("1 entry", "3 entries")
    assert (each_of(1, "layer"), each_of(4, "layer")) == ("the one layer", "each of the 4 layers")


def test_counts_of_one_read_singular_in_figures_notes_and_messages(capsys):
    """MQA's one KV head, a one-layer model, one new token: no "1 KV heads" anywhere."""
    from llama_lab.analysis import kv_cache
    from llama_lab.analysis.summary import family_notes
    from llama_lab.experiments.decode import decode_benchmark
    from llama_lab.figures.kv import kv_memory_curve_frame, kv_memory_vs_context, kv_sharing_diagram
    from llama_lab.figures.rooflines import roofline_figure, roofline_points
    from llama_lab.runtime.hardware import GPUS

    cfg = PRESETS["seed-demo"]
    curve = kv_memory_vs_context(kv_memory_curve_frame(cfg, (128, 1024), 1, "bf16"))
    assert [t.name for t in curve.data if t.name and "MQA" in t.name] == ["MQA (1 KV head)"]
    roof = roofline_figure(roofline_points(cfg, GPUS["H100 80GB"], (1, 8), 1024, "bf16"), GPUS["H100 80GB"])
    assert "MQA (1 KV head)" in [t.name for t in roof.data]
    assert kv_sharing_diagram(8, 1).layout.title.text == "MQA: 8 query heads share 1 KV head (8 per KV head)"
    assert kv_sharing_diagram(1, 1).layout.title.text == "MHA: 1 query head shares 1 KV head (1 per KV head)"
    one = PRESETS["mistral-7b"].replace(n_layers=1)  # one sliding-window layer
    notes = " ".join(family_notes(one)) + " " + kv_cache(one, 8192, 1).note
    assert "1 of 1 block lets each query see" in notes and "1 of 1 layer holds at most its window" in notes
    assert " 1 blocks" not in notes and " 1 layers" not in notes
    with pytest.raises(ValueError, match=r"context 64 \+ 1 new token exceeds max_seq_len=64"):
        decode_benchmark(PRESETS["debug"], context_lens=(64,), new_tokens=1)
    assert (
        main(["bench", "--preset", "tinyllama-1.1b", "--steps", "1", "--seq-len", "2048", "--batch", "64"])
        == 2
    )
    assert "1 timed step (and a warm-up) needs about" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["rope_theta", "rope_local_theta"])
@pytest.mark.parametrize("value", [1e-300, 1e-39, 0.0, 1e39, float("inf")])
def test_a_rope_base_float32_cannot_hold_is_refused_naming_the_rule(capsys, name, value):
    # 1e-300 is 0 in float32: RoPE's inverse frequencies base^(-2i/d) are infinite, the
    # angles' cos/sin NaN, and so the first loss
    rule = "^" + re.escape(f"{name}={value} must ") + r"(lie in float32's range|be a finite number)"
    with pytest.raises(ConfigError, match=rule) as info:
        PRESETS["debug"].replace(**{name: value})
    assert info.value.field == name and "\n" not in str(info.value)
    for held in (0.5, 1.2e-38, 3.4e38):  # SPEC: any float > 0 that the frequencies can use
        assert getattr(PRESETS["debug"].replace(**{name: held}), name) == held
    assert main(["analyze", "--preset", "debug", "--set", f"{name}={value}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{name}=" in err[0] and ("float32" in err[0] or "finite" in err[0]), err


def test_a_nan_before_any_update_is_not_blamed_on_the_learning_rate():
    from llama_lab.train import train
    from llama_lab.train.data import load_builtin

    # a base ModelConfig refuses (the test above), forced past the check: RoPE's frequencies
    # overflow float32 and the very first loss is NaN
    cfg = PRESETS["debug"].replace()
    object.__setattr__(cfg, "rope_theta", 1e-300)
    run = train(cfg, TrainSettings(steps=3, seq_len=16, batch=2), data=load_builtin())
    assert run.diverged and run.divergence_step == 0
    assert "before any update" in run.divergence_reason and "rope_theta" in run.divergence_reason
    assert "learning rate" not in run.hint.split(";")[0] and "rope_theta=1e-300" in run.hint
