"""pages/3_Gradient_norms.py through AppTest: default render, the three runs at tiny sizes,
uploads, and every refusal shown with st.error (never an exception)."""

from pathlib import Path

import pytest
import torch
from apptest_helpers import click as click_key
from apptest_helpers import errors, holding_the_slot, metrics, open_page
from streamlit.testing.v1 import AppTest

from llama_lab import experiments
from llama_lab.report import ExperimentEntry
from llama_lab.ui import state

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "3_Gradient_norms.py")
P = "llama_lab.page3."


def click(at: AppTest, button: str) -> AppTest:
    return click_key(at, P + button)


def run_page(query: dict | None = None) -> AppTest:
    return open_page(PAGE, query, timeout=180)


TINY = {
    "grad.n_layers": "2",
    "grad.seq_len": "16",
    "grad.batch": "2",
    "grad.seeds": "2",
    "grad.d_model": "32",
}


def tiny(at: AppTest | None = None, **sizes) -> AppTest:
    """The page opened at tiny live sizes (through its URL), 3 training steps and 2 depths:
    nothing measured until a button is pressed."""
    at = at or run_page({"preset": "debug", **TINY})
    at.number_input(key=P + "steps").set_value(3)
    for name, value in sizes.items():
        at.number_input(key=P + name).set_value(value)
    at.multiselect(key=P + "depths").set_value([1, 2])
    return at.run()


def test_the_default_view_shows_xiong_et_al_s_contrast_at_once_from_the_shipped_data(monkeypatch):
    """No click and no run: the default view (theory setting: Xavier, LayerNorm, √d
    embeddings, d=128, 6 blocks, 5 seeds, the built-in text) draws the shipped per-block norms,
    the ratio against depth and the sweep, labelled pre-measured with where they were measured,
    and Post-LN's last-block gradient is the larger in every seed."""
    runs = holding_the_slot(monkeypatch, "gradnorms_over_seeds")
    sweeps = holding_the_slot(monkeypatch, "depth_sweep")
    at = run_page()
    assert runs == [] and sweeps == []  # nothing ran on view
    captions = " ".join(c.value for c in at.caption).replace("\\", "")  # as shown, unescaped
    assert "Shown at once: pre-measured by tools/premeasure.py on" in captions
    assert at.button(key=P + "run_gradnorms").label.startswith("Re-measure here (about ")
    assert len(at.get("tab")) == 4 and not errors(at)
    latex = " ".join(m.value for m in at.latex)
    assert r"\mathrm{LN}'\big(x_l + F(x_l)\big)" in latex and r"I + F'\big(" in latex
    info = at.info[0].value
    assert "d=128, 6 blocks, 4 heads / 4 KV, FFN 512, vocab 256" in info
    assert (
        "this setting's recipe (layernorm, sinusoidal positions, relu, biases, xavier init, "
        "embeddings × √d)" in info
    )
    assert "the Pre-LN arm always normalises before lm_head" in info and "LN(LN(x))" in info
    entry = at.session_state[state.KEY_GRADNORMS]
    assert "pre-measured" in entry.settings  # the report says so too
    assert entry.result.seeds == [0, 1, 2, 3, 4] and "pydoc" in entry.result.data
    ratios = entry.result.last_ratio_by_seed()
    assert min(ratios) > 1.8  # Xiong et al.: Post-LN's is larger
    shown = metrics(at)
    assert shown["Post ÷ Pre, last block"] == f"{sorted(ratios)[2]:.3g}"  # median of 5
    sweep = at.session_state[state.KEY_DEPTH_SWEEP].result
    assert sweep.depths == [2, 4, 8, 12] and sweep.ratio[-1] > sweep.ratio[0]
    assert len(at.get("plotly_chart")) == 4  # profile, ratio vs depth, sweep; the warmup tab's
    text = " ".join(m.value for m in at.markdown)
    assert "; Post-LN's is larger than Pre-LN's" in text and "The ratio** Post/Pre grows" in text
    assert "its last-layer gradient is the larger here" in text


@pytest.mark.slow
def test_the_llama_init_view_explains_why_the_picture_differs():
    """N(0, 0.02) and RMSNorm: Pre-LN's final norm sees a small stream, so Pre-LN's gradients
    are the larger; the page says so with the measured numbers."""
    at = run_page({"grad.regime": "llama", "grad.d_model": "64", "grad.seeds": "3"})
    assert state.KEY_GRADNORMS not in at.session_state  # not shipped: nothing runs until the button
    at = click(at, "run_gradnorms")
    result = at.session_state[state.KEY_GRADNORMS].result
    assert max(result.last_ratio_by_seed()) < 1
    assert result.pre.last_norm_input_rms < result.post.last_norm_input_rms
    text = " ".join(m.value for m in at.markdown)
    assert "; Post-LN's is smaller than Pre-LN's" in text
    assert "Pre-LN's last-layer gradient is the larger here: its stream is smaller" in text
    assert "rmsnorm" in at.info[0].value and "normal init" in at.info[0].value


@pytest.mark.slow
def test_measure_matches_experiments_on_the_same_config(monkeypatch):
    seen = holding_the_slot(monkeypatch, "gradnorms_over_seeds")
    at = tiny()
    at.selectbox(key=P + "data").set_value("random")  # a change: nothing runs by itself
    at.run()
    assert seen == [] and any("Not measured for these settings yet" in c.value for c in at.caption)
    at = click(at, "run_gradnorms")
    assert seen and set(seen) == {1}  # ran inside runs.exclusive_run
    entry = at.session_state[state.KEY_GRADNORMS]
    assert isinstance(entry, ExperimentEntry) and entry.config.vocab_size == 256
    assert entry.config.d_model == 32 and entry.config.n_layers == 2
    direct = experiments.gradnorms_over_seeds(entry.config, 16, 2, seeds=(0, 1), device="cpu")
    assert entry.result.to_dict() == direct.to_dict()
    assert metrics(at)["Post-LN loss (median)"] == f"{direct.post.loss:.4f}"
    click(at, "run_gradnorms")  # the button measures again
    assert state.KEY_GRADNORMS in at.session_state and not errors(at)


def test_depth_sweep_shows_both_slopes_and_needs_two_depths():
    at = click(tiny(), "run_depth_sweep")
    sweep = at.session_state[state.KEY_DEPTH_SWEEP].result
    assert sweep.depths == [1, 2] and sweep.seeds == [0, 1]
    assert metrics(at)["Pre-LN fitted slope"] == f"{sweep.pre_slope:+.3f}"
    at.multiselect(key=P + "depths").set_value([4]).run()
    click(at, "run_depth_sweep")
    assert any("at least two depths (got 1)" in e for e in errors(at))


def test_training_runs_four_arms_per_seed_on_the_builtin_corpus(monkeypatch):
    seen = holding_the_slot(monkeypatch, "compare_runs_over_seeds")
    at = click(tiny(), "run_train")
    assert seen == [1]
    entry = at.session_state[state.KEY_TRAINING]  # where the Report page picks it up
    assert at.session_state["llama_lab.page3.training"] is entry
    assert entry.result.seeds == [0, 1]
    assert list(entry.result.by_label()) == [
        "Post-LN, no warmup",
        "Post-LN, warmup 10",
        "Pre-LN, no warmup",
        "Pre-LN, warmup 10",
    ]
    assert all(run.steps_run == 3 for run in entry.result.runs.values())
    assert len(entry.result.runs) == 8
    assert entry.config.vocab_size == 256 and "pydoc_data" in entry.settings["data"]
    assert any("vocab_size = 256" in m.value for m in at.markdown)


@pytest.mark.slow
def test_the_warmup_tab_trains_three_arms_and_gives_the_verdict(monkeypatch):
    seen = holding_the_slot(monkeypatch, "warmup_contrast")
    at = tiny()
    at.number_input(key=P + "w_steps").set_value(4)
    at.number_input(key=P + "w_warmup").set_value(2)
    click(at.run(), "run_warmup")
    assert seen == [1] and not errors(at)
    result = at.session_state[state.EXPERIMENT_KEYS["warmup"]].result
    assert list(result.runs.by_label()) == ["Post-LN, no warmup", "Post-LN, warmup 2", "Pre-LN, no warmup"]
    assert result.runs.seeds == [0, 1] and result.steps == 4
    verdict = result.verdict()
    text = " ".join(m.value for m in at.markdown)
    assert ("✓ holds" if verdict["holds"] else "✗ does not hold here") in text
    assert f"in {verdict['post_needs_warmup_seeds']} of 2 seeds" in text


def test_uploaded_text_trains_and_bad_text_is_refused():
    at = tiny(steps=1)
    at.radio(key=P + "source").set_value("upload").run()
    click(at, "run_train")
    assert any("upload a UTF-8 text file first" in e for e in errors(at))
    at.get("file_uploader")[0].set_value(("latin1.txt", "café ".encode("latin-1") * 400, "text/plain")).run()
    click(at, "run_train")
    assert any("latin1.txt is not UTF-8 text" in e for e in errors(at))
    at.get("file_uploader")[0].set_value(
        ("notes.txt", ("the quick brown fox " * 200).encode(), "text/plain")
    ).run()
    click(at, "run_train")
    assert not errors(at)
    assert at.session_state[state.KEY_TRAINING].settings["data"] == "notes.txt"


@pytest.mark.slow
def test_too_big_runs_are_refused_with_the_guards_message():
    at = tiny(batch=65_536, seq_len=8192)
    assert any("press “Measure gradient norms”" in c.value for c in at.caption)  # not on view
    click(at, "run_gradnorms")
    assert any("is free (limit 90% of free" in e for e in errors(at))  # the memory guard
    assert state.KEY_GRADNORMS not in at.session_state  # a refused run keeps nothing
    at = tiny(n_layers=8, seq_len=64, batch=8)
    at.number_input(key=P + "steps").set_value(2000).run()
    click(at, "run_train")
    # 4 runs × 2000 steps × 3·forward FLOPs of a 64-wide, 8-block model ≫ 3 TFLOP
    assert any("live runs on the CPU are limited to 3 TFLOP" in e for e in errors(at))


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_asking_for_cuda_without_it_says_so(monkeypatch):
    at = tiny()
    calls = holding_the_slot(monkeypatch, "gradnorms_over_seeds")
    at.selectbox(key=P + "device").set_value("cuda").run()
    assert calls == [] and not errors(at)  # a change starts nothing
    at = click(at, "run_gradnorms")
    assert any("CUDA is not available" in e for e in errors(at))
    made = len(calls)
    at.number_input(key=P + "w_steps").set_value(7).run()  # a refused run is not retried
    assert len(calls) == made and not at.exception
