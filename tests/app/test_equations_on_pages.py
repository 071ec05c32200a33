"""Every equation a page writes out multiplies out to the number printed after it (issue "one
derivation per formula"): each page, run under AppTest for today's families — MLA's latent
(DeepSeek-V3), hybrid Gated DeltaNet layers that cache nothing (Qwen3-Next, Qwen3.5), sliding
windows with attention sinks and experts (gpt-oss), windows at 5:1 (Gemma 3), chunked attention
with NoPE layers (Llama 4) and plain GQA (LLaMA-3) — and with int8 / int4 KV caches (scales).

Design: the test reads what the page shows, not how it was made. Every ``st.latex`` is split
into its equations; one whose last side is a number must have a side of numbers before it, and
that side, parsed back (``equation_check``) and evaluated exactly, must equal the printed value.
Checking the screen text itself — rather than asserting that each string equals some
Derivation's rendering — also catches a formula typed by hand, a renderer that writes numbers
its evaluator did not use, and a page that prints a value under a formula it never substituted
(``E = 3.36``). The popovers' plain-text lines (``= numbers = **value**``) are checked the same
way. Symbolic statements (the Jacobians, the seed's 8d² identity) have no numbers to check.
"""

import re
from pathlib import Path

import pytest
from apptest_helpers import open_page
from equation_check import check_latex, check_popover_line, check_text

from llama_lab import analysis
from llama_lab.analysis import derive, derive_memory
from llama_lab.config import PRESETS

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = [
    "deepseek-v3",
    "qwen3-next-80b-a3b",
    "qwen3.5-35b-a3b",
    "gpt-oss-20b",
    "gemma-3-27b",
    "llama-4-scout",
    "llama-3-8b",
]
PAGES = [ROOT / "home.py", *sorted((ROOT / "pages").glob("*.py"))]
# pages that write equations out for the sidebar's model; the others are rendered too
WRITES_EQUATIONS = {"home.py", "1_Parameters_and_FLOPs.py", "2_KV_cache_and_attention.py", "4_Live_pass.py"}
WRITES_EQUATIONS |= {"5_Architecture_comparison.py", "7_Report.py", "8_Inference_systems.py"}


def test_the_pages_without_the_models_equations_state_only_symbols():
    """Seed claims (fixed models) and Gradient norms (theory) write formulas in symbols only."""
    for page in ("6_Seed_claims.py", "3_Gradient_norms.py"):
        at = open_page(ROOT / "pages" / page)
        assert at.latex and checked_equations(at)[0] == []


def checked_equations(at) -> tuple[list[str], int]:
    """(the st.latex equations checked, the popover lines checked) of a rendered page."""
    equations = [eq for element in at.latex for eq in check_latex(element.value)]
    lines = sum(check_popover_line(m.value) for m in at.markdown)
    return equations, lines


def slow_unless_it_writes_equations(page: Path):
    """The pages without a model's equations (Many GPUs, Inside the model, …) in the slow tier."""
    return pytest.param(page, id=page.stem, marks=() if page.name in WRITES_EQUATIONS else pytest.mark.slow)


@pytest.mark.parametrize("page", [slow_unless_it_writes_equations(page) for page in PAGES])
@pytest.mark.parametrize("preset", FAMILIES)
def test_every_equation_on_every_page_multiplies_out(page, preset):
    at = open_page(page, {"preset": preset, "seq": "4096", "batch": "2"}, timeout=300)
    equations, lines = checked_equations(at)
    if page.name in WRITES_EQUATIONS:
        assert equations, f"{page.name} wrote no equation for {preset}"


@pytest.mark.parametrize("kv", ["int8", "int4", "fp8"])
@pytest.mark.parametrize("preset", ["deepseek-v3", "qwen3-next-80b-a3b", "gpt-oss-20b"])
@pytest.mark.parametrize(
    "page", ["home.py", "pages/2_KV_cache_and_attention.py", "pages/8_Inference_systems.py"]
)
def test_a_quantised_cache_writes_its_scales_out(page, preset, kv):
    at = open_page(ROOT / page, {"preset": preset, "kv": kv, "weights": "int4"}, timeout=300)
    equations, _ = checked_equations(at)
    per_token = analysis.kv_cache_bytes_per_token(PRESETS[preset], kv)
    assert any(eq.endswith(f"= {per_token:,}") for eq in equations), equations
    if kv != "fp8":  # int8 / int4: every vector's fp16 scale, s = 2 bytes
        assert any(r"\cdot b + s" in eq for eq in equations)


def test_home_writes_the_latent_for_deepseek_and_the_attention_blocks_for_qwen3_next():
    """The issue's two cases: DeepSeek-V3's line read 2·61·128·192·2 = 70,272 (that product is
    5,996,544: MLA caches the latent) and Qwen3-Next's 2·48·2·256·2 = 24,576 (its own product
    is 98,304: only 12 of the 48 blocks hold K and V)."""
    at = open_page(ROOT / "home.py", {"preset": "deepseek-v3"})
    (line,) = [m.value.strip("$\n") for m in at.latex if "KV bytes per token" in m.value]
    assert line.endswith(r"= 61 \cdot \left(1,024 + 128\right) = 70,272")
    assert r"b_{\text{latent}} = d_c \cdot b = 512 \cdot 2 = 1,024" in line
    at = open_page(ROOT / "home.py", {"preset": "qwen3-next-80b-a3b"})
    (line,) = [m.value.strip("$\n") for m in at.latex if "KV bytes per token" in m.value]
    assert line.endswith(
        r"2 \cdot L_{\text{attn}} \cdot G \cdot b_{\text{head}} = 2 \cdot 12 \cdot 2 \cdot 512 = 24,576"
    )


def test_the_home_line_uses_the_caches_format_not_the_compute_dtype():
    at = open_page(ROOT / "home.py", {"preset": "llama-3-8b", "dtype": "bf16", "kv": "fp8"})
    (line,) = [m.value.strip("$\n") for m in at.latex if "KV bytes per token" in m.value]
    assert line.endswith(r"= 2 \cdot 32 \cdot 8 \cdot 128 = 65,536")  # 1 byte per element, not 2


def test_the_derivation_texts_multiply_out():
    """The plain-text form (the decode panel's message, the seed claims) by the same reading."""
    for name in FAMILIES:
        cfg = PRESETS[name]
        for d in (
            derive_memory.kv_cache(cfg, 5000, 3, "int4"),
            derive.params_total(cfg),
            derive.forward_flops(cfg, 512, 2),
            derive.score_flops_per_token(cfg, 3000),
            derive.palm_training_per_token(cfg, 2048),
        ):
            check_text(d.text())


def test_the_decode_panel_writes_one_rows_prediction_out():
    from llama_lab.experiments import ExperimentEntry, decode_benchmark
    from llama_lab.ui.panels.decode import _example

    cfg = PRESETS["debug"]
    bench = decode_benchmark(cfg, (8, 16), batch=2, device="cpu", dtype="fp32", new_tokens=2)
    frame = bench.to_frame()
    longest = frame[frame.context_len == frame.context_len.max()]
    message = re.sub(r"\\(.)", r"\1", _example(ExperimentEntry("decode", bench, cfg, {}), longest))
    first = longest.iloc[0]
    assert message.endswith(f" = {first.cache_bytes_measured:,}.")
    check_text(message.split(": ", 1)[1].rstrip("."))
