"""pages/5_Architecture_comparison.py through AppTest."""

from pathlib import Path

import pytest
from apptest_helpers import open_page
from streamlit.testing.v1 import AppTest

from llama_lab import experiments, report
from llama_lab.runtime import jobs
from llama_lab.ui import runs, state
from llama_lab.units import escape_markdown

PAGE = Path(__file__).resolve().parents[2] / "pages" / "5_Architecture_comparison.py"


def run_page(query: dict | None = None) -> AppTest:
    return open_page(PAGE, query, timeout=120)


def table(at: AppTest):
    return at.table[0].value.set_index("aspect")


def test_the_seeds_twelve_rows_each_computed_on_the_config():
    at = run_page()
    rows = table(at)
    assert list(rows.index) == [
        "structure",
        "norm position",
        "norm type",
        "positions",
        "FFN",
        "FFN width",
        "activation",
        "attention",
        "init",
        "bias",
        "LR schedule",
        "precision",
    ]
    assert rows.loc["norm type", "seed's reason"] == "fusable, faster"  # the seed's 可融合，更快
    assert at.table[1].value.set_index("aspect").loc["norm type", "行"] == "归一化类型"
    # LayerNorm adds β to each of 2·4 + 1 norms of width 512: 4,608 parameters
    lab = "what the lab computes (2017 option → LLaMA option, on this config)"
    assert "-4,608" in rows.loc["norm type", lab]
    # MHA → GQA on the demo: 2·4·(8 → 2)·64·2 bytes = 8,192 → 2,048 per token
    assert "8,192 → 2,048" in rows.loc["attention", lab]
    numbers = at.dataframe[0].value.set_index("aspect")
    assert numbers.loc["attention", "params_2017"] - numbers.loc["attention", "params_llama"] == 1_572_864


def test_a_widget_change_changes_the_rows():
    at = run_page()
    at.sidebar.number_input(key=state.field_key("n_layers")).set_value(8).run()
    # 2·8 + 1 norms × 512 β
    assert "-8,704" in table(at).loc["norm type"].iloc[-1]


def test_invalid_config_stops_the_page_with_the_rule():
    at = run_page()
    at.sidebar.number_input(key=state.field_key("d_model")).set_value(500).run()
    assert not at.exception
    assert any(escape_markdown("d_model=500 is not divisible by n_heads=8") in e.value for e in at.main.error)
    assert len(at.dataframe) == 0 and len(at.table) == 0


@pytest.mark.slow
def test_training_contrast_runs_behind_the_button_and_reaches_the_report(monkeypatch):
    seen, original = [], experiments.compare_runs

    def compare_runs(*args, **kwargs):
        seen.append(jobs.LIMITER.running)
        return original(*args, **kwargs)

    monkeypatch.setattr(experiments, "compare_runs", compare_runs)
    at = run_page({"preset": "debug"})
    at.selectbox(key="llama_lab.page5.ablation").set_value("norm_type").run()
    at.slider(key="llama_lab.page5.steps").set_value(20).run()
    at.button[0].click().run()
    assert not at.exception
    summary = at.dataframe[-1].value
    assert list(summary.label) == ["LayerNorm", "RMSNorm"]
    assert (summary.final_loss < summary.first_loss).all()  # both learn something
    assert len(at.get("plotly_chart")) == 1
    assert seen == [1]  # ran inside runs.exclusive_run

    entry = at.session_state[state.KEY_ABLATION]  # where the Report page collects it
    assert at.session_state["llama_lab.page5.result"] is entry
    assert entry.kind == "ablation" and entry.config.vocab_size == 256
    assert entry.settings["contrast"] == "LayerNorm vs RMSNorm" and entry.settings["steps"] == 20
    assert list(entry.result.runs) == ["LayerNorm", "RMSNorm"]
    report_page = AppTest.from_file(str(PAGE.parent / "7_Report.py"), default_timeout=120)
    report_page.query_params.update({"preset": "debug"})
    report_page.session_state[state.KEY_ABLATION] = entry
    report_page.run()
    assert not report_page.exception
    experiments_metric = next(m for m in report_page.metric if m.label == "Experiments")
    assert experiments_metric.value == "1" and experiments_metric.proto.help == "ablation"
    built = report.build_report(entry.config, 16, 1, experiments={"ablation": entry})
    summary = built.table("ablation_summary")
    assert list(summary.frame.label) == ["LayerNorm", "RMSNorm"]
    assert "contrast=LayerNorm vs RMSNorm" in summary.note

    at.slider(key="llama_lab.page5.steps").set_value(30).run()
    assert any(runs.STALE_NOTE == c.value for c in at.caption)  # shown until trained again


def test_the_comparison_reads_in_english_with_the_seeds_words_kept_apart():
    import re

    from apptest_helpers import open_page

    at = open_page(PAGE, timeout=120)
    main, original = at.table[0].value, at.table[1].value
    cjk = re.compile(r"[\u3000-\u9fff\uff00-\uffef]")
    assert not any(cjk.search(str(v)) for v in main.to_numpy().ravel()), "Chinese in the main table"
    assert "seed's reason" in main.columns and "stable gradients" in list(main["seed's reason"])
    assert "梯度稳定" in list(original["原因"])  # the seed's own words, in their expander


def test_the_three_kinds_side_by_side_from_the_labs_counts():
    from llama_lab import analysis
    from llama_lab.analysis.model_kinds import KIND_PRESETS
    from llama_lab.config import PRESETS

    at = run_page()
    tables = [t.value.set_index("aspect") for t in at.table if "aspect" in t.value.columns]
    kinds = next(t for t in tables if "generate" in t.index)
    assert (
        list(kinds.columns)
        == [
            "seed-demo (causal decoder)",
            "bert-base-uncased (bidirectional encoder)",
            "transformer-2017-base (encoder-decoder)",
        ]
        == [
            f"{name} ({kind})"
            for name, kind in zip(
                KIND_PRESETS, ("causal decoder", "bidirectional encoder", "encoder-decoder")
            )
        ]
    )
    bert = kinds["bert-base-uncased (bidirectional encoder)"]
    total = analysis.count_params(PRESETS["bert-base-uncased"]).total
    assert bert["parameters"] == f"{total:,}" == "109,482,240"
    T = 128  # the sidebar's default T
    flops = analysis.count_flops(PRESETS["bert-base-uncased"], T)
    assert bert["forward FLOPs"] == f"{flops.forward:,} at T={T}"  # bidirectional: every pair counts
    assert bert["cached per token"].startswith("nothing") and bert["generate"].startswith("no")
    decoder = kinds["seed-demo (causal decoder)"]
    # K and V · 4 layers · 2 KV heads · 64 dims · 2 bytes
    assert decoder["cached per token"].startswith("2,048 bytes (bf16)")
    assert decoder["generate"].startswith("yes") and decoder["fill in"].startswith("no")
    marian = kinds["transformer-2017-base (encoder-decoder)"]
    assert marian["parameters"] == f"{analysis.count_params(PRESETS['transformer-2017-base']).total:,}"
    assert marian["parameters"] == "63,606,784" and marian["translate"].startswith("yes")
