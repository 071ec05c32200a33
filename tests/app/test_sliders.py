"""The sidebar's sliders (issue 14): every position of every shape slider gives a valid config
(hypothesis over presets, fields and positions, also after other sliders moved), the grids keep
the head arithmetic, and moving a slider moves the builder's value, its exact entry and the URL."""

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from llama_lab.config import PRESETS, ffn_from_rule
from llama_lab.config.grids import PUBLISHED_VOCABS, SLIDER_FIELDS, geometric, workload_candidates
from llama_lab.ui import state
from llama_lab.ui.sliders import field_options, slider_key, workload_options

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def builder(preset: str) -> dict:
    return state.values_for_config(preset, PRESETS[preset])


def with_value(values: dict, name: str, value: int) -> dict:
    """The builder after a slider moved: the value, and the FFN width following its rule."""
    changed = dict(values)
    changed[state.field_key(name)] = value
    width = ffn_from_rule(
        changed[state.KEY_FFN_RULE],
        changed[state.field_key("d_model")],
        changed[state.KEY_FFN_MULTIPLE_OF],
        changed[state.KEY_FFN_MULTIPLIER] or None,
    )
    if width is not None:
        changed[state.field_key("ffn_hidden")] = width
    return changed


@settings(max_examples=60, deadline=None)
@given(
    preset=st.sampled_from(sorted(PRESETS)),
    moves=st.lists(st.tuples(st.sampled_from(SLIDER_FIELDS), st.floats(0, 1)), min_size=1, max_size=3),
)
def test_every_slider_position_gives_a_valid_config(preset, moves):
    values = builder(preset)
    for name, where in moves:
        options = field_options(name, values)
        assert options == sorted(set(options)) and len(options) >= 1
        value = options[min(len(options) - 1, int(where * len(options)))]
        values = with_value(values, name, value)
        state.config_from_values(values)  # raises ConfigError if not valid


def test_the_grids_keep_the_head_arithmetic():
    values = builder("seed-demo")  # 8 heads, RoPE: head_dim even
    d_options = field_options("d_model", values)
    assert all(d % 16 == 0 for d in d_options) and 512 in d_options and 4096 in d_options
    assert field_options("n_kv_heads", values) == [1, 2, 4, 8]
    heads = field_options("n_heads", values)
    # divisors of 512 that n_kv_heads = 2 divides and that leave an even head_dim
    assert heads == [2, 4, 8, 16, 32, 64, 128, 256]
    sinusoidal = field_options("d_model", builder("transformer-2017"))  # 8 heads, no RoPE
    assert sinusoidal[:3] == [8, 16, 24] and all(d % 8 == 0 for d in sinusoidal)
    vocab = field_options("vocab_size", values)
    assert set(PUBLISHED_VOCABS) <= set(vocab) and vocab[0] == 2 and vocab[-1] == 4_194_304
    assert field_options("n_layers", values)[:3] == [1, 2, 3]


def test_an_off_grid_value_stays_on_its_slider():
    values = with_value(builder("seed-demo"), "vocab_size", 32_001)
    assert 32_001 in field_options("vocab_size", values)
    assert workload_options("seq_len", 100, 128) == [1, 2, 4, 8, 16, 32, 64, 100, 128]
    assert workload_candidates("batch", 10**9)[-1] == 1_048_576
    assert geometric(1, 16) == [1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 13, 16]


def test_moving_a_slider_moves_the_value_its_entry_and_the_url():
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.sidebar.select_slider(key=slider_key(state.field_key("d_model"))).set_value(1024).run()
    assert not at.exception
    assert at.sidebar.number_input(key=state.field_key("d_model")).value == 1024
    assert at.query_params["d_model"] == "1024"
    # the FFN width followed its rule: ⌊8/3 · 1024⌋ = 2730
    assert at.sidebar.number_input(key=state.field_key("ffn_hidden")).value == 2730
    assert 1040 not in field_options("d_model", builder("seed-demo"))
    at.sidebar.number_input(key=state.field_key("d_model")).set_value(1040).run()  # off the grid
    slider = at.sidebar.select_slider(key=slider_key(state.field_key("d_model")))
    assert slider.value == 1040 and "1,040" in slider.options  # options as shown
    at.sidebar.select_slider(key=slider_key(state.KEY_SEQ_LEN)).set_value(64).run()
    assert at.sidebar.number_input(key=state.KEY_SEQ_LEN).value == 64 and at.query_params["seq"] == "64"
    at.sidebar.select_slider(key=slider_key(state.field_key("n_kv_heads"))).set_value(8).run()
    assert at.sidebar.selectbox(key=state.field_key("n_kv_heads")).value == 8


@pytest.mark.parametrize("preset", ["llama-3.1-405b", "mixtral-8x7b", "transformer-2017"])
def test_the_sliders_start_at_the_presets_values(preset):
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["preset"] = preset
    at.run()
    cfg = PRESETS[preset]
    for name in SLIDER_FIELDS:
        key = slider_key(state.field_key(name))
        assert at.sidebar.select_slider(key=key).value == getattr(cfg, name), name


def test_a_size_the_browser_cannot_hold_exactly_is_bounded_and_refused_by_name():
    """d_model past 2⁵³ would round in the browser and come back as another number (it became 1,
    and the error blamed d_model=1): the widget stops at 2⁵³ − 1, and that is refused naming it."""
    from pathlib import Path

    from apptest_helpers import errors, open_page

    from llama_lab.ui import state
    from llama_lab.ui.family_fields import BROWSER_MAX_INT

    at = open_page(Path(__file__).resolve().parents[2] / "home.py")
    box = at.sidebar.number_input(key=state.field_key("d_model"))
    assert box.max == BROWSER_MAX_INT == 2**53 - 1
    box.set_value(BROWSER_MAX_INT).run()
    assert any("d_model=9007199254740991" in e for e in errors(at)), errors(at)
