"""pages/1_Parameters_and_FLOPs.py through AppTest."""

from pathlib import Path

from apptest_helpers import metrics, open_page
from streamlit.testing.v1 import AppTest

from llama_lab import analysis
from llama_lab.config import PRESETS
from llama_lab.ui import state
from llama_lab.units import escape_markdown, human_count

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "1_Parameters_and_FLOPs.py")


def run_page(query: dict | None = None) -> AppTest:
    return open_page(PAGE, query, timeout=60)


def metric_help(at: AppTest, prefix: str) -> str:
    return next(m for m in at.metric if m.label.startswith(prefix)).proto.help


def test_renders_the_counts_charts_and_formulas():
    at = run_page()
    assert metric_help(at, "Parameters").startswith("43,780,608")
    # seed demo at T=128, B=1, matmuls only (2 per multiply-add):
    #   projections 2·128·(512·512 + 2·512·128 + 512·512)·4 = 671,088,640
    #   scores      4·128²·8·64·4                            = 134,217,728
    #   FFN         2·128·3·512·1365·4                        = 2,146,959,360
    #   lm_head     2·128·512·32000                           = 4,194,304,000
    assert metric_help(at, "Forward FLOPs").startswith("7,146,569,728")
    assert len(at.get("plotly_chart")) == 3
    assert len(at.latex) >= 2
    assert metrics(at)["Forward FLOPs"] == "7.15 GFLOP"  # the label stays short
    block = at.dataframe[0].value.set_index("tensor")
    assert block.params.sum() == 2_753_024  # one block of the demo
    # per tensor, not per component: q 2·128·512·512, k 2·128·512·128 (2 KV heads × 64)
    assert block.loc["q_proj", "forward_flops"] == 67_108_864
    assert block.loc["k_proj", "forward_flops"] == 16_777_216
    # 4 blocks × the column + lm_head = the forward total above
    assert 4 * block.forward_flops.sum() + 4_194_304_000 == 7_146_569_728


def test_moving_a_widget_changes_the_numbers():
    at = run_page()
    at.sidebar.number_input(key=state.KEY_SEQ_LEN).set_value(64).run()
    # T=64: projections and FFN halve, lm_head halves, scores quarter
    expected = (671_088_640 + 2_146_959_360 + 4_194_304_000) // 2 + 134_217_728 // 4
    assert metric_help(at, "Forward FLOPs").startswith(f"{expected:,}")
    at.sidebar.selectbox(key=state.field_key("ffn_type")).set_value("relu").run()
    at.sidebar.radio(key=state.KEY_FFN_RULE).set_value("classic").run()
    # ReLU at 4d: 2·512·2048 = 2,097,152 FFN weights per block instead of 3·512·1365 =
    # 2,096,640: 4 blocks × 512 = +2,048 parameters
    assert metric_help(at, "Parameters").startswith(f"{43_780_608 + 2_048:,}")


def test_invalid_head_dim_under_rope_from_the_url_falls_back_and_from_a_widget_stops():
    at = run_page({"d_model": "72"})  # head_dim 9 with RoPE
    assert any(escape_markdown("head_dim=9") in e.value for e in at.sidebar.error)
    assert metric_help(at, "Parameters").startswith("43,780,608")  # the preset instead
    at.sidebar.number_input(key=state.field_key("d_model")).set_value(72).run()
    assert not at.exception
    assert any(escape_markdown("must be even for pos_encoding='rope'") in e.value for e in at.main.error)
    assert len(at.metric) == 0 and len(at.get("plotly_chart")) == 0


def test_fvcore_cross_check_agrees_with_the_closed_form():
    at = run_page({"preset": "debug"})
    at.toggle(key="llama_lab.page1.fvcore").set_value(True).run()
    assert not at.exception
    shown = {m.label: m.value for m in at.metric}
    assert shown["Difference"] == human_count(0, "FLOP")
    assert metric_help(at, "fvcore") == metric_help(at, "LLaMA Lab")
    assert any("aten::" in c.value for c in at.caption)  # the skipped ops listed


def test_a_mixture_of_experts_shows_total_and_active_and_explains_them():
    at = run_page({"preset": "mixtral-8x7b", "seq": "128"})
    assert not at.exception
    total = next(m for m in at.metric if m.label == "Parameters")
    assert total.proto.help == "46,702,792,704"
    assert "active 12.9 bn" in total.proto.delta  # 2 of 8 experts per token
    assert any("Mixture of experts" in i.value and "12,879,925,248" in i.value for i in at.info)
    block = at.dataframe[0].value.set_index("tensor")
    # each token meets 2 of the 8 experts: 2·B·T·params·k/E; the router is a C → E matmul
    assert block.loc["experts", "forward_flops"] == 2 * 128 * 8 * 3 * 4096 * 14336 * 2 // 8
    assert block.loc["router", "params"] == 4096 * 8


def test_the_2017_encoder_decoder_renders_its_marian_counts():
    at = run_page({"preset": "transformer-2017-base", "seq": "64"})
    assert not at.exception and not at.error
    assert metric_help(at, "Parameters").startswith("63,606,784")  # MarianMTModel's count
    forward = analysis.count_flops(PRESETS["transformer-2017-base"], 64).forward  # encoder + decoder
    assert metric_help(at, "Forward FLOPs").startswith(f"{forward:,}")
