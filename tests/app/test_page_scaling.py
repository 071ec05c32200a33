"""pages/13_Scaling_laws.py through AppTest: it renders with the shipped ladder (nothing trained),
its compute-optimal numbers are analysis.scaling's, and nothing runs before the button."""

from pathlib import Path

from apptest_helpers import errors, metrics, open_page

from llama_lab.analysis.scaling import get_fit

PAGE = Path(__file__).resolve().parents[2] / "pages" / "13_Scaling_laws.py"


def test_the_page_renders_the_published_fit_and_the_ladder():
    at = open_page(PAGE, {"preset": "debug"}, None, timeout=60)
    assert not at.exception and not errors(at)
    n_opt, d_opt = get_fit("hoffmann").compute_optimal(10**23.76)
    shown = metrics(at)
    assert f"{n_opt:.3g}" in shown.values() and f"{d_opt / n_opt:.1f}" in shown.values()
    assert any(b.label.startswith("Re-measure the ladder") for b in at.button)
    captions = " ".join(c.value for c in at.caption)
    assert "pre-measured on" in captions
    assert "placed by its active parameters" in captions and "gpt-oss" in captions  # the MoE caveat
    assert "|ln L̂ − ln L|" in captions  # approach 3's residuals
    tables = [t.value for t in at.dataframe]
    assert any(
        "this lab's ladder, approach 2 (IsoFLOP parabolas)" in set(t["fit"]) for t in tables if "fit" in t
    )
