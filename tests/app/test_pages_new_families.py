"""Every page renders for the families of 2025–26 at their published sizes (DeepSeek-V3's MLA
and DeepSeekMoE, gpt-oss's sinks and experts, Gemma 3's sandwich norms and local:global RoPE,
Gemma 2's soft caps): no exception, no error box, and Home shows the
family's own lines. What a page does not model for a family is said on it (e.g. tensor
parallelism of experts), never a traceback."""

from pathlib import Path

import pytest
from apptest_helpers import errors, metrics, open_page

from llama_lab import ui

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["home.py", *(page.path for page in ui.PAGES)]
FAMILIES = {
    "deepseek-v3": "**MLA**",
    "gpt-oss-20b": "**Attention sinks**",
    "gemma-3-27b": "**Two RoPE bases**",
    "gemma-2-9b": "**Soft-capping**",
    "olmo-2-7b": "**Output norms**",
    "smollm3-3b": "**NoPE blocks**",
    "phi-4-mini": "**Partial RoPE**",
    "glm-4.5-air": "**Partial RoPE**",
    "qwen3-next-80b-a3b": "**Gated DeltaNet**",
    "llama-4-scout": "**Chunked attention**",
    "mistral-small-4": "**Attention temperature**",
    "olmo-3-7b": "**Sliding window**",
    "granite-3.1-8b": "**µP multipliers**",
}
SHOWN_PARAMETERS = {
    "deepseek-v3": "671 bn",
    "gpt-oss-20b": "20.9 bn",
    "gemma-3-27b": "27 bn",
    "gemma-2-9b": "9.24 bn",
    # the published counts (SOURCES.md), as Home rounds them
    "olmo-2-7b": "7.3 bn",
    "smollm3-3b": "3.08 bn",
    "phi-4-mini": "3.84 bn",
    "glm-4.5-air": "107 bn",
    "qwen3-next-80b-a3b": "79.7 bn",
    "llama-4-scout": "108 bn",
    "mistral-small-4": "119 bn",
    "olmo-3-7b": "7.3 bn",
    "granite-3.1-8b": "8.17 bn",
}


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("name", list(FAMILIES))
def test_every_page_renders_for_the_new_families(page, name):
    at = open_page(ROOT / page, {"preset": name, "seq": "4096"}, timeout=240)
    assert not errors(at), errors(at)
    assert at.title, "the page drew nothing"
    if page == "home.py":
        assert any(FAMILIES[name] in m.value for m in at.markdown)
        assert metrics(at)["Parameters"] == SHOWN_PARAMETERS[name]
