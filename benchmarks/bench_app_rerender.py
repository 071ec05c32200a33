"""How fast the analysis pages re-render after a sidebar change, measured with Streamlit's
AppTest (the script run only; the browser's drawing is not included). Prints the median of
several re-runs per page for a small and a huge preset, and the first run of a session.

    python benchmarks/bench_app_rerender.py
"""

from __future__ import annotations

import logging
import statistics
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

from llama_lab import ui
from llama_lab.ui import state

ROOT = Path(__file__).resolve().parents[1]

logging.disable(logging.WARNING)  # AppTest outside a server warns on every cached call

SCRIPTS = [("Home", ui.HOME_PAGE)] + [
    (page.label, page.path)
    for page in ui.PAGES
    if page.label not in ("Gradient norms", "Live pass", "Report")
]
LAYERS = (5, 6, 7, 8, 9)


def measure(script: str, preset: str) -> tuple[float, float]:
    at = AppTest.from_file(str(ROOT / script), default_timeout=120)
    at.query_params["preset"] = preset
    start = time.perf_counter()
    at.run()
    first = time.perf_counter() - start
    times = []
    for n_layers in LAYERS:
        start = time.perf_counter()
        at.sidebar.number_input(key=state.field_key("n_layers")).set_value(n_layers).run()
        times.append(time.perf_counter() - start)
        assert not at.exception, at.exception
    return first, statistics.median(times)


def main() -> None:
    print(f"re-render after changing n_layers, median of {len(LAYERS)} (AppTest, script only)")
    print(f"{'page':<26} {'preset':<16} {'first run':>10} {'re-render':>10}")
    for label, script in SCRIPTS:
        for preset in ("seed-demo", "llama-3.1-405b"):
            first, median = measure(script, preset)
            print(f"{label:<26} {preset:<16} {first * 1e3:>8.0f} ms {median * 1e3:>8.0f} ms")


if __name__ == "__main__":
    main()
