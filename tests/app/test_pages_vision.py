"""A multimodal model on the pages (issue 41): the Parameters & FLOPs page shows the vision tower
and the projector in the breakdown and what the image encoder costs per image; the KV page says
what an image costs in cache; the surfaces that model the text decoder alone say so in one line."""

import json
from pathlib import Path

from apptest_helpers import errors, metrics, open_page

from llama_lab.analysis import kv_cache_bytes_per_token
from llama_lab.config import PRESETS
from llama_lab.ui.state import config_from_values, field_key, values_for_config
from llama_lab.units import human_bytes

ROOT = Path(__file__).resolve().parents[2]
QUERY = {"preset": "llava-1.5-7b", "seq": "2048"}
# the debug preset behind LLaVA-1.5's tower (the URL carries the field as JSON): a quick KV page
TINY = PRESETS["debug"].replace(vision={**PRESETS["llava-1.5-7b"].vision.as_dict(), "out_size": 64})


def test_the_parameters_page_shows_the_image_encoder_per_image():
    at = open_page(ROOT / "pages" / "1_Parameters_and_FLOPs.py", QUERY)
    assert not errors(at)
    shown = metrics(at)
    assert shown["Parameters"] == "7.06 bn"  # the whole model, as the Hub's 7.06B
    assert (shown["Vision tower"], shown["Projector"], shown["Image tokens"]) == ("304 M", "21 M", "576")
    assert shown["Encoder FLOPs / image"].startswith("406")
    assert any("The image encoder, per image" in h.value for h in at.subheader)


def test_the_kv_page_says_what_an_image_costs_in_cache():
    vision = json.dumps(TINY.vision.as_dict(), separators=(",", ":"))  # a link's value: ≤ 200 characters
    query = {"preset": "debug", "seq": "64", "vision": vision}
    at = open_page(ROOT / "pages" / "2_KV_cache_and_attention.py", query)
    assert not errors(at)
    per_image = 576 * kv_cache_bytes_per_token(TINY, "bf16")
    text = f"An image costs 576 tokens of cache ({human_bytes(per_image)} at bf16"
    assert any(text in box.value for box in at.info), [box.value for box in at.info]
    # serving on several GPUs models the text decoder only: said, not answered short
    assert any("models the text decoder only" in box.value for box in at.warning)


def test_a_sidebar_width_change_keeps_the_projector_feeding_the_text_decoder():
    values = values_for_config("llava-1.5-7b", PRESETS["llava-1.5-7b"])
    values[field_key("d_model")] = 2048
    cfg = config_from_values(values)
    assert cfg.vision.out_size == 2048 and cfg.vision.hidden_size == 1024  # the tower itself unchanged


def test_an_uploaded_llava_file_is_counted_whole_on_the_parameters_page():
    from streamlit.testing.v1 import AppTest

    data = (ROOT / "tests" / "families" / "published_configs" / "llava-1.5-7b-hf.json").read_bytes()
    at = AppTest.from_file(str(ROOT / "pages" / "1_Parameters_and_FLOPs.py"), default_timeout=120).run()
    at.sidebar.file_uploader[0].set_value(("config.json", data, "application/json")).run()
    assert not at.exception and not errors(at)
    shown = metrics(at)
    assert (shown["Parameters"], shown["Image tokens"]) == ("7.06 bn", "576")


def test_home_says_what_the_vision_tower_is():
    at = open_page(ROOT / "home.py", QUERY)
    assert not errors(at)
    shown = [m.value for m in at.markdown] + [m.value for m in at.info]
    assert any("**Vision tower**" in text and "576 tokens" in text for text in shown), shown
