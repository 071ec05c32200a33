"""Each page's answer comes before its formulas (issue 27: at 1440×900 the KV page's MHA/GQA/MQA
numbers and the Parameters page's charts started below the first screen, behind formulas; the
Gradient norms page's measured norms below the Jacobians and the live-run size box)."""

from pathlib import Path

import pytest
from apptest_helpers import errors, open_page, shown_before

ROOT = Path(__file__).resolve().parents[2] / "pages"


def _chart(node) -> bool:
    return type(node).__name__ == "PlotlyChart" or getattr(node, "type", None) == "plotly_chart"


def _metric(node) -> bool:
    return type(node).__name__ == "Metric"


def _formulas(label: str):
    return lambda node: type(node).__name__ == "Expander" and node.proto.label.startswith(label)


@pytest.mark.parametrize(
    ("page", "answer", "formulas"),
    [
        ("1_Parameters_and_FLOPs.py", _chart, "The formulas behind the counts"),
        ("2_KV_cache_and_attention.py", _metric, "How the cache is counted"),
        ("3_Gradient_norms.py", _chart, "Why they differ"),
    ],
)
def test_the_answer_comes_before_the_formulas(page, answer, formulas):
    at = open_page(ROOT / page, {"preset": "seed-demo"}, timeout=120)
    assert not errors(at)
    assert shown_before(at, answer, _formulas(formulas))
