"""Issue 6: every way bad input can enter gets one clear message naming the rule broken.

Each row: (id, entry point, input, a substring the message must contain). Entry points are the
CLI (exit 2, one line on stderr), config files, uploaded config.json text, URL query values,
uploaded training text and local checkpoint folders.
"""
import json
import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llama_lab.train import data
from llama_lab.analysis import analyze
from llama_lab.cli import main
from llama_lab.config import PRESETS, ConfigError, ModelConfig, parse_config_json
from llama_lab.model import build_model, load_checkpoint

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
    ("set-odd-rope", ["analyze", "--set", "d_model=24", "--set", "n_heads=8", "--set", "n_kv_heads=8"],
     "must be even for pos_encoding='rope'"),
    ("unknown-preset", ["analyze", "--preset", "gpt-5"], "unknown preset 'gpt-5'"),
    ("zero-seq", ["analyze", "--seq-len", "0"], "must be at least 1"),
    ("word-batch", ["analyze", "--batch", "many"], "'many' is not an integer"),
    ("bad-dtype", ["analyze", "--dtype", "fp64"], "invalid choice: 'fp64'"),
    ("bad-device", ["bench", "--device", "tpu"], "invalid choice: 'tpu'"),
    ("negative-lr", ["train", "--lr", "-0.1"], "must be > 0.0"),
    ("nan-lr", ["train", "--lr", "nan"], "must be > 0.0"),
    ("negative-warmup", ["train", "--warmup", "-5"], "must be at least 0"),
    ("missing-data-file", ["train", "--preset", "debug", "--data", "/no/such.txt"], "--data '/no/such.txt' does not exist"),
    ("endless-data-file", ["train", "--preset", "debug", "--data", "/dev/zero"], "larger than the limit of 20,000,000 bytes"),
    ("folder-as-data", ["train", "--preset", "debug", "--data", "/"], "is a folder, not a file"),
    ("unknown-command", ["serve"], "invalid choice: 'serve'"),
    ("fp16-on-cpu", ["bench", "--preset", "debug", "--device", "cpu", "--dtype", "fp16"], "fp16"),
    ("oversized-live-run", ["bench", "--preset", "llama-3.1-405b", "--device", "cpu"], "free"),
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
    ("nan-size", '{"d_model": NaN}', "d_model=nan must be an integer"),
    ("bool-size", '{"n_layers": true}', "n_layers=True must be an integer"),
    ("float-size", '{"n_layers": 4.0}', "n_layers=4.0 must be an integer"),
    ("hf-missing-keys", '{"hidden_size": 64}', "lacks required key"),
    ("hf-bad-heads", json.dumps({**HF, "num_key_value_heads": 3}), "not divisible by n_kv_heads=3"),
    ("hf-zero-vocab", json.dumps({**HF, "vocab_size": 0}), "vocab_size=0 must be at least 2"),
    ("hf-string-layers", json.dumps({**HF, "num_hidden_layers": "two"}), "n_layers='two' must be an integer"),
    ("hf-negative-eps", json.dumps({**HF, "rms_norm_eps": -1}), "norm_eps=-1"),
    ("hf-list-instead-of-number", json.dumps({**HF, "hidden_size": [64]}), "d_model=[64] must be an integer"),
    ("hf-huge-context", json.dumps({**HF, "max_position_embeddings": 10**12}), "max_seq_len=1000000000000 exceeds"),
    ("hf-infinite-width", json.dumps(HF).replace('"hidden_size": 64', '"hidden_size": 1e400'), "d_model=inf must be an integer"),
    ("hf-string-bias", json.dumps({**HF, "attention_bias": "yes"}), "attention_bias='yes' must be true or false"),
    ("ours-infinite-theta", '{"rope_theta": 1e400}', "rope_theta=inf must be a finite number"),
]


@pytest.mark.parametrize("text,needle", [c[1:] for c in CONFIG_TEXT_CASES], ids=[c[0] for c in CONFIG_TEXT_CASES])
def test_config_text_bad_input(text, needle):
    with pytest.raises(ConfigError) as info:
        parse_config_json(text, source="upload.json")
    assert needle in str(info.value)


def test_config_file_paths(tmp_path, capsys):
    latin = tmp_path / "latin.json"
    latin.write_bytes('{"d_model": "café"}'.encode("latin-1"))
    folder = tmp_path / "folder.json"
    folder.mkdir()
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 1_000_001)
    for path, needle in [(latin, "is not UTF-8 text"), (folder, "is a folder, not a file"),
                         (big, "larger than the limit of 1,000,000 bytes"),
                         ("/dev/zero", "larger than the limit of 1,000,000 bytes"),
                         (tmp_path / "none.json", "does not exist")]:
        assert main(["analyze", "--config", str(path)]) == 2
        err = capsys.readouterr().err
        assert needle in err and len(err.strip().splitlines()) == 1


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
    from llama_lab.ui import QUERY_BATCH, QUERY_DTYPE, QUERY_PRESET, QUERY_SEQ, values_from_query
    names = {"preset": QUERY_PRESET, "seq": QUERY_SEQ, "batch": QUERY_BATCH, "dtype": QUERY_DTYPE}
    query = {names.get(k, k): v for k, v in query.items()}
    values, errors = values_from_query(query)
    assert errors and any(needle in e for e in errors), errors
    assert values                       # a usable fallback view is always returned


TEXT_CASES = [
    ("latin-1", "café au lait ".encode("latin-1") * 100, "not UTF-8"),
    ("empty", b"", "is empty"),
    ("too-short", b"hello", "at least 1,000"),
    ("oversized", b"a" * 2_000, "the limit is 1,500 bytes"),          # with max_bytes=1,500 below
    ("binary", bytes(range(256)) * 5, "not UTF-8"),
]


@pytest.mark.parametrize("raw,needle", [c[1:] for c in TEXT_CASES], ids=[c[0] for c in TEXT_CASES])
def test_uploaded_text_bad_input(raw, needle):
    with pytest.raises(ConfigError) as info:
        data.load_user_text(raw, max_bytes=1_500, name="notes.txt")
    assert needle in str(info.value)


def _checkpoint(folder, cfg=PRESETS["debug"].replace(norm_eps=1e-5)):
    from safetensors.torch import save_file
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg.to_hf_config()))
    save_file({k: v.contiguous() for k, v in build_model(cfg).state_dict().items()},
              str(folder / "model.safetensors"))
    return folder


def test_checkpoint_folders_bad_input(tmp_path):
    cases = []
    cases.append((tmp_path / "nothing", "does not exist"))
    no_config = tmp_path / "no_config"
    no_config.mkdir()
    cases.append((no_config, "has no config.json"))
    truncated = _checkpoint(tmp_path / "truncated")
    blob = (truncated / "model.safetensors").read_bytes()
    (truncated / "model.safetensors").write_bytes(blob[: len(blob) // 2])
    cases.append((truncated, "not a readable safetensors file"))
    bad_index = _checkpoint(tmp_path / "bad_index")
    (bad_index / "model.safetensors.index.json").write_text('{"weight_map": {"a": "../../etc/passwd"}}')
    cases.append((bad_index, "must be .safetensors files in the same folder"))
    pickle_only = tmp_path / "pickle_only"
    pickle_only.mkdir()
    (pickle_only / "config.json").write_text(json.dumps(HF))
    (pickle_only / "pytorch_model.bin").write_bytes(b"\x80\x04")
    cases.append((pickle_only, "pickle checkpoints are never loaded"))
    bad_config = _checkpoint(tmp_path / "bad_config")
    (bad_config / "config.json").write_text("{oops")
    cases.append((bad_config, "not valid JSON"))
    for folder, needle in cases:
        with pytest.raises(ConfigError) as info:
            load_checkpoint(folder)
        assert needle in str(info.value), (folder, info.value)


# ---- property: any config either analyses or raises ConfigError, never anything else ----------
ANY_VALUE = st.one_of(st.integers(-10, 70_000), st.integers(), st.floats(allow_nan=True),
                      st.booleans(), st.none(), st.text(max_size=8),
                      st.sampled_from(["pre", "post", "rmsnorm", "layernorm", "rope", "sinusoidal",
                                       "learned", "none", "swiglu", "relu", "gelu", "normal", "xavier"]))
SMALL_INT = st.integers(1, 64)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fields=st.fixed_dictionaries({}, optional={
    "vocab_size": st.one_of(SMALL_INT, ANY_VALUE), "d_model": st.one_of(SMALL_INT, ANY_VALUE),
    "n_layers": st.one_of(SMALL_INT, ANY_VALUE), "n_heads": st.one_of(SMALL_INT, ANY_VALUE),
    "n_kv_heads": st.one_of(SMALL_INT, ANY_VALUE), "ffn_hidden": st.one_of(SMALL_INT, ANY_VALUE),
    "max_seq_len": st.one_of(SMALL_INT, ANY_VALUE), "norm_position": ANY_VALUE,
    "norm_type": ANY_VALUE, "pos_encoding": ANY_VALUE, "ffn_type": ANY_VALUE, "bias": ANY_VALUE,
    "final_norm": ANY_VALUE, "tie_embeddings": ANY_VALUE, "init": ANY_VALUE,
    "rope_theta": ANY_VALUE, "norm_eps": ANY_VALUE}),
    seq_len=st.integers(1, 1 << 20), batch=st.integers(1, 4096),
    dtype=st.sampled_from(["fp32", "bf16", "fp16"]))
def test_any_config_analyses_or_raises_config_error(fields, seq_len, batch, dtype):
    try:
        cfg = ModelConfig(**fields)
    except ConfigError:
        return
    result = analyze(cfg, seq_len=seq_len, batch=batch, dtype=dtype)
    assert result["params"]["total"] > 0 and math.isfinite(result["flops"]["forward"])
    json.dumps(result, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(doc=st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=6),
                        max_leaves=20))
def test_any_json_document_parses_or_raises_config_error(doc):
    try:
        parse_config_json(json.dumps(doc))
    except ConfigError:
        pass


def test_memory_guard_refuses_oversized_live_run_without_allocating():
    from llama_lab.errors import ExperimentError
    from llama_lab.experiments import live_pass
    with pytest.raises(ExperimentError, match="free"):
        live_pass(PRESETS["llama-3.1-405b"], seq_len=128, batch=1, device="cpu")


def test_decoding_past_max_seq_len_is_refused():
    m = build_model(PRESETS["debug"])
    with pytest.raises(ValueError, match="exceeds max_seq_len"):
        m.generate(torch.zeros(1, 60, dtype=torch.long), max_new_tokens=10)


def test_checkpoint_too_big_for_memory_is_refused_before_reading(tmp_path, monkeypatch):
    from llama_lab.runtime import memory
    folder = _checkpoint(tmp_path / "ok")
    monkeypatch.setattr(memory, "free_memory_bytes", lambda device: 1_000)
    with pytest.raises(ValueError, match="loading ok needs about .* but only .* is free"):
        load_checkpoint(folder)
