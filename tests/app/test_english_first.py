"""English first (issue 27): no page shows the tutorial's Chinese outside a place that keeps the
original on purpose (an expander or a tooltip naming it), so no page needs CJK fonts to read."""

import re
from pathlib import Path

import pytest
from apptest_helpers import errors, open_page

ROOT = Path(__file__).resolve().parents[2]
CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
ORIGINAL = ("Chinese original", "seed's own table")  # expanders that keep the original


def shown_text(node, out: list) -> list:
    """Every text of the page outside the expanders that keep the original."""
    label = getattr(getattr(node, "proto", None), "label", "")
    if type(node).__name__ == "Expander" and any(word in label for word in ORIGINAL):
        return out
    value = getattr(node, "value", None)
    if isinstance(value, str):
        out.append(value)
    if isinstance(label, str) and label:
        out.append(label)
    for child in getattr(node, "children", {}).values():
        shown_text(child, out)
    return out


@pytest.mark.parametrize(
    "page",
    ["home.py", "pages/3_Gradient_norms.py", "pages/5_Architecture_comparison.py", "pages/6_Seed_claims.py"],
)
def test_no_chinese_outside_the_originals_kept_on_purpose(page):
    at = open_page(ROOT / page, {"preset": "seed-demo"}, timeout=180)
    assert not errors(at)
    chinese = [text for text in shown_text(at.main, []) if CJK.search(text)]
    assert chinese == []
