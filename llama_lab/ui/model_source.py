"""Where the builder's model comes from: a preset chosen in the Preset box, or an uploaded
config.json (ours or Hugging Face's, with its name, notes and stored weight format). The
callbacks load the model's values into the session state (``state``)."""

from __future__ import annotations

import json
from typing import Any

from ..config import PRESETS, parse_config_json
from ..config.files import source_label, stored_quant_of
from ..config.hf.read import TEXT_DECODER
from ..errors import LabError
from .state import (
    AS_DTYPE,
    FROM_FILE,
    KEY_BATCH,
    KEY_DTYPE,
    KEY_KV_DTYPE,
    KEY_LAST_CHANGED,
    KEY_LINK_ERRORS,
    KEY_MODEL_BASE,
    KEY_MODEL_NAME,
    KEY_PRESET,
    KEY_PRESET_VIEW,
    KEY_SEQ_NOTE,
    KEY_STORED_QUANT,
    KEY_UPLOAD,
    KEY_UPLOAD_ERROR,
    KEY_UPLOAD_NOTES,
    KEY_WEIGHT_DTYPE,
    UPLOADED,
    load_builder_values,
    model_name,
    session,
    values_for_config,
)


def _stored(state: Any) -> tuple[str, str]:
    return state[KEY_WEIGHT_DTYPE], state[KEY_KV_DTYPE]


def _drop_file_format(state: Any) -> None:
    """No uploaded file's stored format any more: the weights as the dtype if they were in it."""
    state[KEY_STORED_QUANT] = None
    if state.get(KEY_WEIGHT_DTYPE) == FROM_FILE:
        state[KEY_WEIGHT_DTYPE] = AS_DTYPE


def on_preset() -> None:
    """The Preset box's callback: load the chosen preset (keeping B, the dtype and the formats)."""
    state = session()
    _drop_file_format(state)  # a preset is not the uploaded model
    preset = state[KEY_PRESET]
    load_builder_values(
        values_for_config(
            preset, PRESETS[preset], batch=state[KEY_BATCH], dtype=state[KEY_DTYPE], stored=_stored(state)
        )
    )
    state[KEY_LINK_ERRORS], state[KEY_UPLOAD_NOTES], state[KEY_UPLOAD_ERROR] = [], [], None
    state[KEY_LAST_CHANGED] = state[KEY_MODEL_NAME] = state[KEY_MODEL_BASE] = None
    state[KEY_SEQ_NOTE] = None


def on_preset_view() -> None:
    """A preset chosen in the Preset box while it shows an uploaded model: load it."""
    state = session()
    chosen = state[KEY_PRESET_VIEW]
    if chosen != UPLOADED:
        state[KEY_PRESET] = chosen
        on_preset()


def on_upload() -> None:
    """The uploader's callback: load the config.json, its name, notes and stored weight format."""
    state = session()
    uploaded = state.get(KEY_UPLOAD)
    if uploaded is None:
        return
    state[KEY_LINK_ERRORS] = []
    try:
        text = uploaded.getvalue().decode("utf-8")
        cfg, notes = parse_config_json(text, source=uploaded.name)
        stored = stored_quant_of(text, source=uploaded.name)  # read (and checked) just above
    except UnicodeDecodeError:
        state[KEY_UPLOAD_ERROR] = f"{source_label(uploaded.name)} is not UTF-8 text"
        return
    except LabError as exc:  # the readers start every refusal with the file's name, once
        message, name = str(exc), source_label(uploaded.name)
        state[KEY_UPLOAD_ERROR] = message if message.startswith(name) else f"{name}: {message}"
        return
    _drop_file_format(state)  # the file declares its own stored format, or none
    if stored is not None:  # the weights are counted as the file stores them (another stays a choice)
        state[KEY_STORED_QUANT], state[KEY_WEIGHT_DTYPE] = stored, FROM_FILE
    values = values_for_config(
        state[KEY_PRESET], cfg, batch=state[KEY_BATCH], dtype=state[KEY_DTYPE], stored=_stored(state)
    )  # T: max_seq_len
    load_builder_values(values)
    state[KEY_UPLOAD_NOTES] = [f"{source_label(uploaded.name)}: {note}" for note in notes]
    state[KEY_UPLOAD_ERROR], state[KEY_LAST_CHANGED], state[KEY_SEQ_NOTE] = None, None, None
    data = json.loads(text)  # valid: it was just read
    shown = model_name(_name_in(data) or _file_and_family(uploaded.name, data))[0]  # None: no name
    wrapped = isinstance(data.get("text_config"), dict)  # a multimodal model's text decoder
    state[KEY_MODEL_NAME] = f"{TEXT_DECODER} {shown}" if wrapped and shown else shown
    state[KEY_MODEL_BASE] = dict(values)


def _file_and_family(file_name: str, data: dict) -> str:
    """A file that names no model: its name and the class it builds ("config.json
    (Qwen2ForCausalLM)"), or its model_type; LLaMA Lab's own format: the file name."""
    architectures = data.get("architectures")
    family = architectures[0] if isinstance(architectures, list) and architectures else data.get("model_type")
    return f"{file_name} ({family})" if isinstance(family, str) and family else file_name


def _name_in(data: dict) -> str | None:
    """The model a Hugging Face config.json names (``_name_or_path``), if any."""
    name = data.get("_name_or_path")
    return name if isinstance(name, str) else None
