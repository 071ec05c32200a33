"""The sparse attention pattern on the pages (AppTest): the mask drawn on the KV cache &
attention page, the score FLOPs against T on the Parameters & FLOPs page."""

from pathlib import Path

from apptest_helpers import chart_title, charts, open_page

from llama_lab import analysis
from llama_lab.config import PRESETS

ROOT = Path(__file__).resolve().parents[2] / "pages"
PATTERN = {"preset": "seed-demo", "sliding_window": "16", "global_tokens": "4", "dilation": "2"}


def test_the_kv_page_draws_the_mask_and_says_what_the_cache_keeps():
    at = open_page(ROOT / "2_KV_cache_and_attention.py", PATTERN, timeout=60)
    mask = [c for c in charts(at) if chart_title(c).startswith("Which keys")]
    assert len(mask) == 1
    assert chart_title(mask[0]).endswith("window W=16, dilation d=2, global G=4")
    z = mask[0]["data"][0]["z"]
    # row 40 sees 40, 38, …, 10 (its window: code 2) and 0 … 3 (global: code 3), nothing else
    assert [j for j, code in enumerate(z[40]) if code == 2] == list(range(10, 41, 2))
    assert [j for j, code in enumerate(z[40]) if code == 3] == [0, 1, 2, 3]
    assert any("keep at most 35 tokens" in c.value for c in at.caption)  # 4 + (16 − 1)·2 + 1


def test_the_parameters_page_draws_the_score_cost_against_t():
    at = open_page(ROOT / "1_Parameters_and_FLOPs.py", PATTERN, timeout=60)
    cost = [c for c in charts(at) if chart_title(c).startswith("Score FLOPs against T")]
    assert len(cost) == 1
    dense, pattern = cost[0]["data"]
    cfg = PRESETS["seed-demo"].replace(sliding_window=16, global_tokens=4, dilation=2)
    T = int(pattern["x"][-1])
    assert pattern["y"][-1] == analysis.count_flops(cfg, T).attention_scores_causal
    assert dense["y"][-1] == analysis.count_flops(PRESETS["seed-demo"], T).attention_scores_causal


def test_the_many_gpus_page_refuses_a_throughput_estimate_by_name():
    at = open_page(ROOT / "10_Many_GPUs.py", PATTERN, timeout=60)
    assert any(
        "predict train is not predicted for a sparse attention pattern" in c.value.replace("\\", "")
        for c in at.caption
    )


def test_the_sidebar_sets_the_pattern_and_the_page_follows():
    from llama_lab.ui import state

    at = open_page(ROOT / "2_KV_cache_and_attention.py", {"preset": "seed-demo", "sliding_window": "16"})
    titles = [e.proto.label for e in at.sidebar.get("expander")]
    assert "Sparse attention on the window (Longformer, BigBird)" in titles
    at.sidebar.number_input(key=state.field_key("global_tokens")).set_value(4).run()
    assert not at.exception and not at.sidebar.error
    (mask,) = [c for c in charts(at) if chart_title(c).startswith("Which keys")]
    assert chart_title(mask).endswith("window W=16, global G=4")
    # without a window the pattern is refused by name, next to its field
    at.sidebar.number_input(key=state.field_key("sliding_window")).set_value(0).run()
    assert any("needs sliding_window > 0" in e.value.replace("\\", "") for e in at.sidebar.error)
