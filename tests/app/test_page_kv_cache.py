"""pages/2_KV_cache_and_attention.py through AppTest."""

from pathlib import Path

from apptest_helpers import chart_title, charts, open_page
from streamlit.testing.v1 import AppTest

from llama_lab import analysis
from llama_lab.analysis import rooflines
from llama_lab.config import PRESETS
from llama_lab.ui import state
from llama_lab.units import escape_markdown, human_bytes

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "2_KV_cache_and_attention.py")
KEY_GPU = "llama_lab.page2.gpu"
KEY_CONTEXT = "llama_lab.page2.context"


def run_page(query: dict | None = None) -> AppTest:
    return open_page(PAGE, query, timeout=60)


def variant_metrics(at: AppTest) -> dict:
    return {m.label.split(" ·")[0]: m.value for m in at.metric}


def fit_lines(at: AppTest) -> list[str]:
    return [m.value for m in at.markdown if "longest context" in m.value]


def test_mha_gqa_mqa_side_by_side_for_the_demo():
    at = run_page()
    # 2 (K, V) · 4 layers · G KV heads · 64 head dim · 2 bytes: G = 8, 2, 1
    assert variant_metrics(at) == {
        "MHA": human_bytes(8192) + "/token",
        "GQA (this model)": human_bytes(2048) + "/token",
        "MQA": human_bytes(1024) + "/token",
    }
    # H100 80GB = 81,559 MiB reported less the 300 MB CUDA context; GQA weights 2 · 43,780,608
    # bytes; (85,220,809,984 − 87,561,216) // 2048, shown capped at the model's 128-token
    # context, memory's figure beside it
    assert "**128 (capped at the model's context length" in fit_lines(at)[1]
    assert (
        f"memory alone holds {(81_559 * 2**20 - 300 * 10**6 - 87_561_216) // 2048:,})**" in fit_lines(at)[1]
    )
    assert len(at.get("plotly_chart")) == 4  # diagram, memory curve, roofline, tokens/s


def test_gpu_batch_and_context_changes_update_the_fit_and_roofline():
    at = run_page()
    at.selectbox(key=KEY_GPU).set_value("L4").run()
    # L4 = 23,034 MiB less the context: (…− 87,561,216) // 2048
    assert (
        f"memory alone holds {((23_034 * 2**20 - 300 * 10**6) - 87_561_216) // 2048:,})**" in fit_lines(at)[1]
    )
    at.sidebar.number_input(key=state.KEY_BATCH).set_value(4).run()
    assert (
        f"memory alone holds {((23_034 * 2**20 - 300 * 10**6) - 87_561_216) // (4 * 2048):,})**"
        in fit_lines(at)[1]
    )
    at.select_slider(key=KEY_CONTEXT).set_value(4096).run()
    assert not at.exception
    assert chart_title(charts(at)[2]).startswith("Decode roofline at context 4,096 ")


def test_a_model_too_big_for_the_gpu_says_so_with_its_own_weights():
    at = run_page({"preset": "llama-3.1-405b"})
    # the model's own (GQA) weights at bf16: 2 B × 405,853,388,800 = 756 GiB — not the MQA
    # variant's smaller ones
    warnings = [w.value for w in at.warning if "do not fit" in w.value]
    assert (
        len(warnings) == 1
        and f"({human_bytes(2 * 405_853_388_800)} at bf16)" in warnings[0]
        and "756 GiB" in warnings[0]
    )
    assert variant_metrics(at)["GQA (this model)"] == human_bytes(2 * 126 * 8 * 128 * 2) + "/token"


def test_the_cache_formula_is_split_and_readable_for_a_large_cache():
    at = run_page({"preset": "llama-2-70b", "seq": "4096", "batch": "64"})
    # the formulas sit under the answer, in their expander
    (box,) = [e for e in at.get("expander") if e.proto.label.startswith("How the cache is counted")]
    first, second = [m.value.strip("$\n") for m in box.latex][:2]
    # 2 (K, V) · 80 layers · 8 KV heads · 128 · 2 bytes = 327,680 B/token
    assert first.endswith("= 327,680")
    # × 64 sequences × 4,096 tokens = 85,899,345,920 bytes = 80 GiB, written in binary units
    assert r"327,680 \cdot 64 \cdot 4,096" in second and r"\text{80 GiB}" in second
    assert any("85,899,345,920 bytes" in c.value for c in at.caption)


def test_kv_head_mismatch_from_the_url_and_widget_shows_the_rule():
    at = run_page({"preset": "seed-demo", "n_kv_heads": "3"})
    assert any(
        escape_markdown("n_heads=8 is not divisible by n_kv_heads=3") in e.value for e in at.sidebar.error
    )
    at.sidebar.number_input(key=state.field_key("n_heads")).set_value(16).run()
    at.sidebar.selectbox(key=state.field_key("n_kv_heads")).set_value(16).run()
    at.sidebar.number_input(key=state.field_key("n_heads")).set_value(8).run()
    assert not at.exception
    assert any(
        escape_markdown("n_heads=8 is not divisible by n_kv_heads=16") in e.value for e in at.main.error
    )
    assert len(at.metric) == 0


def test_the_weights_and_the_cache_are_stored_apart_in_the_fits_and_the_roofline():
    at = run_page({"preset": "llama-3-8b", "seq": "8192", "weights": "int4", "kv": "fp8"})
    # fp8 cache: 2 · 32 layers · 8 KV heads · 128 · 1 byte = 65,536 bytes per token
    assert variant_metrics(at)["GQA (this model)"] == human_bytes(65_536) + "/token"
    weights = analysis.weight_bytes(PRESETS["llama-3-8b"], "int4")
    assert weights == 5_700_591_616  # analysis.quant, checked in test_quant
    assert (
        f"memory alone holds {((81_559 * 2**20 - 300 * 10**6) - weights) // 65_536:,})**" in fit_lines(at)[1]
    )
    assert "weights int4, cache fp8" in " ".join(c.value for c in at.caption)
    roof = rooflines.roofline(
        PRESETS["llama-3-8b"], "H100 80GB", 1, 8192, "bf16", weights="int4", kv_dtype="fp8"
    )
    assert roof.kv_cache_bytes == 65_536 * 8193  # the cache read + the new token written
    assert at.query_params["weights"] == "int4" and at.query_params["kv"] == "fp8"


def test_an_old_link_with_a_storage_dtype_computes_in_bf16_and_stores_both_at_it():
    at = run_page({"preset": "seed-demo", "dtype": "int8"})
    assert at.sidebar.selectbox(key=state.KEY_DTYPE).value == "bf16"
    assert at.sidebar.selectbox(key=state.KEY_WEIGHT_DTYPE).value == "int8"
    assert at.sidebar.selectbox(key=state.KEY_KV_DTYPE).value == "int8"
    # int8 cache: 2 · 4 · 2 · (64 · 1 + 2 bytes of fp16 scale) per token
    assert variant_metrics(at)["GQA (this model)"] == human_bytes(2 * 4 * 2 * 66) + "/token"
    assert not at.main.error


def test_a_dsa_models_decode_cost_stops_growing_past_its_top_k_beside_mla_and_gqa():
    at = run_page({"preset": "deepseek-v3.2-exp", "seq": "4096"})
    assert not at.exception and not at.main.error
    cfg = PRESETS["deepseek-v3.2-exp"]
    (figure,) = [c for c in charts(at) if chart_title(c).startswith("Decoding one token: DSA attends")]
    lines = {trace["name"]: trace for trace in figure["data"] if trace["xaxis"] == "x"}
    dsa, mla = lines["DSA (this model)"], lines["MLA over every key (no indexer)"]
    assert "GQA (16 KV heads)" in lines and "of which the indexer" in lines
    # the figure's numbers are the analysis': a token at S = 131,072 attends 2,048 latents
    at_long = analysis.decode_flops(cfg, 131_072).by_component
    assert dsa["y"][-1] == at_long["attention_scores"] + at_long["indexer_scores"]
    # MLA over every key: 64 times the 2,048 keys' score FLOPs
    assert mla["y"][-1] == 64 * at_long["attention_scores"]
    caption = " ".join(c.value for c in at.caption)
    assert f"{analysis.kv.decode_read_bytes(cfg, 131_072):,} bytes read" in caption
    # serving on several GPUs does not follow the top-k: refused in one line
    warnings = " ".join(w.value for w in at.warning).replace("\\", "")
    assert "Serving on several GPUs does not model DeepSeek Sparse Attention" in warnings


def test_an_encoder_says_it_caches_nothing_and_shows_no_cache():
    at = run_page({"preset": "bert-base-uncased"})
    assert not at.exception and not at.main.error
    assert any("caches nothing" in info.value for info in at.main.info)
    assert len(at.main.get("plotly_chart")) == 0 and len(at.dataframe) == 0


def test_the_2017_encoder_decoder_says_what_it_caches():
    at = run_page({"preset": "transformer-2017-base", "seq": "64"})
    assert not at.exception and not at.error
    shown = {m.label: m.value for m in at.metric}
    # 6 decoder blocks · (K, V) · 8 heads · 64 · 2 bytes, per target token and per source token
    assert shown["Self-attention, per generated token"] == human_bytes(12_288)
    assert shown["Cross-attention, per source token (fixed)"] == human_bytes(12_288)
    assert any("encoder caches nothing" in m.value for m in at.markdown)
