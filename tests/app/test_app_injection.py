"""No Markdown injection anywhere in the app: every user-supplied string — URL query values (the
sidebar's and the pages' own), uploaded config contents, file names, key names, and the error
messages that quote them — is shown escaped (``llama_lab.units.escape_markdown``), so a shared
link or an uploaded file can never put a live link, an image the browser fetches, or formatting
on the page. Checked under AppTest on every page, over every string Streamlit renders as
Markdown (bodies, labels, help tooltips, captions)."""

import json
import re
from pathlib import Path

import pytest
from apptest_helpers import click, open_page
from streamlit.testing.v1 import AppTest

from llama_lab import ui
from llama_lab.config import PRESETS
from llama_lab.ui import state
from llama_lab.units import escape_markdown

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["home.py", *(page.path for page in ui.PAGES)]

LINK = "[log in again](http://evil)"
IMAGE = "![x](http://evil/p.png)"
HTML = "<img src=http://evil/q.png>"

# The sidebar's keys (a bad preset, workload and config field each echo the value) ...
SIDEBAR_QUERY = {"preset": LINK, "dtype": IMAGE, "seq": LINK, "batch": HTML, "d_model": IMAGE}
# ... and, with a valid config (so an uploaded model's name is shown), the pages' own keys.
PAGE_QUERY = {
    "name": LINK,
    "n_layers": "3",
    "kv.gpu": LINK,
    "kv.context": IMAGE,
    "live.model": LINK,
    "live.device": IMAGE,
    "live.dtype": HTML,
    "live.seq_len": LINK,
    "live.batch": IMAGE,
    "grad.d_model": LINK,
    "grad.n_layers": IMAGE,
    "grad.device": HTML,
}
BAD_LAYERS = {"local_layers": LINK}  # a config text field: refused, quoting it


def markdown_texts(at: AppTest) -> list[str]:
    """Every string of the run that Streamlit renders as Markdown: element bodies (markdown,
    captions, alerts, headings), labels and help tooltips of elements, widgets and blocks."""
    texts = []

    def walk(node) -> None:
        proto = getattr(node, "proto", None)
        for name in ("body", "label", "help", "caption"):
            value = getattr(proto, name, None) if proto is not None else None
            if isinstance(value, str) and value:
                texts.append(value)
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return texts


def assert_inert(at: AppTest, *echoed: str) -> None:
    """Nothing hostile renders live, and each of ``echoed`` is shown in its escaped form."""
    assert not at.exception, at.exception
    texts = markdown_texts(at)
    for text in texts:
        assert "](http" not in text, text
        assert "http://evil" not in text and not re.search(r"(?<!\\)<img", text), text
    for value in echoed:
        assert any(escape_markdown(value) in text for text in texts), (value, texts)


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_hostile_sidebar_links_are_shown_escaped_on_every_page(page):
    at = open_page(ROOT / page, SIDEBAR_QUERY, timeout=180)
    assert_inert(at, LINK, IMAGE, HTML)
    errors = [e.value for e in at.sidebar.error]
    assert any(escape_markdown(f"unknown preset {LINK!r}") in e for e in errors), errors


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_hostile_page_links_and_model_names_are_shown_escaped_on_every_page(page):
    at = open_page(ROOT / page, PAGE_QUERY, timeout=180)
    own = {
        "pages/2_KV_cache_and_attention.py": "kv.",
        "pages/4_Live_pass.py": "live.",
        "pages/3_Gradient_norms.py": "grad.",
    }.get(page)
    echoed = [LINK] + ([value for key, value in PAGE_QUERY.items() if key.startswith(own)] if own else [])
    assert_inert(at, *echoed)
    assert any(escape_markdown(LINK) in c.value for c in at.sidebar.caption)  # its name
    if own:  # each refused value named with its key and the rule, the default used
        shown = " ".join(e.value for e in at.main.error)
        for key in (k for k in PAGE_QUERY if k.startswith(own)):
            assert escape_markdown(f"Link: {key}=") in shown, key


@pytest.mark.parametrize("page", ["home.py", "pages/1_Parameters_and_FLOPs.py"])
def test_a_hostile_config_text_field_stops_the_page_with_the_rule_escaped(page):
    at = open_page(ROOT / page, BAD_LAYERS)  # from the URL: falls back, escaped
    assert_inert(at, LINK)
    at.sidebar.text_input(key=state.field_key("local_layers")).input(IMAGE).run()
    assert_inert(at, IMAGE)  # from the widget: the page stops
    assert any(escape_markdown(IMAGE) in e.value for e in at.main.error)


def upload(at: AppTest, name: str, data: bytes) -> AppTest:
    at.sidebar.file_uploader[0].set_value((name, data, "application/json")).run()
    return at


HF = {
    "model_type": "llama",
    "hidden_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 688,
    "vocab_size": 1000,
    "max_position_embeddings": 256,
}
FILE = f"{LINK}.json"
UPLOADS = {  # what the file holds → the hostile strings the sidebar must show escaped
    "not json": (b"{" + LINK.encode(), [FILE]),
    "not utf-8": (b"\xff\xfe" + LINK.encode(), [FILE]),
    "a hostile note value": (json.dumps({**HF, "attention_dropout": IMAGE}).encode(), [FILE, IMAGE]),
    "hostile rope scaling": (json.dumps({**HF, "rope_scaling": {LINK: IMAGE}}).encode(), [FILE]),
    "a hostile key name": (json.dumps({**HF, LINK: 1}).encode(), [FILE, LINK]),
    "a hostile model_type": (json.dumps({**HF, "model_type": IMAGE}).encode(), [IMAGE]),
    "a hostile act": (json.dumps({**HF, "hidden_act": HTML}).encode(), [HTML]),
    "a hostile model name": (json.dumps({**HF, "_name_or_path": IMAGE}).encode(), [IMAGE]),
    "our json, hostile layers": (
        json.dumps({**PRESETS["debug"].to_dict(), "local_layers": LINK}).encode(),
        [LINK],
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(UPLOADS))
def test_hostile_uploads_are_shown_escaped(case):
    data, echoed = UPLOADS[case]
    at = upload(open_page(ROOT / "home.py"), FILE, data)
    assert_inert(at, *echoed)


@pytest.mark.slow
def test_an_uploaded_models_hostile_name_is_escaped_in_the_title_and_on_every_page():
    at = upload(open_page(ROOT / "app.py"), "config.json", json.dumps({**HF, "_name_or_path": LINK}).encode())
    assert_inert(at, LINK)
    assert escape_markdown(LINK) in at.subheader[0].value  # "Current model: …"
    assert at.query_params["name"] == LINK  # kept, as text
    for page in ui.PAGES:
        at.switch_page(page.path).run()
        assert_inert(at, LINK)


@pytest.mark.slow
def test_a_hostile_training_file_name_is_escaped_in_the_results():
    p = "llama_lab.page3."
    at = open_page(ROOT / "pages" / "3_Gradient_norms.py", {"preset": "debug"})
    for name, value in {"n_layers": 1, "seq_len": 8, "batch": 1, "steps": 1}.items():
        at.number_input(key=p + name).set_value(value)
    at.radio(key=p + "source").set_value("upload").run()
    at.get("file_uploader")[0].set_value((f"{IMAGE}.txt", b"the quick brown fox " * 50, "text/plain")).run()
    click(at, p + "run_train")
    assert at.session_state[state.KEY_TRAINING].settings["data"] == f"{IMAGE}.txt"
    assert_inert(at, f"{IMAGE}.txt")
