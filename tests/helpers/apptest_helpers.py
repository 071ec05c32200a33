"""Shared AppTest helpers for the page tests (one copy; each test file names its page)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from streamlit.testing.v1 import AppTest

from llama_lab import experiments
from llama_lab.runtime import jobs

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def one_component_scan() -> Iterator[None]:
    """Streamlit's installed components scanned once, not once per AppTest.

    Every new AppTest reads the metadata of every installed distribution looking for Streamlit
    components (about 0.1 s with this environment's ~90 packages, ~400 AppTests per tier); the
    packages do not change while the tests run, so the first scan's answer stands for the rest."""
    from streamlit.components.v2 import manifest_scanner

    found = manifest_scanner.scan_component_manifests()
    original = manifest_scanner.scan_component_manifests
    manifest_scanner.scan_component_manifests = lambda *args, **kwargs: list(found)
    try:
        yield
    finally:
        manifest_scanner.scan_component_manifests = original


def open_page(
    script: str | Path, query: dict | None = None, state: dict | None = None, timeout: float = 120
) -> AppTest:
    """Run ``script`` once with a URL query (and session state), asserting no exception."""
    at = AppTest.from_file(str(script), default_timeout=timeout)
    at.query_params.update(query or {})
    for key, value in (state or {}).items():
        at.session_state[key] = value
    at.run()
    assert not at.exception, at.exception
    return at


def click(at: AppTest, key: str) -> AppTest:
    at.button(key=key).click().run()
    assert not at.exception, at.exception
    return at


def errors(at: AppTest) -> list[str]:
    """The page's error boxes as the user reads them: the Markdown escapes (every message is
    escaped with escape_markdown) and the invisible autolink breakers taken out."""
    return [re.sub(r"\\(.)", r"\1", e.value).replace("\u2060", "") for e in at.main.error]


def charts(at: AppTest) -> list[dict]:
    """Every Plotly chart of the page as its figure: the JSON Streamlit sends, parsed. Tests
    compare the figure's values, never its serialisation (plotly ≥ 7 writes "·" as \\u00b7)."""
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def chart_title(figure: dict) -> str:
    """A figure's title text ("" without one)."""
    title = figure.get("layout", {}).get("title", "")
    return (title.get("text") or "") if isinstance(title, dict) else str(title or "")


def chart_texts(figure: dict) -> list[str]:
    """What a reader sees around the plot: the title, then the annotations (subplot titles)."""
    annotations = figure.get("layout", {}).get("annotations", [])
    return [chart_title(figure)] + [a.get("text", "") for a in annotations]


def metrics(at: AppTest) -> dict:
    return {m.label: m.value for m in at.metric}


def holding_the_slot(monkeypatch, name: str) -> list:
    """Wrap experiments.<name> to record how many runs held the job slot while it ran."""
    seen, original = [], getattr(experiments, name)

    def wrapped(*args, **kwargs):
        seen.append(jobs.LIMITER.running)
        return original(*args, **kwargs)

    monkeypatch.setattr(experiments, name, wrapped)
    return seen


def in_page_order(at) -> list:
    """Every element and block of the main area, in the order the page shows them."""

    def walk(node, out: list) -> list:
        for child in getattr(node, "children", {}).values():
            out.append(child)
            walk(child, out)
        return out

    return walk(at.main, [])


def shown_before(at, first, then) -> bool:
    """Whether the first element satisfying ``first`` comes before the first satisfying ``then``."""
    nodes = in_page_order(at)
    index = lambda test: next(i for i, n in enumerate(nodes) if test(n))  # noqa: E731
    return index(first) < index(then)
