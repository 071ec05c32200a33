"""pages/6_Seed_claims.py through AppTest."""
import json
from pathlib import Path

from streamlit.testing.v1 import AppTest

from llama_lab import ui
from llama_lab.seed import claims as seed_claims_mod
from apptest_helpers import open_page

PAGE = str(Path(__file__).resolve().parents[1] / "pages" / "6_Seed_claims.py")


def run_page(query: dict | None = None) -> AppTest:
    return open_page(PAGE, query, timeout=120)


def test_every_claim_is_listed_with_quote_figure_and_verdict():
    at = run_page()
    expected = seed_claims_mod.seed_claims()
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
    at.sidebar.number_input(key=ui.field_key("n_heads")).set_value(7).run()
    assert not at.exception
    assert any(ui.escape_markdown("n_heads=7") in e.value for e in at.sidebar.error)
    assert {m.label: m.value for m in at.metric}["Claims checked"] == str(len(seed_claims_mod.seed_claims()))


def test_downloads_hold_every_claim(stored):
    run_page()
    listed = json.loads(stored["seed_claims.json"])
    assert [c["id"] for c in listed] == [c.id for c in seed_claims_mod.seed_claims()]
    csv_lines = stored["seed_claims.csv"].decode("utf-8").strip().splitlines()
    assert csv_lines[0].startswith("id,quote,claim_en") and len(csv_lines) > len(listed)
