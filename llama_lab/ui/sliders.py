"""The sidebar's shape sliders: each shape field and the workload's T and B as a slider over the
values valid for the current config (``config.grids``), with the exact-value entry beside it.
The entry's key is the builder's value (URL mirror and validation unchanged); the slider is a
view of it — drawn at the current value, and writing it back when moved."""

from __future__ import annotations

import functools
from typing import Any, Callable, Literal

import streamlit as st

from ..config import ffn_from_rule
from ..config.grids import field_candidates, slider_options, workload_candidates
from ..errors import LabError
from .state import (
    AUTO,
    KEY_FFN_MULTIPLE_OF,
    KEY_FFN_MULTIPLIER,
    KEY_FFN_RULE,
    WIDGET_PREFIX,
    config_from_values,
    field_key,
    on_field_change,
    session,
)

SLIDER_PREFIX = WIDGET_PREFIX + "slider."

# st.*(label_visibility=...): the exact entry beside a slider is "collapsed", alone "visible"
LabelShown = Literal["visible", "hidden", "collapsed"]


def slider_key(key: str) -> str:
    """The slider beside the widget whose session-state key is ``key``."""
    return SLIDER_PREFIX + key[len(WIDGET_PREFIX) :]


def _builder_fields(values: dict[str, Any]) -> dict[str, Any]:
    head_dim = values[field_key("head_dim")]
    return {
        "d_model": values[field_key("d_model")],
        "n_heads": values[field_key("n_heads")],
        "n_kv_heads": values[field_key("n_kv_heads")],
        "head_dim": None if head_dim in (None, AUTO["head_dim"]) else head_dim,
        "pos_encoding": values[field_key("pos_encoding")],
    }


def field_options(name: str, values: dict[str, Any]) -> list[int]:
    """The values of config field ``name`` whose config, everything else as ``values`` (the
    builder's, keyed by session-state key; the FFN width following its rule), is valid —
    once per builder state (about 20 ms of config checks for the seven sliders, otherwise on
    every rerun of every page)."""
    return list(_field_options(name, tuple(sorted(values.items()))))


@functools.lru_cache(maxsize=1024)
def _field_options(name: str, items: tuple) -> tuple[int, ...]:
    values = dict(items)

    def valid(candidate: int) -> bool:
        changed = dict(values)
        changed[field_key(name)] = candidate
        if name == "d_model":
            width = ffn_from_rule(
                changed[KEY_FFN_RULE],
                candidate,
                changed[KEY_FFN_MULTIPLE_OF],
                changed[KEY_FFN_MULTIPLIER] or None,
            )
            if width is not None:
                changed[field_key("ffn_hidden")] = width
        try:
            config_from_values(changed)
        except LabError:
            return False
        return True

    try:
        candidates = field_candidates(name, _builder_fields(values))
    except (TypeError, ValueError, ZeroDivisionError):  # a field the builder holds unset
        candidates = []
    return tuple(slider_options(candidates, values[field_key(name)], valid))


def workload_options(name: str, current: int, upper: int) -> list[int]:
    return slider_options(workload_candidates(name, upper), current)


def _moved(key: str, name: str | None) -> None:
    state = session()
    state[key] = state[slider_key(key)]
    on_field_change(name)


def exact_label(label: str) -> str:
    """The exact entry's label (read by screen readers; shown only without a slider)."""
    return f"{label}: exact value"


def slider_beside(
    key: str,
    label: str,
    options: list[int],
    entry: Callable[[str, LabelShown], object],  # its return value is not used
    name: str | None = None,
    disabled: bool = False,
    help: str | None = None,
) -> None:
    """A slider over ``options`` set to the value under ``key``, and beside it
    ``entry(label, label_visibility)``, the exact-value widget the caller draws under ``key``
    (its label collapsed beside the slider, shown when there is nothing to slide over)."""
    if len(options) < 2:  # nothing to slide over: the entry alone
        entry(label, "visible")
        return
    state = session()
    state[slider_key(key)] = state[key]
    left, right = st.columns([3, 2], vertical_alignment="bottom")
    with left:
        st.select_slider(
            label,
            options,
            key=slider_key(key),
            on_change=_moved,
            args=(key, name),
            format_func=lambda v: f"{v:,}",
            disabled=disabled,
            help=help,
        )
    with right:
        entry(exact_label(label), "collapsed")
