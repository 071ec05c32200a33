"""llama_lab.report: one report, four formats, the same numbers in each."""

import io
import json
import math
import re
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pandas as pd
import pytest
from plotly.offline import get_plotlyjs

from llama_lab import analysis, cli, experiments, report
from llama_lab.config import PRESETS
from llama_lab.experiments import LiveSettings, distill, speculative
from llama_lab.experiments.finetune import FinetuneSettings, finetune_run
from llama_lab.seed import claims as seed_claims_mod
from llama_lab.train import TrainSettings

ROOT = Path(__file__).resolve().parents[3]
T, B = 32, 2


@pytest.fixture(scope="module")
def results():
    """Tiny real experiment results on the debug preset (vocab 256, d 64, 2 blocks)."""
    cfg = PRESETS["debug"]
    from llama_lab.train import data

    return cfg, {
        "gradnorms": report.ExperimentEntry(
            "gradnorms",
            experiments.gradnorms_over_seeds(cfg, 16, 2, seeds=(0, 1)),
            cfg,
            {"seq_len": 16, "batch": 2},
        ),
        "depth_sweep": experiments.depth_sweep(cfg, (1, 2), 16, 2, seeds=(0, 1)),
        "training": experiments.compare_runs_over_seeds(
            experiments.norm_position_specs(cfg, 3e-3, 1),
            TrainSettings(steps=2, seq_len=16, batch=2, device="cpu", eval_batches=1),
            (0, 1),
            data=data.load_builtin(),
        ),
        "warmup": experiments.warmup_contrast(
            cfg,
            TrainSettings(
                steps=2, lr=3e-3, warmup_steps=1, seq_len=16, batch=2, device="cpu", eval_batches=1
            ),
            (0, 1),
            data=data.load_builtin(),
        ),
        "ablation": experiments.compare_runs(
            experiments.ablation_specs("norm_type", cfg, 3e-3, 1),
            TrainSettings(steps=2, seq_len=16, batch=2, device="cpu", eval_batches=1),
            data=data.load_builtin(),
        ),
        "live_pass": experiments.live_pass(cfg, 16, 2, LiveSettings(device="cpu")),
        "decode": experiments.decode_benchmark(cfg, (8,), new_tokens=2, device="cpu"),
        "speculative": speculative.speculative_run(steps=0, new_tokens=4, gamma=2),
        "distill": distill.distill_run(
            settings=distill.DistillSettings(
                steps=2,
                teacher_steps=1,
                seeds=2,
                seq_len=16,
                batch=2,
                eval_batches=1,
                teacher_d=32,
                teacher_layers=1,
                student_d=16,
                student_layers=1,
            )
        ),
        "quantize": experiments.quantize.quantize_run("debug", "int4", steps=0, device="cpu"),
        "flash": experiments.flash.flash_sweep(cfg, (8, 16), device="cpu"),
        "shard": experiments.shard.shard_run(cfg, 2, "fsdp"),
        "finetune": finetune_run("debug", FinetuneSettings(steps=2, pretrain_steps=1, seq_len=16, batch=2)),
    }


@pytest.fixture(scope="module")
def full(results):
    cfg, found = results
    return report.build_report(cfg, T, B, notes=["from the test"], experiments=found)


@pytest.fixture(scope="module")
def html(full):
    return report.render(full, "html")


@pytest.mark.slow
def test_html_inlines_plotly_once_and_opens_offline(full, html):
    library = get_plotlyjs()
    assert html.count(library[:300]) == 1 and library[-300:] in html  # whole bundle, once
    assert html.count('class="plotly-graph-div"') == len(full.figures) >= 7 + 6
    assert html.count("Plotly.newPlot") == len(full.figures)
    assert 'id="figure-params_sunburst"' in html and 'id="figure-training_heatmaps"' in html
    assert 'id="figure-depth_ratio"' in html and 'id="figure-warmup_curves"' in html
    assert not re.search(r"<script[^>]+src=", html)  # nothing to fetch
    assert not re.search(r"<link[^>]+href=[\"']https?:", html)
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    assert "from the test" in html


@pytest.mark.slow
def test_html_tables_show_formatted_numbers(full, html):
    total = analysis.count_params(PRESETS["debug"]).total
    assert f"{total:,}" in html
    import html as html_module

    for table in full.tables:
        assert f"<h3>{html_module.escape(table.title)}</h3>" in html
    assert '<td class="num">512</td>' in html  # MHA: 2 · 2 layers · 4 · 16 · 2 bytes


def test_json_holds_the_same_numbers_as_analyze(full, results):
    loaded = json.loads(report.render(full, "json"))
    expected = json.loads(json.dumps(analysis.analyze(PRESETS["debug"], T, B, "bf16")))
    assert loaded["analysis"] == expected
    rows = loaded["tables"]["params_by_component"]["rows"]
    assert sum(r["params"] for r in rows) == expected["params"]["total"]
    assert loaded["config"] == PRESETS["debug"].to_dict()
    assert loaded["hf_config"]["intermediate_size"] == PRESETS["debug"].ffn_hidden
    # the seed's claims recomputed, and the warmup claim decided by the report's own contrast
    assert len(loaded["claims"]) == len(seed_claims_mod.seed_claims()) + 1
    warmup = seed_claims_mod.warmup_claim(results[1]["warmup"])
    assert loaded["claims"][-1] == json.loads(json.dumps(warmup.to_dict()))
    assert set(loaded["experiments"]) == set(experiments.KINDS)
    grad = loaded["experiments"]["gradnorms"]
    assert grad["result"] == json.loads(json.dumps(full.experiments["gradnorms"]["result"]))
    assert grad["config"]["d_model"] == 64 and grad["settings"] == {"seq_len": 16, "batch": 2}
    assert loaded["figures"][0]["name"] == "params_sunburst"


def test_json_numbers_match_the_results_passed_in(results, full):
    _, found = results
    loaded = json.loads(report.render(full, "json"))["experiments"]
    assert loaded["gradnorms"]["result"]["post"]["layer_grad_norm"] == pytest.approx(
        found["gradnorms"].result.post.layer_grad_norm
    )
    assert loaded["depth_sweep"]["result"]["pre_slope"] == pytest.approx(found["depth_sweep"].pre_slope)
    assert loaded["live_pass"]["result"]["mfu"] == pytest.approx(found["live_pass"].mfu)
    assert loaded["decode"]["result"]["bytes_agree"] is True


def test_csv_zip_has_one_parsable_csv_per_table(full):
    archive = zipfile.ZipFile(io.BytesIO(report.formats.render_csv(full)))
    names = set(archive.namelist())
    assert names == {f"{t.name}.csv" for t in full.tables} | {"index.csv"}
    frames = {name: pd.read_csv(archive.open(name)) for name in names}
    assert list(frames["index.csv"].file) == [f"{t.name}.csv" for t in full.tables]
    cfg = PRESETS["debug"]
    assert frames["params_by_component.csv"].params.sum() == analysis.count_params(cfg).total
    # 2 (K, V) · L=2 · G · head_dim 16 · 2 bytes (bf16): MHA G=4, GQA G=2, MQA G=1
    kv = frames["kv_cache_attention.csv"].set_index("attention").bytes_per_token
    assert kv.to_dict() == {"MHA": 512, "GQA": 256, "MQA": 128}
    assert len(frames["training_steps.csv"]) == 2 * 4 * 2  # 2 seeds × 4 runs × 2 steps
    assert sorted(set(frames["training_steps.csv"].seed)) == [0, 1]
    per_seed = frames["gradnorms_by_seed.csv"]  # the multi-seed results
    assert list(per_seed.seed) == [0, 1] and (per_seed.post_over_pre > 0).all()
    assert len(frames["depth_sweep.csv"]) == 2 * 2  # 2 depths × 2 seeds
    warmup = frames["warmup_verdict.csv"]
    assert list(warmup.columns) == ["seed", "post_no_warmup", "post_warmup", "pre_no_warmup"]
    via_render = zipfile.ZipFile(io.BytesIO(report.render(full, "csv")))
    assert set(via_render.namelist()) == names


def test_architecture_table_switches_one_option_at_a_time(full):
    """The attention row: the debug model (4 heads, 2 KV heads) as MHA has 2 more KV heads'
    K and V projections per block: 2 blocks × 2 (k, v) × 64 × (4 − 2)·16 = 8,192 parameters."""
    table = full.table("architecture_comparison").frame.set_index("aspect")
    row = table.loc["attention"]
    assert row.params_2017 - row.params_llama == 2 * 2 * 64 * 2 * 16
    assert (row.kv_bytes_per_token_2017, row.kv_bytes_per_token_llama) == (512, 256)


def test_training_memory_table_follows_zero(full):
    """Mixed precision AdamW per GPU (ZeRO paper): weights 2P, grads 2P, moments 8P, master 4P;
    ZeRO-1 splits moments and master, ZeRO-2 also grads, ZeRO-3 also weights, over 8 GPUs."""
    P = analysis.count_params(PRESETS["debug"]).total
    table = full.table("memory_training").frame.set_index("component")
    none, z1, z2, z3 = (
        table[c] for c in ("unsharded (1 GPU)", "zero1 (8 GPUs)", "zero2 (8 GPUs)", "zero3 (8 GPUs)")
    )
    assert (none.weights, none.gradients, none.optimizer_moments, none.master_weights) == (
        2 * P,
        2 * P,
        8 * P,
        4 * P,
    )
    assert z1.optimizer_moments == math.ceil(8 * P / 8) and z1.gradients == 2 * P
    assert z2.gradients == math.ceil(2 * P / 8) and z2.weights == 2 * P
    assert z3.weights == math.ceil(2 * P / 8)
    assert none.activations == z3.activations  # never sharded


def test_markdown_has_a_table_per_report_table(full):
    md = report.render(full, "md")
    assert md.count("\n### ") == len(full.tables)
    assert "| component | params | share |\n|---|---:|---:|" in md
    total = analysis.count_params(PRESETS["debug"]).total
    assert f"| embedding | {PRESETS['debug'].vocab_size * 64:,} |" in md and f"{total:,}" in md
    assert "*Figure: Parameters by component" in md


def test_long_tables_are_cut_in_html_and_md_but_whole_in_csv(monkeypatch, full):
    monkeypatch.setattr(report.formats, "MAX_SHOWN_ROWS", 3)
    steps = full.table("training_steps").frame  # 16 rows
    assert "First 3 of 16 rows" in report.render(full, "md")
    html = report.render(full, "html")
    assert "First 3 of 16 rows" in html
    archive = zipfile.ZipFile(io.BytesIO(report.formats.render_csv(full)))
    assert len(pd.read_csv(archive.open("training_steps.csv"))) == len(steps) == 16


def test_environment_names_the_versions(full):
    env = full.environment
    for package in ("torch", "streamlit", "plotly"):
        assert env[package] == metadata.version(package)
    assert env["python"] == ".".join(map(str, sys.version_info[:3]))
    assert env["time_utc"].endswith("+00:00") and env["device"] in ("cpu", "cuda", "mps")


def test_a_non_llama_config_has_no_hf_file_and_says_why():
    rep = report.build_report(PRESETS["transformer-2017"].replace(n_layers=1), 16, 1)
    assert rep.hf_config is None and "LLaMA-style" in rep.hf_config_note
    assert "No Hugging Face config.json" in report.render(rep, "md")
    assert {t.name for t in rep.tables}.isdisjoint({"hf_config"})


def test_refusals_name_the_rule(results):
    cfg, found = results
    with pytest.raises(report.ReportError, match="format='pdf'"):
        report.render(report.build_report(cfg, 8, 1), "pdf")
    with pytest.raises(report.ReportError, match="kind='loss'"):
        report.build_report(cfg, 8, 1, experiments={"loss": found["decode"]})
    with pytest.raises(report.ReportError, match="must be a DecodeBench"):
        report.build_report(cfg, 8, 1, experiments={"decode": found["live_pass"]})
    with pytest.raises(report.ReportError, match="gpu='TPU'"):
        report.build_report(cfg, 8, 1, gpu="TPU")
    with pytest.raises(analysis.AnalysisError, match="batch=0"):
        report.build_report(cfg, 8, 0)
    assert report.experiment_state_key("decode") == "llama_lab.experiment.decode"


@pytest.mark.slow
def test_cli_report_writes_html(tmp_path):
    out = tmp_path / "report.html"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "llama_lab",
            "report",
            "--preset",
            "debug",
            "-o",
            str(out),
            "--format",
            "html",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    text = out.read_text(encoding="utf-8")
    assert 'class="plotly-graph-div"' in text and get_plotlyjs()[:300] in text


def test_cli_report_json_and_md_in_process(tmp_path, capsys):
    out = tmp_path / "report.json"
    assert (
        cli.main(["report", "--preset", "debug", "--seq-len", "16", "-o", str(out), "--format", "json"]) == 0
    )
    loaded = json.loads(out.read_text(encoding="utf-8"))
    assert loaded["analysis"] == json.loads(json.dumps(analysis.analyze(PRESETS["debug"], 16, 1)))
    assert cli.main(["report", "--preset", "debug", "--seq-len", "16", "--format", "md"]) == 0
    assert "| component | params | share |" in capsys.readouterr().out


def test_cli_report_stores_the_weights_and_the_cache_apart(tmp_path):
    out = tmp_path / "report.json"
    assert (
        cli.main(
            [
                "report",
                "--preset",
                "llama-3-8b",
                "--seq-len",
                "8192",
                "--weight-dtype",
                "int4",
                "--kv-dtype",
                "fp8",
                "-o",
                str(out),
                "--format",
                "json",
            ]
        )
        == 0
    )
    loaded = json.loads(out.read_text(encoding="utf-8"))
    assert loaded["workload"]["weight_dtype"] == "int4" and loaded["workload"]["kv_dtype"] == "fp8"
    assert loaded["analysis"]["memory"]["weights_bytes"] == 5_700_591_616
    assert loaded["analysis"]["kv_cache"]["bytes_per_token"] == 65_536  # 2·32·8·128·1
    fit = [
        row for row in loaded["tables"]["gpu_fit"]["rows"] if row["gpu"] == "H100 80GB" and row["is_current"]
    ][0]
    assert fit["max_context_at_batch"] == ((81_559 * 2**20 - 300 * 10**6) - 5_700_591_616) // 65_536
    memory = {row["component"]: row["bytes"] for row in loaded["tables"]["memory_inference"]["rows"]}
    assert memory["weights"] == 5_700_591_616 and memory["kv_cache"] == 65_536 * 8192
    assert "weights int4, KV cache fp8" in loaded["title"]


@pytest.mark.slow
def test_report_and_experiment_plots_do_not_import_streamlit():
    code = "import sys, llama_lab.report, llama_lab.experiments; print('streamlit' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_the_report_carries_what_sets_a_family_apart():
    rep = report.build_report(PRESETS["qwen3-30b-a3b"], 256, 1)
    features = dict(zip(*rep.table("architecture").frame.T.values))
    assert features["n_experts"] == 128 and features["experts_per_token"] == 8
    assert features["head_dim"] == 128 and features["qk_norm"] is True
    assert "3,353,032,704" in rep.table("params_by_component").note  # active per token
    assert rep.analysis["params"]["active"] == 3_353_032_704
    assert "Mixture of experts" in rep.table("architecture").note
