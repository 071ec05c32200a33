"""app.py through AppTest: the navigation it registers ("Home" first, then the pages under
their own titles), and its default page home.py — the config summary, page links, errors, and
the sidebar state surviving a page switch."""

from pathlib import Path

import streamlit as st
from apptest_helpers import metrics, open_page
from streamlit.testing.v1 import AppTest

from llama_lab.ui import state
from llama_lab.units import escape_markdown, human_bytes, human_params

ROOT = Path(__file__).resolve().parents[2]
APP, HOME = str(ROOT / "app.py"), str(ROOT / "home.py")


def run_app(query: dict | None = None, script: str = APP) -> AppTest:
    return open_page(script, query, timeout=60)


def test_home_summarises_the_seed_demo():
    at = run_app()
    shown = metrics(at)
    assert shown["Parameters"] == human_params(43_780_608)  # the seed's printed total
    assert at.metric[0].proto.help.startswith("43,780,608")  # exact in the tooltip
    assert shown["Attention"] == "GQA" and at.metric[1].delta == "8 q / 2 kv heads"
    # 2 (K, V) · 4 layers · 2 KV heads · 64 head dim · 2 bytes (bf16) = 2048
    assert shown["KV cache per token (bf16)"] == human_bytes(2048)
    assert at.metric[2].proto.help.startswith("2,048 bytes")
    assert shown["Forward FLOPs per token"].endswith("MFLOP")
    links = [link.proto.page for link in at.get("page_link")]
    assert {
        "Parameters_and_FLOPs",
        "KV_cache_and_attention",
        "Architecture_comparison",
        "Seed_claims",
    } <= set(links)


def test_navigation_lists_home_then_the_pages_by_their_file_titles(monkeypatch):
    registered, original = [], st.navigation

    def record(pages, **kwargs):
        registered.extend(pages)
        return original(pages, **kwargs)

    monkeypatch.setattr(st, "navigation", record)
    at = run_app()
    assert [(page.title, page.url_path) for page in registered] == [
        ("Home", ""),
        ("Parameters and FLOPs", "Parameters_and_FLOPs"),
        ("KV cache and attention", "KV_cache_and_attention"),
        ("Gradient norms", "Gradient_norms"),
        ("Live pass", "Live_pass"),
        ("Architecture comparison", "Architecture_comparison"),
        ("Seed claims", "Seed_claims"),
        ("Report", "Report"),
        ("Inference systems", "Inference_systems"),
        ("Inside the model", "Inside_the_model"),
        ("Many GPUs", "Many_GPUs"),
        ("Validation", "Validation"),
        ("Fine tuning", "Fine_tuning"),
        ("Scaling laws", "Scaling_laws"),
    ]
    assert registered[0].icon == "🦙"  # url_path "": the default
    assert at.title[0].value == "🦙 LLaMA Lab"  # the default page is home.py


def test_home_page_runs_alone_with_the_same_content():
    at = run_app(script=HOME)
    assert metrics(at)["Parameters"] == human_params(43_780_608)
    assert [link.proto.page for link in at.get("page_link")] == [
        "Parameters_and_FLOPs",
        "KV_cache_and_attention",
        "Gradient_norms",
        "Live_pass",
        "Architecture_comparison",
        "Seed_claims",
        "Report",
        "Inference_systems",
        "Inside_the_model",
        "Many_GPUs",
        "Validation",
        "Fine_tuning",
        "Scaling_laws",
    ]


def test_widget_change_updates_the_summary_and_the_url():
    at = run_app()
    at.sidebar.number_input(key=state.field_key("n_layers")).set_value(8).run()
    # 8 blocks of 2,753,024 + 512 final norm + 2 × 16,384,000 embeddings = 54,792,704
    assert metrics(at)["Parameters"] == human_params(54_792_704)
    assert at.metric[0].proto.help == "54,792,704"
    assert metrics(at)["KV cache per token (bf16)"] == human_bytes(4096)
    assert at.query_params["n_layers"] == "8"
    at.sidebar.selectbox(key=state.field_key("n_kv_heads")).set_value(8).run()
    assert metrics(at)["Attention"] == "MHA" and at.metric[1].delta == "8 q / 8 kv heads"


def test_invalid_config_shows_the_rule_and_nothing_else():
    at = run_app({"preset": "seed-demo"})
    at.sidebar.number_input(key=state.field_key("n_heads")).set_value(6).run()
    assert not at.exception
    assert any(escape_markdown("d_model=512 is not divisible by n_heads=6") in e.value for e in at.main.error)
    assert len(at.metric) == 0
    # the URL is not rewritten while the values break a rule, and the page says so
    assert "n_heads" not in at.query_params and at.query_params["preset"] == "seed-demo"
    assert state.LINK_NOTE in [c.value for c in at.main.caption]
    assert state.LINK_NOTE in [c.value for c in at.sidebar.caption]


def test_bad_link_falls_back_to_the_preset_with_an_error():
    at = run_app({"preset": "llama-2-7b", "n_kv_heads": "5"})
    assert any(
        escape_markdown("n_heads=32 is not divisible by n_kv_heads=5") in e.value for e in at.sidebar.error
    )
    assert metrics(at)["Attention"] == "MHA" and at.metric[1].delta == "32 q / 32 kv heads"


def test_sidebar_state_survives_a_page_switch():
    at = run_app()
    at.sidebar.number_input(key=state.field_key("d_model")).set_value(1024).run()
    at.switch_page("pages/1_Parameters_and_FLOPs.py").run()
    assert not at.exception
    assert at.sidebar.number_input(key=state.field_key("d_model")).value == 1024
    # d=1024, ffn ⌊8/3·1024⌋ = 2730: 4 blocks × (2·1024² + 2·1024·256 + 3·1024·2730 + 2·1024)
    # + 1024 + 2 · 32000 · 1024 = 109,577,216
    assert next(m for m in at.metric if m.label == "Parameters").proto.help.startswith("109,577,216")
