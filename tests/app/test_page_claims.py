"""pages/6_Seed_claims.py through AppTest."""

import json
from pathlib import Path

from apptest_helpers import open_page
from streamlit.testing.v1 import AppTest

from llama_lab.seed import claims as seed_claims_mod
from llama_lab.train import TrainSettings
from llama_lab.ui import state
from llama_lab.ui.sections import claims
from llama_lab.units import escape_markdown

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "6_Seed_claims.py")


def run_page(query: dict | None = None) -> AppTest:
    return open_page(PAGE, query, timeout=120)


def shown_claims() -> list:
    """The recomputed claims and the measured warmup claim, decided by the shipped contrast."""
    from llama_lab.experiments import premeasured
    from llama_lab.experiments.defaults import default_warmup_choice
    from llama_lab.seed import warmup_claim

    shipped = premeasured.lookup("warmup", *default_warmup_choice())
    return [*seed_claims_mod.seed_claims(), warmup_claim(shipped.result)]


def test_every_claim_is_listed_with_quote_figure_and_verdict():
    at = run_page()
    expected = shown_claims()
    shown = {m.label: m.value for m in at.metric}
    assert shown["Claims checked"] == str(len(expected))
    assert shown["Wrong ✗"] == str(sum(not c.verdict for c in expected))
    text = "\n".join(m.value for m in at.markdown)
    for claim in expected:
        mark = ":green[✓]" if claim.verdict else ":red[✗]"
        assert f"{mark} {claim.claim_en}" in text
        assert claim.quote in text and claim.computed in text
    assert ":red[✗] LLaMA-2 uses MQA; LLaMA-3 uses GQA." in text
    assert "43,780,608" in text


def test_claims_do_not_depend_on_the_sidebar_and_survive_an_invalid_config():
    at = run_page()
    at.sidebar.number_input(key=state.field_key("n_heads")).set_value(7).run()
    assert not at.exception
    assert any(escape_markdown("n_heads=7") in e.value for e in at.sidebar.error)
    assert {m.label: m.value for m in at.metric}["Claims checked"] == str(len(shown_claims()))


def test_downloads_hold_every_claim(stored):
    run_page()
    listed = json.loads(stored["seed_claims.json"])
    assert [c["id"] for c in listed] == [c.id for c in shown_claims()]
    csv_lines = stored["seed_claims.csv"].decode("utf-8").strip().splitlines()
    assert csv_lines[0].startswith("id,quote,claim_en") and len(csv_lines) > len(listed)


def tiny_warmup(steps: int = 3):
    from llama_lab import experiments
    from llama_lab.config import PRESETS
    from llama_lab.train.data import load_builtin

    return experiments.warmup_contrast(
        PRESETS["debug"],
        TrainSettings(
            steps=steps, lr=3e-3, warmup_steps=1, seq_len=16, batch=2, device="cpu", eval_batches=1
        ),
        (0, 1),
        data=load_builtin(),
    )


def test_the_warmup_claim_waits_for_a_measurement_then_shows_its_verdict(monkeypatch):
    """Seed §3.3's row "warmup: Post-LN required / Pre-LN optional" is measured, not recomputed from a
    formula: at once from the shipped contrast (said so), or with no shipped data the page
    offers a run; with this session's run (the Gradient norms page's, or this button's) the
    claim shows the run's own verdict and counts."""
    from llama_lab.experiments import ExperimentEntry, premeasured
    from llama_lab.seed import WARMUP_QUOTE, warmup_claim

    at = run_page()
    captions = " ".join(c.value for c in at.caption).replace("\\", "")
    assert "decided by the contrast pre-measured by tools/premeasure.py on" in captions
    assert at.button(key="llama_lab.page6.warmup").label == "Measure it here"
    with monkeypatch.context() as patched:
        patched.setattr(premeasured, "lookup", lambda *args: None)
        at = run_page()
    text = "\n".join(m.value for m in at.markdown)
    assert WARMUP_QUOTE in text and "Not measured in this session yet" in text
    contrast = tiny_warmup()
    entry = ExperimentEntry("warmup", contrast, None, {})
    at = open_page(PAGE, state={state.EXPERIMENT_KEYS["warmup"]: entry})
    claim = warmup_claim(contrast)
    text = "\n".join(m.value for m in at.markdown)
    mark = ":green[✓]" if claim.verdict else ":red[✗]"
    assert f"{mark} {claim.claim_en}" in text and claim.computed in text
    assert {m.label: m.value for m in at.metric}["Claims checked"] == str(
        len(seed_claims_mod.seed_claims()) + 1
    )
    # the button runs the default measurement (here made tiny) under the job slot
    made = []
    monkeypatch.setattr(claims, "default_warmup", lambda: made.append(1) or None)
    at = run_page()
    at.button(key="llama_lab.page6.warmup").click().run()
    assert made == [1] and not at.exception


def test_the_verdict_is_the_runs_own():
    """Hand-set final losses: warmup helps Post-LN in every seed and Pre-LN without it is as
    good → ✓; Pre-LN worse than Post-LN with warmup → ✗."""
    import dataclasses

    from llama_lab.experiments import warmup as warmup_mod

    contrast = tiny_warmup(steps=2)
    holds = {"post_no_warmup": [3.3, 3.2], "post_warmup": [3.0, 3.0], "pre_no_warmup": [2.2, 2.9]}
    fails = {"post_no_warmup": [3.3, 3.2], "post_warmup": [3.0, 3.0], "pre_no_warmup": [3.1, 3.2]}
    for finals, expected in ((holds, True), (fails, False)):
        fake = dataclasses.replace(contrast)
        object.__setattr__(fake, "finals", lambda f=finals: f)
        verdict = fake.verdict()
        assert verdict["holds"] is expected
        assert verdict["post_needs_warmup_seeds"] == 2
        assert verdict["pre_fine_seeds"] == (2 if expected else 0)
    assert warmup_mod.MAJORITY == 0.8 and warmup_mod.MARGIN_NATS == 0.02


def test_the_wrong_ones_alone_and_the_table_view():
    at = run_page()
    expected = seed_claims_mod.seed_claims()
    wrong = [c for c in expected if not c.verdict]
    at.radio(key="llama_lab.page6.claims_show").set_value("wrong ✗ only").run()
    text = "\n".join(m.value for m in at.markdown)
    assert all(c.claim_en in text for c in wrong)
    assert not any(f":green[✓] {c.claim_en}" in text for c in expected if c.verdict)
    at.radio(key="llama_lab.page6.claims_view").set_value("table").run()
    table = at.dataframe[0].value
    assert list(table.holds) == ["✗"] * len(wrong) and list(table.columns)[:2] == ["holds", "claim_en"]
    # cards: the English claim first, the tutorial's words folded into an expander
    at.radio(key="llama_lab.page6.claims_view").set_value("cards").run()
    assert any(e.proto.label == "The tutorial's words (Chinese original)" for e in at.get("expander"))


def test_the_page_the_report_and_the_command_line_count_one_list(capsys):
    """The Seed claims page, the report (JSON, Markdown, its page) and `report --format json`
    count the same claims from one function (seed.checked_claims), the measured warmup claim
    included: before, the page said 22 checked while the report said 11 of 21."""
    from llama_lab import report
    from llama_lab.cli import main
    from llama_lab.config import PRESETS
    from llama_lab.seed import checked_claims

    expected = checked_claims()
    counts = (len(expected), sum(c.verdict for c in expected))
    assert expected[-1].id == "warmup-post-pre" and [c.id for c in expected] == [c.id for c in shown_claims()]
    shown = {m.label: m.value for m in run_page().metric}
    page = (int(shown["Claims checked"]), int(shown["Hold ✓"]))
    built = report.build_report(PRESETS["debug"], 16, 1)
    in_report = (len(built.claims), sum(c["verdict"] for c in built.claims))
    note = built.table("seed_claims").note
    markdown = report.render(built, "md")
    assert main(["report", "--preset", "debug", "--seq-len", "16", "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)["claims"]
    from_cli = (len(listed), sum(c["verdict"] for c in listed))
    assert page == in_report == from_cli == counts
    assert note.startswith(f"{counts[1]} of {counts[0]} hold.") and note.split(".")[0] in markdown
    report_page = open_page(Path(PAGE).parent / "7_Report.py", {"preset": "debug"}, timeout=180)
    assert {m.label: m.value for m in report_page.metric}["Seed claims"] == (
        f"{counts[1]} ✓ / {counts[0] - counts[1]} ✗"
    )
