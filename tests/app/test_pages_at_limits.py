"""Every page at the largest sizes the sidebar accepts: llama-3.1-405b at its full context and the
largest batch, and a model at ModelConfig's LIMITS. FLOP and byte counts there pass 2⁶³ (up to
~10²⁹), which plotly's JSON encoder and Arrow (st.dataframe) refuse as integers: every page must
still render without an exception, and the report must render in every format, with the exact
integers kept in JSON and CSV."""

import io
import json
import zipfile
from pathlib import Path

import pandas as pd
import pytest
from apptest_helpers import errors, metrics, open_page

from llama_lab import analysis, report, ui
from llama_lab.config import LIMITS, MAX_BATCH
from llama_lab.ui import state

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["home.py", *(page.path for page in ui.PAGES)]  # 3 and 4: render, no run
INT64_MAX = 2**63 - 1

# llama-3.1-405b: T = its max_seq_len 131,072, B = the sidebar's largest batch
AT_405B = {"preset": "llama-3.1-405b", "seq": "131072", "batch": str(MAX_BATCH)}
# every size field at its upper bound (n_heads 128 stays: head_dim 131,072 / 128 = 1,024)
AT_LIMITS = {
    "preset": "llama-3.1-405b",
    "d_model": str(LIMITS["d_model"]),
    "n_layers": str(LIMITS["n_layers"]),
    "vocab_size": str(LIMITS["vocab_size"]),
    "ffn_hidden": str(LIMITS["ffn_hidden"]),
    "max_seq_len": str(LIMITS["max_seq_len"]),
    "seq": str(LIMITS["max_seq_len"]),
    "batch": str(MAX_BATCH),
}
QUERIES = {"405b": AT_405B, "limits": AT_LIMITS}


def config_of(query: dict) -> tuple:
    values, link_errors = state.values_from_query(query)
    assert not link_errors, link_errors
    return state.config_from_values(values), int(query["seq"]), int(query["batch"])


@pytest.mark.parametrize("name", list(QUERIES))
def test_the_sizes_are_the_largest_the_sidebar_accepts(name):
    at = open_page(ROOT / "home.py", QUERIES[name], timeout=120)
    assert not at.sidebar.error  # taken, not fallen back
    seq = at.sidebar.number_input(key=state.KEY_SEQ_LEN)
    batch = at.sidebar.number_input(key=state.KEY_BATCH)
    assert seq.value == seq.max == int(QUERIES[name]["seq"])
    assert batch.value == batch.max == MAX_BATCH
    cfg, seq_len, batch_size = config_of(QUERIES[name])
    assert analysis.count_flops(cfg, seq_len, batch_size).forward > INT64_MAX
    if name == "limits":
        assert all(
            getattr(cfg, field) == LIMITS[field]
            for field in ("d_model", "n_layers", "vocab_size", "ffn_hidden", "max_seq_len")
        )


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("name", list(QUERIES))
def test_every_page_renders_at_the_limits(page, name):
    at = open_page(ROOT / page, QUERIES[name], timeout=180)  # asserts no exception
    assert not errors(at), errors(at)
    assert at.title, "the page drew nothing"
    if page.endswith("1_Parameters_and_FLOPs.py"):
        forward = metrics(at)["Forward FLOPs"]
        # ~1.6·10²² FLOPs at 405B: zetta; ~4·10²⁸ at the limits: past yotta, whole Y
        assert forward.endswith("FLOP") and "e+" not in forward
        assert len(at.get("plotly_chart")) == 3 and len(at.dataframe) >= 1
    if page.endswith("5_Architecture_comparison.py"):
        assert len(at.dataframe) == 1 and len(at.dataframe[0].value) > 0
    if page.endswith("7_Report.py"):
        assert [b.label for b in at.main.get("download_button")] == [
            "HTML report",
            "JSON",
            "CSV tables (zip)",
            "Markdown",
        ]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(QUERIES))
def test_report_page_files_keep_the_exact_counts(name, stored):
    open_page(ROOT / "pages" / "7_Report.py", QUERIES[name], timeout=180)
    cfg, seq_len, batch = config_of(QUERIES[name])
    forward = analysis.count_flops(cfg, seq_len, batch).forward
    loaded = json.loads(stored["llama_lab_report.json"])
    assert loaded["analysis"]["flops"]["forward"] == forward > INT64_MAX  # exact, not float
    archive = zipfile.ZipFile(io.BytesIO(stored["llama_lab_report_csv.zip"]))
    text = archive.read("flops_by_component.csv").decode("utf-8")
    assert str(analysis.count_flops(cfg, seq_len, batch).by_component["lm_head"]) in text
    html = stored["llama_lab_report.html"].decode("utf-8")
    assert html.count('class="plotly-graph-div"') >= 7
    assert f"{forward:,}" in html  # the table's exact cell
    assert "| component |" in stored["llama_lab_report.md"].decode("utf-8")


@pytest.mark.slow
def test_report_renders_in_every_format_at_the_limits():
    cfg, seq_len, batch = config_of(AT_LIMITS)
    built = report.build_report(cfg, seq_len, batch)
    for fmt in report.FORMATS:
        assert len(report.render(built, fmt)) > 1000, fmt
    block = built.table("params_per_block").frame
    flops = analysis.count_flops(cfg, seq_len, batch)
    assert (
        block.forward_flops.sum() * cfg.n_layers + flops.by_component["lm_head"] == flops.forward
    )  # exact integers in the table
    rows = pd.read_csv(
        io.BytesIO(zipfile.ZipFile(io.BytesIO(report.render(built, "csv"))).read("params_per_block.csv"))
    )
    assert len(rows) == len(block)


def test_fvcore_at_the_limits_is_refused_with_a_message():
    at = open_page(ROOT / "pages" / "1_Parameters_and_FLOPs.py", AT_LIMITS, timeout=180)
    at.toggle(key="llama_lab.page1.fvcore").set_value(True).run()
    assert not at.exception
    assert any("fvcore cannot trace B=" in e for e in errors(at))
