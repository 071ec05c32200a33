"""An uploaded config.json's quantization_config is the weights' stored format in the app: the
sidebar's "weights stored as" shows it ("from the file: …") and every page counts the weights
with ``stored_weights`` as the CLI does; another format can still be chosen by hand, and a plain
file (or a preset) drops it."""

import json
from pathlib import Path

import hf_helpers
import pytest
from apptest_helpers import errors, metrics
from streamlit.testing.v1 import AppTest

from llama_lab import analysis, ui
from llama_lab.analysis import stored_weights
from llama_lab.config.files import parse_config_json, stored_quant_of
from llama_lab.ui import state
from llama_lab.ui.state import FROM_FILE, KEY_STORED_QUANT
from llama_lab.units import escape_markdown, human_bytes

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "tests" / "families" / "published_configs"
QWEN2_SMALL = {**hf_helpers.QWEN2_SMALL, "_name_or_path": "tiny/qwen2-gptq"}
GPTQ = hf_helpers.GPTQ
GPTQ_TEXT = json.dumps({**QWEN2_SMALL, "quantization_config": GPTQ})


def shown_script():
    import streamlit as st

    from llama_lab import analysis
    from llama_lab.ui import sidebar

    selection = sidebar.sidebar_config()
    if selection is not None:
        w = selection.weight_format
        st.markdown(f"FORMAT={w} BYTES={analysis.weight_bytes(selection.cfg, w)}")


def run_shown() -> AppTest:
    at = AppTest.from_function(shown_script, default_timeout=60)
    at.run()
    assert not at.exception
    return at


def upload(at: AppTest, name: str, text: str) -> AppTest:
    at.sidebar.file_uploader[0].set_value((name, text.encode(), "application/json")).run()
    assert not at.exception, at.exception
    return at


def file_bytes(text: str) -> int:
    """What the CLI counts for the file (cli.cmd_analyze: stored_weights of its stored format)."""
    cfg, _ = parse_config_json(text)
    return analysis.weight_bytes(cfg, stored_weights(stored_quant_of(text)))


def weights_box(at: AppTest):
    return at.sidebar.selectbox(key=state.KEY_WEIGHT_DTYPE)


def test_an_uploaded_gptq_file_sets_the_weights_format_and_a_hand_choice_still_works():
    at = run_shown()
    assert FROM_FILE not in weights_box(at).options[1]  # nothing uploaded: not offered
    weights_box(at).set_value("int8").run()
    upload(at, "config.json", GPTQ_TEXT)
    box = weights_box(at)
    assert box.value == FROM_FILE  # the file's format wins over the hand choice made before
    assert "from the file: GPTQ int4, g128" in box.options
    expected = file_bytes(GPTQ_TEXT)
    assert at.markdown[-1].value == f"FORMAT=GPTQ int4, g128 BYTES={expected}"
    assert any(c.value.startswith("Weights as the file stores them: GPTQ int4") for c in at.sidebar.caption)
    assert "weights" not in at.query_params  # a link cannot carry the file's format
    cfg, _ = parse_config_json(GPTQ_TEXT)
    weights_box(at).set_value("int4").run()  # another format by hand
    assert at.markdown[-1].value == f"FORMAT=int4 BYTES={analysis.weight_bytes(cfg, 'int4')}"
    assert at.query_params["weights"] == "int4"
    weights_box(at).set_value(FROM_FILE).run()  # and back to the file's
    assert at.markdown[-1].value.endswith(f"BYTES={expected}")
    # a plain file resets it: not offered, the weights as the dtype
    upload(at, "plain.json", json.dumps(QWEN2_SMALL))
    assert (
        weights_box(at).value == state.AS_DTYPE
        and "from the file: GPTQ int4, g128" not in weights_box(at).options
    )
    assert at.markdown[-1].value == f"FORMAT=bf16 BYTES={analysis.weight_bytes(cfg, 'bf16')}"
    assert at.session_state[KEY_STORED_QUANT] is None


def test_a_preset_drops_the_files_format_and_a_refused_file_keeps_it():
    at = upload(run_shown(), "config.json", GPTQ_TEXT)
    bad = json.dumps({**QWEN2_SMALL, "quantization_config": {**GPTQ, "bits": 3}})
    upload(at, "bad.json", bad)
    assert any(escape_markdown("GPTQ bits=3 is not modelled") in e.value for e in at.sidebar.error)
    assert weights_box(at).value == FROM_FILE  # the last good file stays, with its format
    at.sidebar.selectbox(key=state.KEY_PRESET_VIEW).set_value("debug").run()
    assert weights_box(at).value == state.AS_DTYPE
    assert at.markdown[-1].value.startswith("FORMAT=bf16 ")


def test_a_published_file_brings_its_own_format():
    at = run_shown()
    for name, label in (
        ("gpt-oss-20b.json", "MXFP4 experts"),
        ("deepseek-v3.json", "fp8 e4m3, 128×128 blocks"),
    ):
        text = (PUBLISHED / name).read_text()
        upload(at, name, text)
        assert weights_box(at).value == FROM_FILE
        assert f"from the file: {label}" in weights_box(at).options
        assert at.markdown[-1].value == f"FORMAT={label} BYTES={file_bytes(text)}"


def open_with_upload(page: str, text: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / page), default_timeout=240)
    at.query_params.update({"seq": "64"})
    at.run()
    assert not at.exception
    return upload(at, "config.json", text)


def test_the_inference_page_counts_the_files_stored_format():
    at = open_with_upload("pages/8_Inference_systems.py", GPTQ_TEXT)
    assert not errors(at), errors(at)
    expected = file_bytes(GPTQ_TEXT)
    assert metrics(at)["weights at GPTQ int4, g128"] == human_bytes(expected)
    latex = " ".join(m.value for m in at.latex)
    cfg, _ = parse_config_json(GPTQ_TEXT)
    stored = analysis.weights_bytes(cfg, stored_weights(stored_quant_of(GPTQ_TEXT)))
    assert f"{stored.scales + stored.zero_points + stored.other:,}" in latex and "g\\_idx" in latex
    (table,) = [d.value for d in at.dataframe if "weights_bytes" in d.value.columns]
    assert table.iloc[-1].weights_bytes == expected


def test_the_kv_page_counts_the_files_stored_format():
    at = open_with_upload("pages/2_KV_cache_and_attention.py", GPTQ_TEXT)
    assert not errors(at), errors(at)
    text = " ".join(m.value for m in at.markdown)
    assert f"- weights: {human_bytes(file_bytes(GPTQ_TEXT))}" in text
    assert "weights GPTQ int4, g128" in " ".join(s.value for s in at.subheader)


# big enough for the Many GPUs page's default layouts (tp 8, pp 4)
LAYOUT_SIZED = {**QWEN2_SMALL, "hidden_size": 1024, "num_hidden_layers": 8, "num_attention_heads": 16}
LAYOUT_SIZED = {**LAYOUT_SIZED, "num_key_value_heads": 8, "intermediate_size": 2816}


@pytest.mark.slow
@pytest.mark.parametrize("page", ["home.py", *(page.path for page in ui.PAGES)])
def test_every_page_renders_with_the_files_stored_format(page):
    at = open_with_upload(page, json.dumps({**LAYOUT_SIZED, "quantization_config": GPTQ}))
    assert not errors(at), errors(at)
    assert weights_box(at).value == FROM_FILE
