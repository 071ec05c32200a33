"""Untrusted text in the report: a model name, notes (an uploaded config's), experiment settings
(key names, a text file's name), run labels, table titles, notes and cells reach the HTML
escaped (controls stripped) and the Markdown through ``escape_markdown``; JSON keeps them as
given."""

import dataclasses
import json

import pandas as pd
import pytest
from plotly.offline import get_plotlyjs

from llama_lab import experiments, report
from llama_lab.config import PRESETS
from llama_lab.figures.common import Table
from llama_lab.report import ExperimentEntry
from llama_lab.train import TrainSettings

SCRIPT = "<script>alert(1)</script>"
LINK = "[x](http://evil)"
IMAGE = "![x](http://evil/p.png)"
CONTROLS = "\x00\x07\x1b[31m\x9b\u202e\u2066"
PAYLOAD = f"{SCRIPT} {LINK} {IMAGE} {CONTROLS}end"
CONTROL_CHARS = ("\x00", "\x07", "\x1b", "\x9b", "\u202e", "\u2066")


@pytest.fixture(scope="module")
def hostile():
    cfg = PRESETS["debug"]
    gradnorms = ExperimentEntry(
        "gradnorms",
        experiments.gradnorms_over_seeds(cfg, 8, 1),
        cfg,
        {"data": f"{SCRIPT}.txt", PAYLOAD: LINK, "note": IMAGE + CONTROLS},
    )
    specs = [
        experiments.RunSpec(label, cfg, 3e-3)
        for label in (f"{SCRIPT} a", f"{LINK} b", f"{IMAGE} c{CONTROLS}")
    ]
    training = ExperimentEntry(
        "training",
        experiments.compare_runs_over_seeds(
            specs, TrainSettings(steps=1, seq_len=8, batch=1, device="cpu", eval_batches=1)
        ),
        cfg,
        {"file": PAYLOAD},
    )
    built = report.build_report(
        cfg,
        8,
        1,
        notes=[PAYLOAD, f"rope_scaling={SCRIPT}"],
        experiments={"gradnorms": gradnorms, "training": training},
        name=PAYLOAD,
    )
    # a table whose header, title, section, note and cells are all the payload, as a table of
    # an uploaded config's keys and values would be; and a reason for the missing HF file
    frame = pd.DataFrame({PAYLOAD: [PAYLOAD, LINK], "value": [IMAGE, SCRIPT]})
    return dataclasses.replace(
        built,
        hf_config_note=PAYLOAD,
        tables=built.tables
        + (
            Table("uploaded", PAYLOAD, "Configuration", frame, PAYLOAD),
            Table("uploaded_elsewhere", PAYLOAD, PAYLOAD, frame, PAYLOAD),
        ),
    )


def test_html_escapes_every_string_and_strips_controls(hostile):
    html = report.render(hostile, "html")
    page = html.replace(get_plotlyjs(), "")  # plotly.js itself is ours
    assert "<script>alert" not in page and "alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # it is there, as text
    # the only scripts: plotly.js once and one Plotly.newPlot per figure
    assert page.count("<script") == 1 + len(hostile.figures)
    assert "<img" not in page and 'href="http://evil' not in page and 'src="http' not in page
    for ch in CONTROL_CHARS:
        assert ch not in page, repr(ch)
    assert "<title>LLaMA Lab report — &lt;script&gt;" in page


def test_markdown_escapes_every_string_and_strips_controls(hostile):
    md = report.render(hostile, "md")
    assert "<script>" not in md and "</script>" not in md
    assert LINK not in md and IMAGE not in md and "](" not in md and "![" not in md
    assert "://" not in md  # no bare autolink either
    for ch in CONTROL_CHARS:
        assert ch not in md, repr(ch)
    assert r"\<script\>alert\(1\)\<\/script\>" in md  # shown literally
    assert md.startswith(r"# LLaMA Lab report — \<script\>")
    assert r"> Note: \<script\>" in md
    assert "\\[x\\]\\(http\\:\u2060\\/\\/evil\\)" in md  # escaped, autolink broken


def test_json_keeps_the_strings_as_given(hostile):
    loaded = json.loads(report.render(hostile, "json"))
    assert loaded["name"] == PAYLOAD and loaded["notes"][0] == PAYLOAD
    assert loaded["experiments"]["gradnorms"]["settings"][PAYLOAD] == LINK
    assert loaded["tables"]["uploaded"]["columns"][0] == PAYLOAD


def test_plotly_text_is_json_escaped_in_the_html(hostile):
    """Run labels go into the training figure's legend: plotly's JSON writes < and > as
    \\u003c / \\u003e, so no tag of a label reaches the page."""
    html = report.render(hostile, "html").replace(get_plotlyjs(), "")
    assert "\\u003cscript\\u003ealert(1)" in html
