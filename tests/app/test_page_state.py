"""Page-level state through AppTest: the URL keeps each page's own choices (validated on the way
in, a bad value named with its key and rule), they survive a page switch, out-of-range values
are clamped with a note naming the bound, an uploaded model keeps its name and resets T, the
live-run size widgets sit in their own box, gradient clipping reaches the training runs, and
headline numbers are compact with the exact value in the tooltip."""

import json
from dataclasses import replace
from pathlib import Path

import pytest
from apptest_helpers import chart_title, charts, click, errors, open_page
from streamlit.testing.v1 import AppTest

from llama_lab import experiments
from llama_lab.analysis import DEFAULT_GPU
from llama_lab.config import LIMITS, MAX_BATCH, PRESETS
from llama_lab.ui import runs, state, widgets
from llama_lab.units import escape_markdown, human_count, human_params

ROOT = Path(__file__).resolve().parents[2]
KV, GRAD, LIVE = (
    str(ROOT / "pages" / name)
    for name in ("2_KV_cache_and_attention.py", "3_Gradient_norms.py", "4_Live_pass.py")
)
P2, P3, P4 = "llama_lab.page2.", "llama_lab.page3.", "llama_lab.page4."
E = escape_markdown


def warnings(at: AppTest) -> list[str]:
    return [w.value for w in at.main.warning]


def captions(at: AppTest) -> list[str]:
    return [c.value for c in at.caption]


# ---- the URL keeps page-level choices -----------------------------------------------------------
def test_kv_page_takes_its_gpu_and_context_from_the_url_and_writes_them_back():
    at = open_page(KV, {"kv.gpu": "L4", "kv.context": "4096"})
    assert at.selectbox(key=P2 + "gpu").value == "L4"
    assert at.select_slider(key=P2 + "context").value == 4096
    assert chart_title(charts(at)[2]).startswith("Decode roofline at context 4,096 ") and not errors(at)
    at.selectbox(key=P2 + "gpu").set_value("A100 80GB").run()
    assert at.query_params["kv.gpu"] == "A100 80GB" and at.query_params["kv.context"] == "4096"
    at.selectbox(key=P2 + "gpu").set_value(DEFAULT_GPU).run()  # the default: not in the URL
    assert "kv.gpu" not in at.query_params
    assert at.query_params["preset"] == "seed-demo"  # the sidebar's keys stay


def test_bad_page_values_are_named_with_their_key_and_rule_and_the_default_is_used():
    at = open_page(KV, {"kv.gpu": "B9000", "kv.context": "100"})
    shown = errors(at)
    assert any("Link: kv.gpu='B9000' must be one of H100 80GB" in e for e in shown), shown
    assert any("Link: kv.context='100' must be one of 128, 256" in e for e in shown), shown
    assert at.selectbox(key=P2 + "gpu").value == DEFAULT_GPU
    assert at.select_slider(key=P2 + "context").value == 128  # the sidebar's T
    at.run()  # shown until a change
    assert len(errors(at)) == 2
    at.selectbox(key=P2 + "gpu").set_value("L4").run()
    assert not errors(at)


def test_live_pass_keeps_sizes_device_and_dtype_in_the_url():
    at = open_page(
        LIVE,
        {
            "preset": "debug",
            "live.dtype": "bf16",
            "live.batch": "3",
            "live.model": "small",
            "live.n_layers": "1",
            "live.iters": "4",
            "live.device": "cpu",
            "live.seq_len": "32",
        },
    )
    assert not errors(at) and not warnings(at)
    assert at.selectbox(key=P4 + "dtype").value == "bf16"
    assert at.radio(key=P4 + "model").value == "small"
    assert [at.number_input(key=P4 + k).value for k in ("n_layers", "batch", "iters", "seq_len")] == [
        1,
        3,
        4,
        32,
    ]
    assert at.selectbox(key=P4 + "device").value == "cpu"
    at.number_input(key=P4 + "batch").set_value(5).run()
    assert at.query_params["live.batch"] == "5" and at.query_params["live.dtype"] == "bf16"


@pytest.mark.slow
def test_gradient_norms_keeps_its_live_sizes_in_the_url():
    at = open_page(
        GRAD,
        {
            "grad.d_model": "128",
            "grad.n_layers": "3",
            "grad.seq_len": "32",
            "grad.batch": "2",
            "grad.seed": "7",
            "grad.device": "cpu",
        },
    )
    assert not errors(at) and not warnings(at)
    assert at.selectbox(key=P3 + "d_model").value == 128
    assert [at.number_input(key=P3 + k).value for k in ("n_layers", "seq_len", "batch", "seed")] == [
        3,
        32,
        2,
        7,
    ]
    assert "d=128, 3 blocks" in at.info[0].value
    at = open_page(GRAD, {"grad.d_model": "100", "grad.seed": "x"})
    shown = errors(at)
    assert any("grad.d_model='100' must be one of 32, 64, 128, 256" in e for e in shown)
    assert any("grad.seed='x' must be an integer" in e for e in shown)


def test_page_choices_survive_a_page_switch_and_other_pages_keys_leave_the_url():
    at = open_page(ROOT / "app.py")
    at.switch_page("pages/2_KV_cache_and_attention.py").run()
    at.selectbox(key=P2 + "gpu").set_value("L4").run()
    at.switch_page("pages/4_Live_pass.py").run()
    assert not at.exception and "kv.gpu" not in at.query_params
    at.switch_page("pages/2_KV_cache_and_attention.py").run()
    assert at.selectbox(key=P2 + "gpu").value == "L4" and at.query_params["kv.gpu"] == "L4"


# ---- out-of-range values say why ----------------------------------------------------------------
@pytest.mark.slow
def test_url_values_beyond_a_bound_are_clamped_with_a_note_naming_it():
    at = open_page(GRAD, {"grad.n_layers": "500", "grad.batch": "0"})
    assert at.number_input(key=P3 + "n_layers").value == 96
    assert at.number_input(key=P3 + "batch").value == 1
    assert E("Link: grad.n_layers='500' is above the maximum 96; using 96.") in warnings(at)
    assert E("Link: grad.batch='0' is below the minimum 1; using 1.") in warnings(at)


def test_a_value_beyond_a_bound_set_by_the_model_is_clamped_with_a_note():
    at = open_page(LIVE, {"preset": "debug", "live.seq_len": "100000"})  # debug: max_seq 64
    assert at.number_input(key=P4 + "seq_len").value == 64
    note = "⚠️ " + E("sequence T: 100,000 is above the maximum 64 (the live model's max_seq_len); using 64.")
    assert note in captions(at)
    at.run()
    assert note in captions(at)  # until the value changes
    at.number_input(key=P4 + "seq_len").set_value(16).run()
    assert note not in captions(at)


def test_sidebar_t_moved_by_a_smaller_max_seq_len_says_why():
    at = open_page(ROOT / "home.py", {"preset": "seed-demo"})
    at.sidebar.number_input(key=state.field_key("max_seq_len")).set_value(64).run()
    assert at.sidebar.number_input(key=state.KEY_SEQ_LEN).value == 64
    assert "⚠️ T=128 is above max_seq_len=64; T is now 64." in [c.value for c in at.sidebar.caption]


def test_kv_context_that_is_no_longer_a_choice_says_why():
    at = open_page(KV, {"seq": "100"})
    at.select_slider(key=P2 + "context").set_value(100).run()  # the sidebar's T
    at.sidebar.number_input(key=state.KEY_SEQ_LEN).set_value(64).run()
    assert at.select_slider(key=P2 + "context").value == 64
    assert any(E("context length S: 100 is not a choice") in c for c in captions(at))


# ---- an uploaded model keeps its name ------------------------------------------------------------
HF = {
    "model_type": "qwen3",
    "hidden_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 688,
    "head_dim": 64,
    "vocab_size": 1000,
    "max_position_embeddings": 512,
}


def upload(at: AppTest, name: str, data: dict) -> AppTest:
    at.sidebar.file_uploader[0].set_value((name, json.dumps(data).encode(), "application/json")).run()
    assert not at.exception
    return at


def test_an_upload_keeps_its_name_resets_t_and_a_preset_drops_it():
    at = open_page(ROOT / "home.py")
    at.sidebar.number_input(key=state.KEY_SEQ_LEN).set_value(64).run()
    upload(at, "config.json", {**HF, "_name_or_path": "Qwen/Qwen3-tiny"})
    sidebar = [c.value for c in at.sidebar.caption]
    assert any(c.startswith("Model: " + E("Qwen/Qwen3-tiny")) for c in sidebar), sidebar
    assert not any("Edited from seed-demo" in c for c in sidebar)
    assert at.sidebar.number_input(key=state.KEY_SEQ_LEN).value == 512  # its max_seq_len
    assert at.query_params["name"] == "Qwen/Qwen3-tiny" and at.query_params["seq"] == "512"
    assert at.subheader[0].value == "Current model: " + E("Qwen/Qwen3-tiny")
    at.sidebar.number_input(key=state.field_key("n_layers")).set_value(3).run()
    assert any(
        c.startswith(f"Edited from {E('Qwen/Qwen3-tiny')}: n_layers")
        for c in (c.value for c in at.sidebar.caption)
    )
    assert at.sidebar.selectbox(key=state.KEY_PRESET_VIEW).value == state.UPLOADED  # the box says so
    at.sidebar.selectbox(key=state.KEY_PRESET_VIEW).set_value("llama-2-7b").run()
    assert "name" not in at.query_params and at.subheader[0].value == "Current model"
    assert at.sidebar.selectbox(key=state.KEY_PRESET).value == "llama-2-7b"
    assert at.sidebar.number_input(key=state.field_key("n_layers")).value == 32


def test_an_upload_without_a_model_name_is_called_by_its_file_name_and_family():
    at = upload(open_page(ROOT / "home.py"), "tiny-qwen.json", HF)
    named = E(f"tiny-qwen.json ({HF['model_type']})")
    assert any(c.value.startswith("Model: " + named) for c in at.sidebar.caption)
    # the Hub's usual file name says little: the class it builds is named beside it
    at = upload(open_page(ROOT / "home.py"), "config.json", {**HF, "architectures": ["Qwen3ForCausalLM"]})
    assert at.subheader[0].value == "Current model: " + E("config.json (Qwen3ForCausalLM)")


def test_a_link_keeps_the_name_and_drops_it_when_its_config_is_refused():
    at = open_page(ROOT / "home.py", {"name": "my model", "n_layers": "3"})
    assert at.subheader[0].value == "Current model: my model"
    at = open_page(ROOT / "home.py", {"name": "my model", "n_kv_heads": "3"})  # falls back
    assert at.subheader[0].value == "Current model" and "name" not in at.query_params
    name, notes = state.model_name("\x1b" + "y" * 500)  # cut, controls removed
    assert name == "y" * state.MAX_NAME + "…" and "500" in notes[0]
    assert state.model_name("  ") == (None, [])


# ---- the live-run box and gradient clipping -------------------------------------------------------
def bordered_blocks(at: AppTest) -> list:
    found = []

    def walk(node):
        proto = getattr(node, "proto", None)
        if getattr(getattr(proto, "flex_container", None), "border", False) or getattr(
            getattr(proto, "vertical", None), "border", False
        ):
            found.append(node)
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at.main)
    return found


def keys_in(node) -> set:
    keys = set()

    def walk(n):
        if getattr(n, "key", None):
            keys.add(n.key)
        for child in getattr(n, "children", {}).values():
            walk(child)

    walk(node)
    return keys


@pytest.mark.parametrize(
    "page,prefix,sizes",
    [
        (GRAD, P3, ("d_model", "n_layers", "seq_len", "batch", "seed", "device")),
        (LIVE, P4, ("model", "device", "dtype", "seq_len", "batch", "iters")),
    ],
)
def test_live_run_sizes_sit_in_their_own_box(page, prefix, sizes):
    at = open_page(page, {"preset": "debug"})
    assert widgets.LIVE_SIZE_HEADING == "Live-run size (this page only)"
    assert widgets.LIVE_SIZE_HEADING in [h.value for h in at.subheader]
    boxes = [box for box in bordered_blocks(at) if {prefix + s for s in sizes} <= keys_in(box)]
    assert boxes, "no bordered box holds the live-run sizes"
    assert not any(key.startswith("llama_lab.w.") for key in keys_in(boxes[0]))


@pytest.mark.slow
def test_gradient_clipping_reaches_every_training_run(monkeypatch):
    seen = []
    original = experiments.compare_runs_over_seeds

    def recording(specs, *args, **kwargs):
        seen.append([spec.grad_clip for spec in specs])
        return original(specs, *args, **kwargs)

    monkeypatch.setattr(experiments, "compare_runs_over_seeds", recording)
    at = open_page(
        GRAD,
        {
            "preset": "debug",
            "grad.n_layers": "1",
            "grad.seq_len": "8",
            "grad.batch": "1",
            "grad.seeds": "1",
            "grad.d_model": "32",
        },
    )
    at.number_input(key=P3 + "steps").set_value(2)
    clip = at.number_input(key=P3 + "grad_clip")
    assert clip.label == "gradient clipping (max norm, 0 = off)" and clip.value == 0.0
    click(at.run(), P3 + "run_train")
    assert seen[-1] == [None] * 4
    assert at.session_state[state.KEY_TRAINING].settings["grad_clip"] is None
    at.number_input(key=P3 + "grad_clip").set_value(1.0).run()
    assert runs.STALE_NOTE in captions(at)  # the clip is one of the settings
    click(at, P3 + "run_train")
    assert seen[-1] == [1.0] * 4
    assert at.session_state[state.KEY_TRAINING].settings["grad_clip"] == 1.0
    assert any("clipped to a total norm of 1" in c for c in captions(at))
    specs = experiments.norm_position_specs(PRESETS["debug"], 1e-3, 10)
    assert [replace(s, grad_clip=1.0).grad_clip for s in specs] == [1.0] * 4


# ---- headline numbers ----------------------------------------------------------------------------
LONGEST_METRIC = 14  # characters: fits a quarter of a 1280-px-wide page's main column


@pytest.mark.slow
@pytest.mark.parametrize(
    "query",
    [
        {"preset": "llama-3.1-405b"},
        {"preset": "llama-3.1-405b", "seq": "131072", "batch": str(MAX_BATCH)},
        {"preset": "llama-3.1-405b", "d_model": str(LIMITS["d_model"]), "n_layers": str(LIMITS["n_layers"])},
    ],
)
@pytest.mark.parametrize(
    "page", ["home.py", "pages/1_Parameters_and_FLOPs.py", "pages/2_KV_cache_and_attention.py"]
)
def test_headline_numbers_are_compact_with_the_exact_value_in_the_tooltip(page, query):
    at = open_page(ROOT / page, query, timeout=180)
    for metric in at.metric:
        assert len(metric.value) <= LONGEST_METRIC, (metric.label, metric.value)
    if page == "home.py" and len(query) == 1:
        total = 405_853_388_800
        params = next(m for m in at.metric if m.label == "Parameters")
        assert params.value == human_params(total)
        assert params.proto.help.startswith(f"{total:,}")


def test_the_fvcore_numbers_are_compact_with_the_exact_ones_in_the_tooltip():
    at = open_page(ROOT / "pages" / "1_Parameters_and_FLOPs.py", {"preset": "debug"})
    at.toggle(key="llama_lab.page1.fvcore").set_value(True).run()
    shown = {m.label: m for m in at.metric}
    ours = shown["LLaMA Lab"]
    assert ours.value == human_count(int(ours.proto.help.split()[0].replace(",", "")), "FLOP")
    assert ours.proto.help.endswith(" FLOPs") and "," in ours.proto.help
    assert shown["Difference"].value == human_count(0, "FLOP")
