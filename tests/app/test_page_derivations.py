"""Every headline number opens its derivation on the page that shows it (issue 14), through
AppTest: the Parameters page's counts and their conventions, the cache on Home and the KV page,
the stored weights on Inference systems. The derivations themselves: tests/unit/analysis/
test_derive.py."""

from pathlib import Path

import pytest
from apptest_helpers import open_page

from llama_lab import analysis
from llama_lab.config import PRESETS

ROOT = Path(__file__).resolve().parents[2]


def test_the_parameters_page_opens_each_derivation_and_its_conventions():
    at = open_page(ROOT / "pages" / "1_Parameters_and_FLOPs.py", {"preset": "seed-demo"})
    text = " ".join(m.value for m in at.markdown)
    assert "= 4 · 2,753,024 + 32,000 · 512 + 1 · 32,000 · 512 + 512 = **43,780,608**" in text
    flops = analysis.count_flops(PRESETS["seed-demo"], 128, 1)
    assert f"**{flops.forward:,}**" in text
    at.radio(key="llama_lab.page1.forward").set_value("causal half (T(T+1)/2 pairs)").run()
    text = " ".join(m.value for m in at.markdown)
    assert f"**{flops.forward_causal:,}**" in text
    at.radio(key="llama_lab.page1.training").set_value("6N, N without the embeddings").run()
    params = analysis.count_params(PRESETS["seed-demo"])
    assert f"**{6 * params.non_embedding * 128:,}**" in " ".join(m.value for m in at.markdown)


@pytest.mark.parametrize(
    "page,query,expected",
    [
        ("home.py", {"preset": "llama-3-8b", "kv": "fp8"}, "= 2 · 32 · 8 · 128 = **65,536**"),
        ("pages/2_KV_cache_and_attention.py", {"preset": "seed-demo"}, "= 2 · 4 · 8 · 128 = **8,192**"),
        ("pages/8_Inference_systems.py", {"preset": "llama-3-8b", "weights": "int4"}, "**5,700,591,616**"),
    ],
)
def test_other_pages_open_their_numbers_derivations(page, query, expected):
    at = open_page(ROOT / page, query, timeout=120)
    assert expected in " ".join(m.value for m in at.markdown)
