"""pages/4_Live_pass.py through AppTest: default render, a tiny live pass and decode benchmark,
and the refusals (fp16 or CUDA on a CPU machine, runs too big) shown with st.error."""

import math
from pathlib import Path

import pytest
import torch
from apptest_helpers import click as click_key
from apptest_helpers import errors, holding_the_slot, metrics, open_page
from streamlit.testing.v1 import AppTest

from llama_lab import analysis
from llama_lab.config import PRESETS, small_training_config
from llama_lab.ui import state
from llama_lab.units import human_bytes, human_count

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "4_Live_pass.py")
P = "llama_lab.page4."


def click(at: AppTest, button: str) -> AppTest:
    return click_key(at, P + button)


def run_page(query: dict | None = None) -> AppTest:
    return open_page(PAGE, query, timeout=120)


def tiny(at: AppTest) -> AppTest:
    at.number_input(key=P + "seq_len").set_value(16)
    at.number_input(key=P + "batch").set_value(2)
    at.number_input(key=P + "iters").set_value(1)
    return at.run()


def test_default_page_runs_the_sidebar_model_and_shows_the_formulas():
    at = run_page()
    assert at.radio(key=P + "model").value == "sidebar"  # the demo fits the budget
    assert "vocab 32,000 (43,780,608 parameters)" in at.caption[0].value
    assert any(r"\text{MFU}" in m.value for m in at.latex)
    assert not errors(at) and len(at.metric) == 0


def test_a_big_preset_defaults_to_the_scaled_down_copy():
    at = run_page({"preset": "llama-3-8b"})
    assert at.radio(key=P + "model").value == "small"
    # llama-3-8b is GQA (32 q / 8 kv): the copy keeps 4 queries per KV head, 8 q / 2 KV
    assert "d=64, 4 blocks, 8 heads / 2 KV" in at.caption[0].value and "vocab 256" in at.caption[0].value
    # the scaled-down copy is small_training_config at the chosen depth
    at.number_input(key=P + "n_layers").set_value(2).run()
    at.number_input(key=P + "seq_len").set_value(8).run()
    at.number_input(key=P + "iters").set_value(1).run()
    at.button(key=P + "run_live").click().run()
    small = small_training_config(PRESETS["llama-3-8b"]).replace(n_layers=2)
    assert at.session_state[state.KEY_LIVE_PASS].config == small


def test_live_pass_shows_times_throughput_mfu_memory_and_loss(monkeypatch):
    seen = holding_the_slot(monkeypatch, "live_pass")
    at = click(tiny(run_page({"preset": "debug"})), "run_live")
    assert seen == [1]  # ran inside runs.exclusive_run
    live = at.session_state[state.KEY_LIVE_PASS].result
    shown = metrics(at)
    assert shown["ln V"] == f"{math.log(256):.4f}" == "5.5452"
    assert shown["Tokens/s"] == human_count(live.tokens_per_s)
    assert next(m for m in at.metric if m.label == "Tokens/s").proto.help.startswith(
        f"{live.tokens_per_s:,.0f}"
    )
    assert math.isclose(live.tokens_per_s, 2 * 16 / (live.step_ms / 1e3), rel_tol=1e-9)
    assert shown["MFU"] == f"{live.mfu:.1%}"
    # the debug model's initial loss sits near ln 256 (N(0, 0.02) init: near-uniform softmax)
    assert abs(live.initial_loss - math.log(256)) < 0.2
    assert any("MFU is measured against" in c.value and live.peak_flops_source in c.value for c in at.caption)
    assert len(at.get("plotly_chart")) == 1
    logits = at.dataframe[1].value
    assert list(logits.logits) == ["with final norm", "without final norm"]
    # the causal-attention MFU beside the full-T×T one, explained
    mfu = next(m for m in at.metric if m.label == "MFU")
    assert mfu.delta == f"causal scores: {live.mfu_causal:.1%}"
    assert live.mfu_causal < live.mfu and any("is_causal=True" in c.value for c in at.caption)
    # the lab's one convention, named where the MFU is shown
    assert analysis.MFU_CONVENTION in mfu.proto.help
    assert any(analysis.MFU_CONVENTION in c.value for c in at.caption)
    # on the CPU the peak is the tensors added up: labelled an estimate
    label = "Peak memory" if "Peak memory" in shown else "Peak memory (estimate)"
    assert shown[label] == human_bytes(live.peak_memory_bytes)
    memory = at.dataframe[0].value.set_index("component")
    assert memory.notna().all().all()  # every prediction filled in
    # fp32 weights and gradients: measured tensor bytes = analysis.training_memory's 4 B/param
    params = analysis.count_params(PRESETS["debug"]).total
    assert memory.loc["weights", "measured_bytes"] == memory.loc["weights", "predicted_bytes"] == 4 * params
    assert memory.loc["gradients", "predicted_bytes"] == 4 * params
    assert memory.loc["weights", "measured"] == human_bytes(4 * params)


def test_decode_benchmark_bytes_match_the_hand_count(monkeypatch):
    seen = holding_the_slot(monkeypatch, "decode_benchmark")
    at = tiny(run_page({"preset": "debug"}))
    at.multiselect(key=P + "contexts").set_value([8, 16])
    at.number_input(key=P + "new_tokens").set_value(2).run()
    click(at, "run_decode")
    assert seen == [1]
    bench = at.session_state[state.KEY_DECODE].result
    assert [s.value for s in at.success][0].startswith("Measured cache bytes equal")
    # fp32 cache: 2 (K, V) · 2 layers · G KV heads · 16 head dim · 4 bytes · B=2 · tokens
    for row in bench.rows:
        assert row.cache_bytes_measured == 2 * 2 * row.n_kv_heads * 16 * 4 * 2 * row.cache_tokens
    assert {row.variant for row in bench.rows} == {"mha", "gqa", "mqa"}
    assert [k for k in metrics(at) if "KV head" in k] == [
        "MHA · 4 KV heads",
        "GQA · 2 KV heads",
        "MQA · 1 KV head",
    ]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_gpu_only_choices_are_refused_on_a_cpu_machine():
    at = tiny(run_page({"preset": "debug"}))
    at.selectbox(key=P + "dtype").set_value("fp16").run()
    click(at, "run_live")
    assert any("dtype='fp16' is refused on the CPU" in e for e in errors(at))
    at.selectbox(key=P + "dtype").set_value("fp32")
    at.selectbox(key=P + "device").set_value("cuda").run()
    click(at, "run_decode")
    assert any("CUDA is not available" in e for e in errors(at))
    assert state.KEY_LIVE_PASS not in at.session_state


def test_too_big_runs_are_refused_before_anything_runs():
    at = run_page({"preset": "debug"})
    at.number_input(key=P + "batch").set_value(65_536).run()
    click(at, "run_live")
    assert any("is free (limit 90% of free" in e for e in errors(at))  # the memory guard
    at = run_page()  # the demo model at B=40, T=128: ~2 GB, but 5 steps × 0.9 TFLOP
    at.number_input(key=P + "batch").set_value(40).run()
    click(at, "run_live")
    assert any("live runs on the CPU are limited to 3 TFLOP" in e for e in errors(at))


def test_a_sequence_length_cut_by_the_copy_comes_back_with_the_sidebars_model():
    at = run_page({"preset": "seed-demo"})  # max_seq_len 128
    at.radio(key=P + "model").set_value("sidebar").run()
    at.number_input(key=P + "seq_len").set_value(128).run()
    at.radio(key=P + "model").set_value("small").run()  # the copy holds 64 tokens
    assert at.number_input(key=P + "seq_len").value == 64
    assert any("128 is above the maximum 64" in c.value for c in at.caption)
    at.radio(key=P + "model").set_value("sidebar").run()  # the bound is gone: 128 again
    assert at.number_input(key=P + "seq_len").value == 128
    assert not any("above the maximum" in c.value for c in at.caption)
    assert not at.exception


def test_a_t_cut_by_the_copy_follows_the_sidebar_when_the_copy_is_left():
    """The T the copy cut was the sidebar's (the default, not a value typed here): it comes back
    as the sidebar's T of then, with no stale note, and a link never holds the cut value."""
    at = run_page({"preset": "seed-demo"})  # T = 128, the copy holds 64
    at.radio(key=P + "model").set_value("small").run()
    assert at.number_input(key=P + "seq_len").value == 64 and "live.seq_len" not in at.query_params
    at.sidebar.number_input(key=state.KEY_SEQ_LEN).set_value(96).run()
    assert any("96 is above the maximum 64" in c.value for c in at.caption)  # the note follows
    at.radio(key=P + "model").set_value("sidebar").run()
    assert at.number_input(key=P + "seq_len").value == 96  # the sidebar's, not the old 128
    assert not any("above the maximum" in c.value for c in at.caption)
    # the sidebar's model shrinks to the copy's 64 while the copy is shown: T is simply 64 now
    at.radio(key=P + "model").set_value("small").run()
    at.sidebar.number_input(key=state.field_key("max_seq_len")).set_value(64).run()
    assert not any("above the maximum" in c.value for c in at.caption)
    at.radio(key=P + "model").set_value("sidebar").run()
    assert (
        at.number_input(key=P + "seq_len").value == 64 == at.sidebar.number_input(key=state.KEY_SEQ_LEN).value
    )
    assert not any("above the maximum" in c.value for c in at.caption)
    assert "live.seq_len" not in at.query_params and not at.exception


def test_a_pass_calibrates_the_device_and_the_next_step_is_predicted_before_it_runs():
    """Issue 28 §3: the first pass measures this device's one-token overhead, forward + backward
    rate and AdamW time per parameter; the next pass, at another batch, is predicted from them
    before it runs (hand-derived here from the first pass's own timings: on a CPU the overhead
    and the FLOPs add) and shown beside what it measured."""
    from llama_lab.analysis import count_params
    from llama_lab.validation.device import causal_training_flops

    at = click(tiny(run_page({"preset": "debug"})), "run_live")
    first = at.session_state[state.KEY_LIVE_PASS].result
    assert any("This pass calibrates the device" in c.value for c in at.caption)
    at.number_input(key=P + "batch").set_value(4).run()
    caption = next(c.value for c in at.caption if c.value.startswith("The next step should take"))
    overhead, compute = first.overhead_ms, first.step_ms - first.optimizer_ms
    assert 0 < overhead
    flops = causal_training_flops(PRESETS["debug"], first.seq_len, first.batch)
    rate = (
        min(flops / (compute - overhead), first.peak_flops * 1e-3)
        if compute > overhead
        else first.peak_flops * 1e-3
    )
    predicted_ms = overhead + causal_training_flops(PRESETS["debug"], 16, 4) / rate + first.optimizer_ms
    assert count_params(PRESETS["debug"]).total == first.n_params  # the same model: the same update
    assert f"{predicted_ms:,.1f} ms" in caption and f"calibrated on {first.device_name}" in caption
    at = click(at, "run_live")
    entry = at.session_state[state.KEY_LIVE_PASS]
    assert entry.settings["predicted_step_ms"] == pytest.approx(predicted_ms)
    shown = metrics(at)
    measured = entry.result.step_ms
    assert (
        shown["Predicted step"] == f"{predicted_ms:,.1f} ms"
        and shown["Measured step"] == f"{measured:,.1f} ms"
    )
    assert shown["Error"] == f"{(predicted_ms - measured) / measured:+.1%}"
