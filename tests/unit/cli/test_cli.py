import json
import subprocess
import sys

import pytest

from llama_lab.cli import main
from llama_lab.config import PRESETS
from llama_lab.validation.efficiency import Efficiency


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_presets_lists_every_name(capsys):
    code, out, _ = run(capsys, "presets", "--json")
    assert code == 0 and set(json.loads(out)) == set(PRESETS)
    code, out, _ = run(capsys, "presets")
    assert code == 0 and all(name in out for name in PRESETS)


def test_analyze_json_has_spec_keys(capsys):
    code, out, _ = run(capsys, "analyze", "--preset", "llama-2-70b", "--seq-len", "4096", "--json")
    assert code == 0
    r = json.loads(out)
    assert r["params"]["total"] == 68_976_648_192
    assert set(r["params"]["by_component"]) >= {"embedding", "attention", "ffn", "norms", "lm_head"}
    assert (
        sum(r["params"]["by_component"][k] for k in ("embedding", "attention", "ffn", "norms", "lm_head"))
        == r["params"]["total"]
    )
    assert set(r["flops"]["by_component"]) >= {"attention_proj", "attention_scores", "ffn", "lm_head"}
    assert r["flops"]["training_step"] == 3 * r["flops"]["forward"]
    # bf16, 80 layers × 8 KV heads × 128 dims × 2 (K and V) × 2 bytes
    assert r["kv_cache"]["bytes_per_token"] == 80 * 8 * 128 * 2 * 2 == 327_680
    assert r["kv_cache"]["bytes"] == 327_680 * 4096
    assert r["kv_cache"]["compare"]["mha"] == 8 * 327_680
    assert r["kv_cache"]["compare"]["mqa"] == 327_680 // 8


def test_analyze_overrides_and_hf_config_file(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(PRESETS["llama-3-8b"].to_hf_config()))
    code, out, _ = run(capsys, "analyze", "--config", str(path), "--json", "--seq-len", "128")
    assert code == 0 and json.loads(out)["params"]["total"] == 8_030_261_248
    code, out, _ = run(capsys, "analyze", "--config", str(path), "--set", "tie_embeddings=true", "--json")
    assert json.loads(out)["params"]["total"] == 8_030_261_248 - 128256 * 4096


def test_analyze_table_is_readable(capsys):
    code, out, _ = run(capsys, "analyze", "--preset", "seed-demo")
    assert code == 0 and "43,780,608" in out


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["analyze", "--set", "n_kv_heads=3"], "n_heads=8 is not divisible by n_kv_heads=3"),
        (["analyze", "--preset", "llama-9"], "unknown preset 'llama-9'"),
        (["analyze", "--set", "n_layers=1000000000"], "n_layers=1000000000 exceeds"),
        (["analyze", "--seq-len", "-3"], "--seq-len"),
        (["analyze", "--set", "colour=blue"], "unknown config field 'colour'"),
        (["analyze", "--config", "/no/such/file.json"], "does not exist"),
        (["analyze", "--preset", "debug", "--config", "x.json"], "not allowed with"),
        (["frobnicate"], "invalid choice"),
        (["bench", "--steps", "zero"], "is not an integer"),
    ],
)
def test_errors_are_one_line_exit_2(capsys, argv, needle):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and needle in err
    assert "Traceback" not in err


def test_malformed_config_file(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"hidden_size": 64,')
    code, _, err = run(capsys, "analyze", "--config", str(bad))
    assert code == 2 and "not valid JSON" in err


@pytest.mark.slow
def test_subprocess_error_has_no_traceback():
    proc = subprocess.run(
        [sys.executable, "-m", "llama_lab", "analyze", "--set", "d_model=0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == "error: d_model=0 must be at least 1"


def test_gradnorms_json_matches_spec(capsys):
    code, out, _ = run(capsys, "gradnorms", "--preset", "debug", "--seq-len", "16", "--batch", "2", "--json")
    assert code == 0
    r = json.loads(out)
    assert set(r) == {"post", "pre"}
    for kind in ("post", "pre"):
        for key in ("layer_grad_norm", "ffn_out_grad_norm", "residual_grad_norm"):
            assert len(r[kind][key]) == PRESETS["debug"].n_layers
        assert r[kind]["loss"] > 0
    # same weights and batch: the losses at init differ only through norm placement
    assert abs(r["post"]["loss"] - r["pre"]["loss"]) < 0.5


def test_gradnorms_over_seeds_adds_the_by_seed_lists(capsys):
    """SPEC: with --seeds N each per-layer list is the median over seeds S … S+N−1 and gains a
    <name>_by_seed twin; each seed's list is that seed's single-seed run."""
    args = ("gradnorms", "--preset", "debug", "--seq-len", "16", "--batch", "2", "--json")
    code, out, _ = run(capsys, *args, "--seeds", "3", "--seed", "4")
    assert code == 0
    r = json.loads(out)
    singles = []
    for seed in (4, 5, 6):
        code, single, _ = run(capsys, *args, "--seed", str(seed))
        singles.append(json.loads(single))
    for kind in ("post", "pre"):
        assert r[kind]["seeds"] == [4, 5, 6]
        for key in ("layer_grad_norm", "ffn_out_grad_norm", "residual_grad_norm"):
            by_seed = r[kind][f"{key}_by_seed"]
            assert by_seed == [s[kind][key] for s in singles]
            assert r[kind][key] == [sorted(column)[1] for column in zip(*by_seed)]  # medians
        assert r[kind]["loss"] == sorted(s[kind]["loss"] for s in singles)[1]
    assert not any(k.endswith("_by_seed") for k in singles[0]["post"])  # single: as SPEC
    code, out, _ = run(capsys, *args, "--seeds", "1", "--seed", "4")  # --seeds given: twins too
    assert json.loads(out)["post"]["layer_grad_norm_by_seed"] == [singles[0]["post"]["layer_grad_norm"]]
    code, _, err = run(capsys, *args, "--seeds", "0")
    assert code == 2 and "--seeds: 0 must be at least 1" in err
    code, out, _ = run(capsys, *args, "--data", "builtin")
    assert code == 0 and json.loads(out)["post"]["loss"] > 0


def test_bench_json_matches_spec(capsys):
    code, out, _ = run(
        capsys,
        "bench",
        "--preset",
        "debug",
        "--device",
        "cpu",
        "--steps",
        "1",
        "--seq-len",
        "16",
        "--batch",
        "2",
        "--json",
    )
    assert code == 0
    r = json.loads(out)
    assert {"tokens_per_s", "step_ms", "achieved_tflops", "peak_memory_bytes", "device"} <= set(r)
    assert r["device"] == "cpu" and r["tokens_per_s"] > 0
    assert abs(r["tokens_per_s"] - 2 * 16 / (r["step_ms"] / 1e3)) / r["tokens_per_s"] < 1e-6


def test_bench_cuda_without_gpu_is_a_clear_error(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    code, out, err = run(capsys, "bench", "--preset", "debug", "--device", "cuda")
    assert code == 2 and "cuda" in err.lower() and len(err.strip().splitlines()) == 1


def test_train_prints_json_lines(capsys, tmp_path):
    code, out, _ = run(
        capsys, "train", "--preset", "debug", "--steps", "3", "--seq-len", "16", "--batch", "2", "--json"
    )
    assert code == 0
    lines = [json.loads(line) for line in out.strip().splitlines()]
    assert [line["step"] for line in lines[:-1]] == [0, 1, 2]
    assert "summary" in lines[-1] and lines[-1]["summary"]["steps_run"] == 3


def test_train_rejects_bad_text(capsys, tmp_path):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("café ".encode("latin-1") * 500)
    code, _, err = run(capsys, "train", "--preset", "debug", "--data", str(bad))
    assert code == 2 and "UTF-8" in err


def test_report_is_written_whole_or_not_at_all(capsys, tmp_path, monkeypatch):
    out = tmp_path / "r.html"
    code, _, err = run(capsys, "report", "--preset", "debug", "-o", str(out), "--format", "html")
    assert code == 0 and out.stat().st_size > 1_000_000 and "wrote" in err  # plotly.js inlined
    assert '<script src="http' not in out.read_text()
    # a failing export leaves the old file untouched and no temporary file behind
    import llama_lab.report as report_mod

    def broken_render(report, fmt):
        raise OSError(28, "No space left on device")

    before = out.read_bytes()
    monkeypatch.setattr(report_mod, "render", broken_render)
    code, _, err = run(capsys, "report", "--preset", "debug", "-o", str(out))
    assert code == 2 and "No space left" in err
    assert out.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["r.html"]


def test_report_json_to_stdout(capsys):
    code, out, _ = run(capsys, "report", "--preset", "debug", "--format", "json")
    assert code == 0 and json.loads(out)["analysis"]["params"]["total"] == 123_712


def test_report_through_a_symlink_replaces_the_target_not_the_link(capsys, tmp_path):
    target, link = tmp_path / "target.md", tmp_path / "link.md"
    target.write_text("old")
    link.symlink_to(target)
    code, _, _ = run(capsys, "report", "--preset", "debug", "-o", str(link), "--format", "md")
    assert code == 0 and link.is_symlink() and target.read_text().startswith("# LLaMA Lab report")


def test_report_csv_is_a_zip_of_tables(capsys, tmp_path):
    import io
    import zipfile

    import pandas as pd

    out = tmp_path / "r.zip"
    assert run(capsys, "report", "--preset", "debug", "-o", str(out), "--format", "csv")[0] == 0
    with zipfile.ZipFile(out) as archive:
        names = archive.namelist()
        assert "index.csv" in names and len(names) > 5
        index = pd.read_csv(io.BytesIO(archive.read("index.csv")))
        assert len(index) == len(names) - 1


def test_cli_notes_keep_the_analysis_notes(capsys, tmp_path):
    path = tmp_path / "config.json"
    hf = PRESETS["debug"].replace(norm_eps=1e-5).to_hf_config() | {"attention_dropout": 0.1}
    path.write_text(json.dumps(hf))
    code, out, err = run(capsys, "analyze", "--config", str(path), "--seq-len", "1000", "--json")
    notes = json.loads(out)["notes"]
    assert code == 0 and any("attention_dropout" in n for n in notes)
    assert any("max_seq_len" in n for n in notes) and "attention_dropout" in err


def test_analyze_of_a_file_counts_at_its_context_length_as_the_app_does(capsys, tmp_path):
    hf = PRESETS["llama-3-8b"].to_hf_config()  # max_position_embeddings 8192
    path = tmp_path / "config.json"
    path.write_text(json.dumps(hf))
    main(["analyze", "--config", str(path), "--json"])
    assert json.loads(capsys.readouterr().out)["inputs"]["seq_len"] == hf["max_position_embeddings"]
    main(["analyze", "--preset", "llama-3-8b", "--json"])  # a preset keeps the 2048 default
    assert json.loads(capsys.readouterr().out)["inputs"]["seq_len"] == 2048


def test_a_misspelt_option_names_the_closest_one(capsys):
    assert main(["analyze", "--preset", "debug", "--seq-lne", "8"]) == 2
    assert "unrecognized arguments: --seq-lne 8 (did you mean --seq-len?)" in capsys.readouterr().err
    assert main(["analyze", "--preset", "debug", "--bogus"]) == 2
    assert "did you mean" not in capsys.readouterr().err


def test_set_accepts_every_valid_choice_of_pos_encoding_none_included(capsys):
    from llama_lab.analysis import analyze

    # "none" is a choice (NoPE), not a missing value; without RoPE an odd head_dim is fine
    argv = ["analyze", "--preset", "debug", "--set", "pos_encoding=none", "--json"]
    code, out, err = run(capsys, *argv, "--set", "d_model=24", "--set", "n_heads=8", "--set", "n_kv_heads=8")
    assert code == 0 and err == "", err
    cfg = PRESETS["debug"].replace(pos_encoding="none", d_model=24, n_heads=8, n_kv_heads=8)
    assert cfg.head_dim == 3
    assert json.loads(out)["params"] == analyze(cfg, seq_len=64, batch=1, dtype="bf16")["params"]


@pytest.mark.parametrize(
    "override,needle",
    [
        ("n_layers=", "n_layers= is empty; a number is required"),
        ("n_layers= ", "n_layers= is empty; a number is required"),
        ("pos_encoding=", "pos_encoding= is empty"),
        ("pos_encoding=nope", "pos_encoding='nope' must be one of"),
    ],
)
def test_set_with_an_empty_or_unknown_value_names_the_rule_in_one_line(capsys, override, needle):
    code, out, err = run(capsys, "analyze", "--preset", "debug", "--set", override)
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1 and needle in lines[0], err
    assert "Traceback" not in err


@pytest.mark.parametrize("fmt", ["ours", "hf"])
def test_analyze_of_a_file_defaults_t_to_its_context_length_in_either_format(capsys, tmp_path, fmt):
    # the app's rule for an uploaded file: T = the file's max_seq_len (3,000, not the 2,048
    # default a preset gets); an explicit --seq-len wins
    cfg = PRESETS["debug"].replace(norm_eps=1e-5, max_seq_len=3000)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg.to_hf_config() if fmt == "hf" else cfg.to_dict()))
    code, out, _ = run(capsys, "analyze", "--config", str(path), "--json")
    assert code == 0 and json.loads(out)["inputs"]["seq_len"] == 3000
    code, out, _ = run(capsys, "analyze", "--config", str(path), "--seq-len", "8", "--json")
    assert json.loads(out)["inputs"]["seq_len"] == 8


def test_a_config_files_refusal_names_the_file_once(capsys, tmp_path):
    for text in ('{"rope_theta": 1e400}', '{"rope_theta": 1e-300}', '{"n_layers": 0}', '{"d_model": 64,'):
        path = tmp_path / "theta.json"
        path.write_text(text)
        code, _, err = run(capsys, "analyze", "--config", str(path))
        assert code == 2 and err.count("theta.json") == 1 and err.startswith(f"error: {path}"), err


def test_predict_finetune_json_has_spec_keys(capsys):
    args = ("predict", "finetune", "--preset", "llama-3.2-3b", "--method", "lora", "--rank", "32")
    code, out, _ = run(capsys, *args, "--gpu", "l40s", "--seq-len", "768", "--batch", "4", "--json")
    assert code == 0
    r = json.loads(out)
    assert r["trainable_params"] == 9_175_040
    assert set(r["peak_bytes"]) >= {"estimate", "low", "high"}
    assert r["peak_bytes"]["low"] <= r["peak_bytes"]["estimate"] <= r["peak_bytes"]["high"]
    # the parts sum to the count; the estimate is the count × the factor fitted on public rows
    assert sum(r["by_part"].values()) == r["peak_bytes"]["counted"]
    factor = r["peak_bytes"]["estimate"] / r["peak_bytes"]["counted"]
    assert factor == pytest.approx(Efficiency.load().finetune_memory_factor, rel=1e-6)
    assert {
        "frozen_weights",
        "trainable_weights",
        "gradients",
        "optimizer_states",
        "activations",
        "logits_and_loss",
    } <= set(r["by_part"])
    assert isinstance(r["fits"], bool) and set(r["tokens_per_s"]) >= {"estimate", "low", "high"}
    code, out, _ = run(capsys, *args, "--gpu", "l40s", "--seq-len", "768", "--batch", "4")
    assert code == 0 and "9,175,040 trainable parameters" in out and "activations" in out


@pytest.mark.parametrize(
    "extra, message",
    [
        (("--targets", "q_proj,foo"), "target module 'foo' is not a linear layer"),
        (("--rank", "5000"), "above the narrowest targeted layer's width"),
        (("--seq-len", "999999"), "above the model's max_seq_len"),
        (("--gpu", "nope"), "--gpu 'nope' must be one of"),
    ],
)
def test_predict_finetune_refuses_with_one_line(capsys, extra, message):
    base = {
        "--gpu": "h100-80gb",
        "--seq-len": "512",
        "--batch": "1",
        "--rank": "8",
        "--targets": "q_proj,v_proj",
    }
    base.update(dict(zip(extra[::2], extra[1::2])))
    argv = ["predict", "finetune", "--preset", "llama-3.2-3b", "--method", "lora"]
    code, _, err = run(capsys, *argv, *[x for kv in base.items() for x in kv])
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
