"""A context answer never goes past the model's own context length without saying so, and the
searches' upper end (2²⁴) is never shown as a fit (issue 27: the 44M demo "fits 39,019,745
tokens" on one H100 and 16,777,216 on eight, with max_seq_len 128)."""

from pathlib import Path

from apptest_helpers import errors, metrics, open_page

from llama_lab import analysis
from llama_lab.config import PRESETS
from llama_lab.ui.context import capped_context, context_text

ROOT = Path(__file__).resolve().parents[2]


def test_the_cap_and_what_memory_holds_are_both_said():
    cfg = PRESETS["seed-demo"]  # max_seq_len 128
    fits = analysis.max_context_that_fits(cfg, "H100 80GB")
    assert fits > 10**6
    shown, note = capped_context(fits, cfg)
    assert shown == 128 and f"max_seq_len 128); memory alone holds {fits:,}" in note
    # the serving search's upper end is not a fit: said as a lower bound
    assert context_text(1 << 24, cfg).endswith("memory holds at least 16,777,216 (the search stops at 2²⁴))")
    assert capped_context(100, cfg) == (100, "") and context_text(100, cfg) == "100"


def test_the_pages_show_the_capped_answer():
    at = open_page(ROOT / "pages" / "8_Inference_systems.py", {"preset": "seed-demo"}, timeout=180)
    assert not errors(at) and metrics(at)["longest context on H100 80GB (B=1)"] == "128"
    assert any("capped at the model's context length" in c.value for c in at.caption)
    at = open_page(ROOT / "pages" / "10_Many_GPUs.py", {"preset": "seed-demo"}, timeout=180)
    text = " ".join(m.value for m in at.markdown)
    assert "fits **128 (capped at the model's context length" in text
