"""pages/7_Report.py through AppTest: the four downloads hold the report of the sidebar's
model, experiment results of the session are included, failures show st.error."""

import io
import json
import zipfile
from pathlib import Path

import pandas as pd
from apptest_helpers import open_page
from streamlit.testing.v1 import AppTest

from llama_lab import analysis, experiments, report
from llama_lab.config import PRESETS
from llama_lab.report import ExperimentEntry
from llama_lab.ui import state
from llama_lab.units import escape_markdown

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "7_Report.py")
FILE_NAMES = {
    "llama_lab_report.html",
    "llama_lab_report.json",
    "llama_lab_report_csv.zip",
    "llama_lab_report.md",
}


def run_page(query: dict | None = None, state: dict | None = None) -> AppTest:
    return open_page(PAGE, query, state, timeout=120)


def test_downloads_hold_the_report_of_the_sidebar_model(stored):
    at = run_page()
    labels = [b.label for b in at.main.get("download_button")]
    assert labels == ["HTML report", "JSON", "CSV tables (zip)", "Markdown"]
    assert FILE_NAMES <= set(stored) and all(len(stored[name]) > 1000 for name in FILE_NAMES)
    html = stored["llama_lab_report.html"].decode("utf-8")
    assert 'class="plotly-graph-div"' in html and "<script src=" not in html
    loaded = json.loads(stored["llama_lab_report.json"])
    # the sidebar's default: the seed demo at T = max_seq_len = 128, B = 1, bf16
    assert loaded["analysis"] == json.loads(
        json.dumps(analysis.analyze(PRESETS["seed-demo"], 128, 1, "bf16"))
    )
    assert loaded["analysis"]["params"]["total"] == 43_780_608  # the seed's printed total
    archive = zipfile.ZipFile(io.BytesIO(stored["llama_lab_report_csv.zip"]))
    kv = pd.read_csv(archive.open("kv_cache_attention.csv")).set_index("attention")
    # 2 (K, V) · 4 layers · G · 64 · 2 bytes
    assert kv.bytes_per_token.to_dict() == {"MHA": 8192, "GQA": 2048, "MQA": 1024}
    assert "| component | params | share |" in stored["llama_lab_report.md"].decode("utf-8")
    assert {m.label: m.value for m in at.metric}["Experiments"] == "0"


def test_session_experiments_are_included_and_can_be_left_out(stored):
    cfg = PRESETS["debug"]
    entry = ExperimentEntry(
        "gradnorms", experiments.gradnorms_over_seeds(cfg, 8, 1, (0, 1)), cfg, {"seq_len": 8}
    )
    sweep = ExperimentEntry(
        "depth_sweep", experiments.depth_sweep(cfg, (1, 2), 8, 1, (0, 1)), cfg, {"seq_len": 8}
    )
    at = run_page({"preset": "debug"}, {state.KEY_GRADNORMS: entry, state.KEY_DEPTH_SWEEP: sweep})
    assert {m.label: m.value for m in at.metric}["Experiments"] == "2"
    loaded = json.loads(stored["llama_lab_report.json"])
    assert loaded["experiments"]["gradnorms"]["result"] == json.loads(json.dumps(entry.result.to_dict()))
    assert loaded["experiments"]["gradnorms"]["result"]["post"]["layer_grad_norm_by_seed"]
    html = stored["llama_lab_report.html"].decode("utf-8")
    assert "figure-gradnorms_profile" in html and "figure-depth_ratio" in html
    at.toggle(key="llama_lab.page7.include").set_value(False).run()
    assert not at.exception
    assert "gradnorms" not in json.loads(stored["llama_lab_report.json"])["experiments"]


def test_a_failed_export_shows_why_and_keeps_the_others(stored, monkeypatch):
    def broken(rep):
        raise report.ReportError("disk quota exceeded")

    monkeypatch.setattr(report.formats, "render_csv", broken)
    at = run_page({"preset": "debug"})
    assert any(
        escape_markdown("CSV export failed: ReportError: disk quota exceeded") in e.value
        for e in at.main.error
    )
    assert len(at.main.get("download_button")) == 3


def test_the_gpu_choice_reaches_the_roofline_table(stored):
    at = run_page({"preset": "debug"})
    at.selectbox(key="llama_lab.page7.gpu").set_value("L4").run()
    loaded = json.loads(stored["llama_lab_report.json"])
    assert loaded["workload"]["gpu"] == "L4"
    assert "L4" in loaded["tables"]["roofline_decode"]["title"]


def test_an_invalid_config_shows_the_rule_and_no_downloads():
    at = run_page({"preset": "debug"})
    at.sidebar.number_input(key=state.field_key("n_heads")).set_value(5).run()
    assert not at.exception
    assert any(escape_markdown("d_model=64 is not divisible by n_heads=5") in e.value for e in at.main.error)
    assert len(at.main.get("download_button")) == 0
