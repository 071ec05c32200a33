"""The sidebar's family fields, drawn from the families' own field groups
(``llama_lab.config.families``: each family module declares the fields it added, with their
labels and help): one collapsed group each, opened where the rule a value breaks is shown."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from ..config import CHOICES
from ..config.families import FAMILY_LIST
from ..config.hf.family import FieldGroup, FieldSpec
from .sliders import LabelShown
from .state import field_key, on_field_change

BROWSER_MAX_INT = 2**53 - 1  # JavaScript's Number.MAX_SAFE_INTEGER
FOLLOW = {None: "follows 'biases in linear layers'", True: "on", False: "off"}
# The sparse attention pattern's fields (config.sparse: not a family's), after the window's group
SPARSE_FIELDS = FieldGroup(
    "Sparse attention on the window (Longformer, BigBird)",
    (
        FieldSpec(
            "global_tokens",
            "global tokens G",
            "int",
            help="Longformer's global attention, causal: the first G positions are seen by every later "
            "query and see every earlier key. Needs a sliding window.",
            minimum=0,
        ),
        FieldSpec(
            "dilation",
            "window dilation d",
            "int",
            help="Longformer's dilated window: the W keys i, i − d, …, i − (W − 1)·d.",
        ),
        FieldSpec(
            "random_blocks",
            "random blocks r per query block",
            "int",
            help="BigBird: each query block also sees r earlier key blocks drawn (seeded) beyond its "
            "window and the global tokens.",
            minimum=0,
        ),
        FieldSpec("sparse_block_size", "random-block size b", "int"),
        FieldSpec("sparse_seed", "random-block seed", "int", minimum=0),
    ),
)
# the families' own groups, the sparse pattern's after the one holding the sliding window
FIELD_GROUPS: tuple[FieldGroup, ...] = tuple(
    shown
    for family in FAMILY_LIST
    for group in family.field_groups
    for shown in ((group, SPARSE_FIELDS) if "sliding_window" in group.names else (group,))
)


def field(widget, name: str, label: str, *args, **kwargs) -> None:
    """``widget`` (st.toggle, st.number_input, …) bound to config field ``name``: its session
    key, and the change handler that rebuilds the config."""
    widget(label, *args, key=field_key(name), on_change=on_field_change, args=(name,), **kwargs)


def int_input(
    name: str,
    label: str,
    *,
    step: int = 1,
    minimum: int = 1,
    disabled: bool = False,
    help: str | None = None,
    label_visibility: LabelShown = "visible",
) -> None:
    """No upper bound of the model's on the widget: ModelConfig refuses sizes beyond LIMITS with
    a message, shown next to the field, instead of the widget clamping silently. The browser's
    own bound stays (the largest integer a JavaScript number holds exactly: past it a typed
    value would round, and come back as another number)."""
    field(
        st.number_input,
        name,
        label,
        min_value=minimum,
        max_value=BROWSER_MAX_INT,
        step=step,
        disabled=disabled,
        help=help,
        label_visibility=label_visibility,
    )


def draw_field(spec: FieldSpec) -> None:
    """One field as its spec says: a whole number, a float, a switch, a layer set, a choice, or
    a bias that follows ``bias``."""
    if spec.widget == "int":
        int_input(spec.name, spec.label, minimum=int(spec.minimum), step=int(spec.step), help=spec.help)
    elif spec.widget == "float":
        limits = {} if spec.maximum is None else {"max_value": float(spec.maximum)}
        field(
            st.number_input,
            spec.name,
            spec.label,
            min_value=float(spec.minimum),
            step=float(spec.step),
            help=spec.help,
            **limits,
        )
    elif spec.widget == "toggle":
        field(st.toggle, spec.name, spec.label, help=spec.help)
    elif spec.widget == "text":
        field(st.text_input, spec.name, spec.label, help=spec.help)
    elif spec.widget == "choice":
        field(st.selectbox, spec.name, spec.label, list(CHOICES[spec.name]), help=spec.help)
    else:  # "follow"
        field(st.selectbox, spec.name, spec.label, list(FOLLOW), format_func=FOLLOW.get, help=spec.help)


def draw_group(group: FieldGroup, after: Callable[[str], None]) -> None:
    """A group's fields in order, each followed by its rule's message when it broke one."""
    for spec in group.fields:
        draw_field(spec)
        after(spec.name)
