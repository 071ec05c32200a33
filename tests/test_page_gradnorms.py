"""pages/3_Gradient_norms.py through AppTest: default render, the three runs at tiny sizes,
uploads, and every refusal shown with st.error (never an exception)."""
from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

from llama_lab import experiments, ui
from llama_lab.report import ExperimentEntry
from apptest_helpers import click as click_key, errors, holding_the_slot, metrics, open_page

PAGE = str(Path(__file__).resolve().parents[1] / "pages" / "3_Gradient_norms.py")
P = "llama_lab.page3."


def click(at: AppTest, button: str) -> AppTest:
    return click_key(at, P + button)


def run_page(query: dict | None = None) -> AppTest:
    return open_page(PAGE, query, timeout=120)


def tiny(at: AppTest, **sizes) -> AppTest:
    values = {"n_layers": 2, "seq_len": 16, "batch": 2, "steps": 3} | sizes
    for name, value in values.items():
        at.number_input(key=P + name).set_value(value)
    return at.run()


def test_default_page_renders_with_the_formulas_and_the_live_size():
    at = run_page()
    assert len(at.get("tab")) == 3 and not errors(at)
    latex = " ".join(m.value for m in at.latex)
    assert r"\mathrm{LN}'\big(x_l + F(x_l)\big)" in latex and r"I + F'\big(" in latex
    info = at.info[0].value
    # the seed demo's recipe at the live size: 4 heads; 4·2/8 = 1 KV head would make the GQA
    # demo MQA, so small_training_config keeps it GQA with 2; SwiGLU ⌊8/3·64⌋ = 170
    assert "d=64, 4 blocks, 8 heads / 2 KV, FFN 170, vocab 256" in info
    # both arms keep the sidebar's final norm (on for the demo): Post-LN then ends LN(LN(x))
    assert "final_norm (on)" in info and "LN(LN(x))" in info
    assert len(at.get("plotly_chart")) == 0


def test_measure_matches_experiments_gradnorms_on_the_same_config(monkeypatch):
    seen = holding_the_slot(monkeypatch, "gradnorms")
    at = click(tiny(run_page({"preset": "debug"})), "run_grad")
    assert seen == [1]                                    # ran inside ui.exclusive_run
    entry = at.session_state[ui.KEY_GRADNORMS]
    assert isinstance(entry, ExperimentEntry) and entry.config.vocab_size == 256
    direct = experiments.gradnorms(entry.config, 16, 2, seed=0, device="cpu")
    assert metrics(at)["Post-LN loss"] == f"{direct.post.loss:.4f}"
    assert metrics(at)["Pre-LN loss"] == f"{direct.pre.loss:.4f}"
    assert entry.result.post.layer_grad_norm == pytest.approx(direct.post.layer_grad_norm)
    assert len(at.get("plotly_chart")) == 1
    groups = at.dataframe[0].value
    assert list(groups.columns) == ["norm_position", "group", "block 0", "block 1"]


def test_depth_sweep_shows_both_slopes_and_needs_two_depths():
    at = tiny(run_page({"preset": "debug"}))
    at.multiselect(key=P + "depths").set_value([1, 2]).run()
    click(at, "run_sweep")
    sweep = at.session_state[ui.KEY_DEPTH_SWEEP].result
    assert sweep.depths == [1, 2]
    assert metrics(at)["Pre-LN fitted slope"] == f"{sweep.pre_slope:+.3f}"
    at.multiselect(key=P + "depths").set_value([4]).run()
    click(at, "run_sweep")
    assert any("at least two depths (got 1)" in e for e in errors(at))


def test_training_runs_four_arms_on_the_builtin_corpus(monkeypatch):
    seen = holding_the_slot(monkeypatch, "compare_runs")
    at = click(tiny(run_page({"preset": "debug"})), "run_train")
    assert seen == [1]
    entry = at.session_state[ui.KEY_TRAINING]           # where the Report page picks it up
    assert at.session_state["llama_lab.page3.training"] is entry
    assert list(entry.result.runs) == ["Post-LN, no warmup", "Post-LN, warmup 10",
                                       "Pre-LN, no warmup", "Pre-LN, warmup 10"]
    assert all(run.steps_run == 3 for run in entry.result.runs.values())
    assert entry.config.vocab_size == 256 and "pydoc_data" in entry.settings["data"]
    assert len(at.get("plotly_chart")) == 2                # loss curves, heatmaps
    assert any("vocab_size = 256" in m.value for m in at.markdown)


def test_uploaded_text_trains_and_bad_text_is_refused():
    at = tiny(run_page({"preset": "debug"}), steps=1)
    at.radio(key=P + "source").set_value("upload").run()
    click(at, "run_train")
    assert any("upload a UTF-8 text file first" in e for e in errors(at))
    at.get("file_uploader")[0].set_value(("latin1.txt", "café ".encode("latin-1") * 400,
                                          "text/plain")).run()
    click(at, "run_train")
    assert any("latin1.txt is not UTF-8 text" in e for e in errors(at))
    at.get("file_uploader")[0].set_value(("notes.txt", ("the quick brown fox " * 200).encode(),
                                          "text/plain")).run()
    click(at, "run_train")
    assert not errors(at)
    assert at.session_state[ui.KEY_TRAINING].settings["data"] == "notes.txt"


def test_too_big_runs_are_refused_with_the_guards_message():
    at = tiny(run_page({"preset": "debug"}), batch=65_536, seq_len=8192)
    click(at, "run_grad")
    assert any("is free (limit 90% of free" in e for e in errors(at))     # the memory guard
    assert ui.KEY_GRADNORMS not in at.session_state
    at = tiny(run_page({"preset": "debug"}), n_layers=8, seq_len=64, batch=8, steps=2000)
    click(at, "run_train")
    # 4 runs × 2000 steps × 3·forward FLOPs of a 64-wide, 8-block model ≫ 3 TFLOP
    assert any("live runs on the CPU are limited to 3 TFLOP" in e for e in errors(at))


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_asking_for_cuda_without_it_says_so():
    at = tiny(run_page({"preset": "debug"}))
    at.selectbox(key=P + "device").set_value("cuda").run()
    click(at, "run_grad")
    assert any("CUDA is not available" in e for e in errors(at))
