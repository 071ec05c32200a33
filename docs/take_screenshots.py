"""Regenerate docs/screenshots/*.png: starts `streamlit run app.py` on a free local port, opens
every page in Debian's headless chromium (Playwright), presses the run buttons of the live pages
so their results show, and saves full-page screenshots 1400 px wide.

    python docs/take_screenshots.py            # needs /usr/bin/chromium and playwright
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "screenshots"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
# (file name, URL path, label of a button to press first or None[, a tab to open first])
PAGES = [
    ("0_home", "", None),
    ("1_parameters_and_flops", "Parameters_and_FLOPs", None),
    ("1b_parameters_llava", "Parameters_and_FLOPs?preset=llava-1.5-7b", None),
    ("2_kv_cache_and_attention", "KV_cache_and_attention", None),
    (
        "2b_kv_sparse_pattern",
        "KV_cache_and_attention?preset=seed-demo&sliding_window=16&global_tokens=4",
        None,
    ),
    ("2c_kv_deepseek_v32", "KV_cache_and_attention?preset=deepseek-v3.2-exp", None),
    ("2d_kv_transformer_2017", "KV_cache_and_attention?preset=transformer-2017-base", None),
    ("3_gradient_norms", "Gradient_norms", None),  # pre-measured: shown at once
    ("4_live_pass", "Live_pass", "Run the training step"),
    ("5_architecture_comparison", "Architecture_comparison", None),
    ("6_seed_claims", "Seed_claims", None),
    ("7_report", "Report", None),
    ("8_inference_systems", "Inference_systems", None),
    ("9_inside_the_model", "Inside_the_model", None),  # the shipped trained copy
    ("10_many_gpus", "Many_GPUs?preset=llama-3.1-405b&seq=8192", None),
    ("10b_many_gpus_measured", "Many_GPUs", "Run fsdp on 2 processes", "Measured on torch.distributed"),
    ("11_validation", "Validation", None),
    ("12_fine_tuning", "Fine_tuning?preset=llama-3-8b", "Start fine-tuning run"),
    ("13_scaling_laws", "Scaling_laws", None),
]
# pages whose run outlasts settle(): the text that shows when it is done
WAIT_FOR = {"12_fine_tuning": "Fine-tuning run: done"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_up(url: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"streamlit did not answer at {url}")


def settle(page) -> None:
    """Wait until Streamlit has stopped running the script and the charts are drawn (a cold
    server's first page draws its title late: wait for it first)."""
    page.wait_for_selector("h1", timeout=180_000)
    page.wait_for_timeout(1500)
    page.wait_for_function("!document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=180_000)
    page.wait_for_timeout(1500)


def main() -> int:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            "app.py",
            "--server.port",
            str(port),
            "--server.headless",
            "true",
            "--server.address",
            "127.0.0.1",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until_up(url)
        OUT.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            wanted = set(sys.argv[1:])  # names to take (default: every page)
            for name, path, button, *tab in PAGES:
                if wanted and name not in wanted:
                    continue
                page.goto(f"{url}/{path}")
                settle(page)
                if tab:
                    page.get_by_role("tab", name=tab[0]).click()
                    page.wait_for_timeout(500)
                if button:
                    page.get_by_role("button", name=button).first.click()
                    settle(page)
                if name in WAIT_FOR:
                    page.get_by_text(WAIT_FOR[name]).first.wait_for(timeout=300_000)
                    settle(page)
                # Streamlit scrolls inside its main container: grow the window to fit it.
                height = page.evaluate(
                    "Math.max(...[...document.querySelectorAll("
                    "'[data-testid=stMain], [data-testid=stSidebarContent]')]"
                    ".map(e => e.scrollHeight), 1000)"
                )
                page.set_viewport_size({"width": 1400, "height": min(int(height) + 40, 6000)})
                page.wait_for_timeout(800)
                page.screenshot(path=str(OUT / f"{name}.png"), full_page=True)
                page.set_viewport_size({"width": 1400, "height": 1000})
                print(f"{name}.png {(OUT / f'{name}.png').stat().st_size // 1024} KiB")
            browser.close()
    finally:
        server.terminate()
        server.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
