"""pages/11_Validation.py through AppTest: the held-out errors first, each kind's interval at
its level with the held-out share inside, the scatter per kind with y = x and both halves, every
row with its source and quoted line; and the report's tables."""

import json
from pathlib import Path

from apptest_helpers import charts, errors, open_page

from llama_lab.validation import load_rows
from llama_lab.validation.efficiency import PARAMS_FILE

PAGE = Path(__file__).resolve().parents[2] / "pages" / "11_Validation.py"
P = "llama_lab.page11."


def test_the_page_shows_the_held_out_errors_the_scatter_and_each_rows_source():
    at = open_page(PAGE, timeout=120)
    assert not errors(at)
    shipped = json.loads(PARAMS_FILE.read_text())["summary"]
    shown = {m.label: m.value for m in at.metric}
    assert (
        shown["decode_bs1: held-out median |error|"]
        == f"{shipped['decode_bs1']['held_out_median_abs_error']:.1%}"
    )
    # each kind's interval with its level and the share of held-out rows inside it, in the table
    table = at.dataframe[0].value.set_index("kind")
    for kind, s in shipped.items():
        assert table.loc[kind, "interval level"] == "80.0 %"
        coverage = s["held_out_coverage"]
        assert table.loc[kind, "held out inside the interval"] == (
            "—" if coverage is None else f"{100 * coverage:.1f} %"
        )
    assert table.loc["train", "held out inside the interval"] == "75.0 %"  # 48 of 64
    note = next(c.value for c in at.caption if "level 80%" in c.value)
    assert "It never sees the held-out half" in note and "decode_bs1: the fit half's 14" in note
    (figure,) = charts(at)
    names = {trace.get("name") for trace in figure["data"]}
    assert {"y = x", "held out", "fit half"} <= names
    row = next(r for r in load_rows() if r.id == "gptfast-llama2-7b-bf16-a100")
    at.selectbox(key=P + "row").set_value(row.id).run()
    text = " ".join(m.value for m in at.markdown)
    shown = text.replace("\\", "").replace("\u2060", "")  # as read: escapes and word joiners out
    assert "pytorch-labs/gpt-fast/README.md@32971d312954" in shown
    assert "104.9" in shown  # the quoted line


def test_the_report_carries_the_validation_table():
    from llama_lab.config import PRESETS
    from llama_lab.report import build_report

    report = build_report(PRESETS["seed-demo"], 128, 1)
    tables = {t.name: t for t in report.tables}
    assert len(tables["validation_rows"].frame) == len(load_rows())
    assert "source" in tables["validation_rows"].frame.columns
