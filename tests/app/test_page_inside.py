"""pages/9_Inside_the_model.py through AppTest: the page opens a forward pass for every kind of
recipe, follows its controls, shows the shipped trained copy at once and trains another on its
button. The trace itself: tests/unit/experiments/test_inside.py."""

from pathlib import Path

import pytest
from apptest_helpers import chart_texts, charts, errors, open_page

import llama_lab.ui.sections.inside as ui_inside
from llama_lab.experiments import inside

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "9_Inside_the_model.py")
P = "llama_lab.page9."


def test_the_page_opens_a_forward_pass_and_follows_its_controls(monkeypatch):
    monkeypatch.setitem(inside.INSIDE_DEFAULTS, "steps", 2)
    at = open_page(PAGE, {"preset": "seed-demo"}, timeout=180)
    assert not errors(at)
    figures = charts(at)
    assert len(figures) == 6  # attention, rope, offset, residual, lens, final
    # the attention map's subplot titles, read from the parsed figure
    assert any("q head 7 · KV head 1" in chart_texts(figure) for figure in figures)
    at.radio(key=P + "arrangement").set_value("post").run()
    at.radio(key=P + "weights").set_value("untrained").run()
    assert not at.exception and not errors(at)
    at.text_input(key=P + "text").set_value("").run()
    assert any("at least one token" in e for e in errors(at))


def test_the_default_trained_copy_is_shown_at_once_from_the_shipped_weights(monkeypatch):
    """No training on view: the default model's trained copy is the one tools/premeasure.py
    shipped (said so, with its losses); Post-LN's copy says it diverged and where."""
    trained = []
    monkeypatch.setattr(inside, "trained_inside", lambda *a, **k: trained.append(1))
    monkeypatch.setattr(ui_inside, "trained_inside", lambda *a, **k: trained.append(1))
    at = open_page(PAGE, {"preset": "seed-demo"}, timeout=180)
    assert not errors(at) and trained == []
    captions = " ".join(c.value for c in at.caption)
    assert "Shown at once: the weights were trained by tools/premeasure.py on" in captions
    assert "training loss 5.578 → " in captions
    assert at.button(key=P + "train").label.startswith("Re-train here (about ")
    at.radio(key=P + "arrangement").set_value("post").run()
    captions = " ".join(c.value for c in at.caption)
    assert "it diverged and stopped after 15 steps (loss spiked" in captions and trained == []


def test_a_recipe_not_shipped_shows_its_untrained_weights_until_the_button_trains_it(monkeypatch):
    monkeypatch.setitem(inside.INSIDE_DEFAULTS, "steps", 2)  # nothing shipped for 2 steps
    ui_inside._trained.clear()
    at = open_page(PAGE, {"preset": "seed-demo"}, timeout=180)
    assert any("not shipped with the lab" in i.value for i in at.info)
    at.button(key=P + "train").click().run()
    assert not errors(at) and not at.info
    assert any("Trained here in this app: training loss" in c.value for c in at.caption)
    assert at.run().button(key=P + "train").label.startswith("Re-train here")  # held: not retrained
    assert any("Trained here in this app" in c.value for c in at.caption)


@pytest.mark.parametrize("preset,charts", [("mixtral-8x7b", 7), ("transformer-2017", 5)])
def test_the_page_shows_routing_for_a_mixture_and_no_rope_for_the_2017_recipe(monkeypatch, preset, charts):
    monkeypatch.setitem(inside.INSIDE_DEFAULTS, "steps", 0)
    at = open_page(PAGE, {"preset": preset}, state={P + "weights": "untrained"}, timeout=180)
    assert not errors(at) and len(at.get("plotly_chart")) == charts
