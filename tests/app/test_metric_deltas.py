"""Metric badges (issue 27): every delta the pages show annotates its number (the bf16 size,
'fits', the MoE's active parameters, the heads) rather than saying how it changed, so it is
drawn grey and without an arrow: st.metric's delta_arrow="off", delta_color="off"."""

from pathlib import Path

import pytest
from apptest_helpers import open_page
from streamlit.proto.Metric_pb2 import Metric

ROOT = Path(__file__).resolve().parents[2]
P1, P10 = "llama_lab.page1.", "llama_lab.page10."


def badges(at) -> dict:
    """label → (delta, arrow, colour) of every metric that shows a delta."""
    arrow, colour = Metric.MetricDirection.Name, Metric.MetricColor.Name
    return {m.label: (m.delta, arrow(m.proto.direction), colour(m.proto.color)) for m in at.metric if m.delta}


def assert_plain(shown: dict, expected: set) -> None:
    assert expected <= set(shown), shown  # the badges this page is known to show
    for label, (delta, arrow, colour) in shown.items():
        assert (arrow, colour) == ("NONE", "GRAY"), f"{label}: {delta!r} drawn {arrow} {colour}"


@pytest.mark.parametrize(
    ("script", "query", "expected"),
    [
        ("home.py", {"preset": "mixtral-8x7b"}, {"Parameters", "Attention"}),
        ("pages/1_Parameters_and_FLOPs.py", {"preset": "mixtral-8x7b"}, {"Parameters"}),
        ("pages/8_Inference_systems.py", {}, {"weights at bf16", "naive stops fitting at"}),
        (
            "pages/10_Many_GPUs.py",
            {"preset": "seed-demo"},
            {"per GPU (stage 0, the fullest)", "data-parallel replicas (dp)", "pipeline bubble"},
        ),
    ],
)
def test_page_badges_have_no_arrow_and_no_colour(script, query, expected):
    at = open_page(ROOT / script, query, timeout=180)
    assert_plain(badges(at), expected)


def test_a_layout_that_does_not_fit_is_said_in_grey_too():
    at = open_page(ROOT / "pages/10_Many_GPUs.py", {"preset": "llama-3-70b"}, timeout=180)
    at.select_slider(key=P10 + "gpus").set_value(1)
    at.select_slider(key=P10 + "tp").set_value(1).run()
    shown = badges(at)
    assert shown["per GPU (stage 0, the fullest)"][0] == "does not fit"
    assert_plain(shown, {"per GPU (stage 0, the fullest)"})


def test_the_fvcore_difference_badge_is_plain():
    at = open_page(ROOT / "pages/1_Parameters_and_FLOPs.py", {"preset": "debug"})
    at.toggle(key=P1 + "fvcore").set_value(True).run()
    assert_plain(badges(at), {"Difference"})
