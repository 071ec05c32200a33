"""The app in a real browser: `streamlit run app.py` driven by Debian's Chromium through
Playwright — the top bar's page list starts with "Home" (not the file name "app"), a sidebar
change updates a shown number, the state survives a page switch, the Report page downloads an
HTML report holding a plotly figure, and at 1440×900 the sidebar's first screen holds the preset,
the main shape and T/B."""

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from llama_lab.units import human_params

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
TIMEOUT_MS = 60_000

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
if not Path(CHROMIUM).exists():
    pytest.skip(f"{CHROMIUM} is missing", allow_module_level=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_up(url: str, server: subprocess.Popen, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(
                f"streamlit exited with {server.returncode}: "
                f"{server.stderr.read().decode(errors='replace')[-2000:]}"
            )
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"streamlit did not answer at {url} within {seconds} s")


@pytest.fixture(scope="module")
def app_url():
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            "app.py",
            "--server.port",
            str(port),
            "--server.address",
            "127.0.0.1",
            "--server.headless",
            "true",
            "--browser.gatherUsageStats",
            "false",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_up(url, server)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def new_tab(browser, width: int, height: int):
    tab = browser.new_context(viewport={"width": width, "height": height}, accept_downloads=True).new_page()
    tab.set_default_timeout(TIMEOUT_MS)
    return tab


@pytest.fixture(scope="module")
def page(browser):
    return new_tab(browser, 1400, 1000)


def metric_value(page, label: str) -> str:
    metric = page.locator('[data-testid="stMetric"]', has_text=label).first
    return metric.locator('[data-testid="stMetricValue"]').inner_text()


def test_sidebar_change_page_switch_and_report_download(app_url, page, tmp_path):
    page.goto(app_url)
    page.get_by_text("Current model").wait_for()
    assert metric_value(page, "Parameters") == human_params(43_780_608)
    # the pages in the top bar (the sidebar is the model builder's), the last few under "N more"
    nav = [
        text.strip()
        for text in page.get_by_role("navigation", name="App pages").get_by_role("link").all_inner_texts()
    ]
    page.get_by_test_id("stTopNav").get_by_test_id("stTopNavSection").click()
    nav += [text.strip() for text in page.get_by_test_id("stTopNavDropdownLink").all_inner_texts()]
    page.keyboard.press("Escape")
    assert nav[0].endswith("Home") and "app" not in nav
    assert nav[1:] == [
        "Parameters and FLOPs",
        "KV cache and attention",
        "Gradient norms",
        "Live pass",
        "Architecture comparison",
        "Seed claims",
        "Report",
        "Inference systems",
        "Inside the model",
        "Many GPUs",
        "Validation",
        "Fine tuning",
        "Scaling laws",
    ]

    layers = page.get_by_label("n_layers (blocks): exact value")
    layers.fill("8")
    layers.press("Enter")
    # 8 blocks of 2,753,024 + 512 final norm + 2 × 16,384,000 embeddings
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-testid=stMetricValue]')]"
        f".some(e => e.innerText.trim() === '{human_params(54_792_704)}')"
    )

    page.get_by_role("link", name="Parameters and FLOPs").first.click()
    page.get_by_role("heading", name="Parameters & FLOPs").wait_for()
    assert page.get_by_label("n_layers (blocks): exact value").input_value() == "8"  # state stays

    page.get_by_role("link", name="Report").first.click()
    button = page.get_by_role("button", name="HTML report")
    button.wait_for()
    with page.expect_download() as download_info:
        button.click()
    target = tmp_path / "report.html"
    download_info.value.save_as(target)
    html = target.read_text(encoding="utf-8")
    assert 'class="plotly-graph-div"' in html and "Plotly.newPlot" in html
    assert "54,792,704" in html  # the report of the changed model
    assert "<script src=" not in html


def test_a_hostile_link_renders_as_text_and_fetches_nothing(app_url, page):
    """Issue 11: a shared link whose values are Markdown (a link, an image) shows them as text
    inside the error box — no anchor to the URL, no request to it."""
    requests = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(
        f"{app_url}/?preset=%5Blog%20in%20again%5D(http://evil.example/login)"
        "&dtype=!%5Bx%5D(http://evil.example/p.png)&batch=www.evil.example%20me@evil.example"
    )
    alert = page.locator('[data-testid="stAlert"]').first
    alert.wait_for()
    page.get_by_text("Current model").wait_for()
    text = " ".join(page.locator('[data-testid="stAlert"]').all_inner_texts()).replace("\u2060", "")
    assert "[log in again](http://evil.example/login)" in text
    assert "www.evil.example me@evil.example" in text
    assert page.locator('a[href*="evil.example"]').count() == 0
    assert page.locator('img[src*="evil.example"]').count() == 0
    assert not [url for url in requests if "evil.example" in url.split("?")[0]]  # only the page


FIRST_SCREEN = [
    "Preset",
    "d_model (hidden size d)",
    "n_layers (blocks)",
    "n_heads (query heads)",
    "n_kv_heads (key/value heads)",
    "ffn_hidden (FFN inner size)",
    "sequence length T",
    "batch B",
]


def test_the_sidebar_first_screen_holds_the_preset_shape_and_workload(app_url, browser):
    """Issue 27: at 1440×900 the preset, the main shape sliders and T/B show without scrolling
    the sidebar; every other field sits in a collapsed group below them."""
    tab = new_tab(browser, 1440, 900)
    tab.goto(app_url)
    sidebar = tab.get_by_test_id("stSidebarUserContent")
    sidebar.get_by_text("Load / save config").wait_for()
    for label in FIRST_SCREEN:
        box = sidebar.get_by_text(label, exact=True).first.bounding_box()
        assert box is not None and box["y"] + box["height"] <= 900, label
    # below T/B: only the groups' headers, all collapsed
    groups = sidebar.get_by_test_id("stExpander")
    assert groups.count() >= 10
    for details in sidebar.locator("details").all():
        assert details.get_attribute("open") is None
    batch = sidebar.get_by_text("batch B", exact=True).first.bounding_box()
    assert groups.first.bounding_box()["y"] > batch["y"]
    tab.context.close()
