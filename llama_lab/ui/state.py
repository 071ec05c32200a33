"""The sidebar's state: session-state keys (constants), the builder's values and the URL that
mirrors them, the valid ``Selection`` pages get, and the config downloads.

State model. Streamlit forgets a widget's value when the page that drew it is left (widget ids
include the page), so the builder keeps its own copy of every value under ``KEY_BUILDER`` and
writes it back into the widget keys at the top of every run. On a session's first run the
values come from the URL (``?preset=…&d_model=…&seq=…``); after every valid run the URL is
rewritten to the preset plus the fields that differ from it (and an uploaded model's name), so
a link reproduces the view. The pages' own widgets are mirrored as ``<page>.<name>``
(``widgets.link_widgets``).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, fields
from typing import Any

import streamlit as st

from ..analysis.common import TRAINING_DTYPES
from ..analysis.quant import KV_DTYPES, WEIGHT_DTYPES, WeightQuant, stored_weights
from ..config import (
    MAX_BATCH,
    PRESETS,
    ConfigError,
    ModelConfig,
    coerce_field,
    detect_ffn_rule,
    ffn_from_rule,
)
from ..config.fields import RopeScaling, VisionTower
from ..config.hf.quant import StoredQuant
from ..config.model_config import DERIVED
from ..experiments import KINDS
from ..runtime.hardware import DTYPE_BYTES
from ..units import strip_control

DEFAULT_PRESET = "seed-demo"


CONFIG_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(ModelConfig))


# ---- session-state keys ------------------------------------------------------------------------
KEY_BUILDER = "llama_lab.builder"  # dict: every builder value; survives page switches


KEY_LINK_ERRORS = "llama_lab.link_errors"  # list[str]: bad URL values (cleared on any change)


KEY_UPLOAD_NOTES = "llama_lab.upload_notes"  # list[str]: what an uploaded config.json lost


KEY_UPLOAD_ERROR = "llama_lab.upload_error"  # str | None: why an upload was refused


KEY_CONFIG_ERROR = "llama_lab.config_error"  # str | None: the rule the current values break


KEY_LAST_CHANGED = "llama_lab.last_changed"  # str | None: the config field edited last


KEY_MODEL_NAME = "llama_lab.model_name"  # str | None: an uploaded (or linked) model's name


KEY_MODEL_BASE = "llama_lab.model_base"  # dict | None: its builder values (what "edited" means)


KEY_SEQ_NOTE = "llama_lab.seq_note"  # (T, why) | None: T was moved within max_seq_len


# StoredQuant | None: the weights' stored format the uploaded config.json declares (its
# quantization_config); KEY_WEIGHT_DTYPE is FROM_FILE while the weights are counted in it
KEY_STORED_QUANT = "llama_lab.stored_quant"
# the Fine-tuning page's last valid recipe, (config, report.FinetuneWorkload): the report's section
KEY_FINETUNE = "llama_lab.finetune"


# This session's experiment results, one ExperimentEntry per kind of the experiment registry:
# the experiment pages write them, the Report page includes them all.
EXPERIMENT_KEYS: dict[str, str] = {name: kind.state_key for name, kind in KINDS.items()}
KEY_GRADNORMS = EXPERIMENT_KEYS["gradnorms"]
KEY_DEPTH_SWEEP = EXPERIMENT_KEYS["depth_sweep"]
KEY_TRAINING = EXPERIMENT_KEYS["training"]  # Post-LN / Pre-LN × warmup (Gradient norms)
KEY_ABLATION = EXPERIMENT_KEYS["ablation"]  # a contrast of the seed's table (Architecture)
KEY_LIVE_PASS = EXPERIMENT_KEYS["live_pass"]
KEY_DECODE = EXPERIMENT_KEYS["decode"]


WIDGET_PREFIX = "llama_lab.w."


KEY_PRESET = WIDGET_PREFIX + "preset"
# While an uploaded (or linked) model fills the fields, the Preset box shows UPLOADED under its
# own key; KEY_PRESET keeps the preset the URL's fields are written against.
KEY_PRESET_VIEW = WIDGET_PREFIX + "preset_view"
UPLOADED = "uploaded"


KEY_FFN_RULE = WIDGET_PREFIX + "ffn_rule"


KEY_FFN_MULTIPLE_OF = WIDGET_PREFIX + "ffn_multiple_of"


KEY_FFN_MULTIPLIER = WIDGET_PREFIX + "ffn_multiplier"


KEY_SEQ_LEN = WIDGET_PREFIX + "seq_len"


KEY_BATCH = WIDGET_PREFIX + "batch"


KEY_DTYPE = WIDGET_PREFIX + "dtype"


KEY_WEIGHT_DTYPE = WIDGET_PREFIX + "weight_dtype"  # AS_DTYPE: the weights are stored at KEY_DTYPE


KEY_KV_DTYPE = WIDGET_PREFIX + "kv_dtype"  # AS_DTYPE: the KV cache is stored at KEY_DTYPE


AS_DTYPE = "as dtype"  # a stored format that follows the dtype (not None: a selectbox shows
# None as no choice at all)


FROM_FILE = "from the file"  # the weights in the uploaded file's own stored format (offered
# only while an upload declared one: KEY_STORED_QUANT; never in the URL, which cannot carry it)


KEY_UPLOAD = WIDGET_PREFIX + "upload"


def field_key(name: str) -> str:
    """Session-state key of the widget that edits ModelConfig field ``name``."""
    return WIDGET_PREFIX + name


BUILDER_KEYS: tuple[str, ...] = (
    KEY_PRESET,
    *map(field_key, CONFIG_FIELDS),
    KEY_FFN_RULE,
    KEY_FFN_MULTIPLE_OF,
    KEY_FFN_MULTIPLIER,
    KEY_SEQ_LEN,
    KEY_BATCH,
    KEY_DTYPE,
    KEY_WEIGHT_DTYPE,
    KEY_KV_DTYPE,
)


# URL query keys besides the preset and the config fields.
QUERY_PRESET, QUERY_SEQ, QUERY_BATCH, QUERY_DTYPE = "preset", "seq", "batch", "dtype"
QUERY_WEIGHTS, QUERY_KV = "weights", "kv"  # the stored formats, when they differ from dtype
QUERY_NAME = "name"  # an uploaded model's name (shown, never parsed)
QUERY_KEYS: tuple[str, ...] = (
    QUERY_PRESET,
    *CONFIG_FIELDS,
    QUERY_SEQ,
    QUERY_BATCH,
    QUERY_DTYPE,
    QUERY_WEIGHTS,
    QUERY_KV,
    QUERY_NAME,
)


MAX_NAME = 120  # characters of a model name kept


DEFAULT_DTYPE = "bf16"


# While the values break a rule the URL is not rewritten: it keeps the last valid view.
LINK_NOTE = "The link in the address bar still shows the last valid model."


@dataclass(frozen=True)
class Selection:
    """The sidebar's current, valid choice: a config and the workload it is analysed at —
    ``dtype`` computes (activations, training), the weights and the KV cache are stored at
    ``weight_dtype`` / ``kv_dtype`` (None: at ``dtype``)."""

    cfg: ModelConfig
    seq_len: int
    batch: int
    dtype: str
    preset: str
    name: str | None = None  # an uploaded model's name (None: the preset, maybe edited)
    weight_dtype: str | None = None
    kv_dtype: str | None = None
    # the uploaded file's stored format (stored_weights of its quantization_config), when the
    # sidebar counts the weights in it ("from the file"); it wins over weight_dtype
    file_weights: WeightQuant | None = None

    @property
    def weight_format(self) -> "WeightQuant | str":
        """How the weights are stored: a format's name, or the file's own WeightQuant (every
        analysis function takes either; its str() is its label)."""
        return self.file_weights or self.weight_dtype or self.dtype

    @property
    def kv_format(self) -> str:
        return self.kv_dtype or self.dtype

    def query(self) -> dict[str, str]:
        return query_for(
            self.preset,
            self.cfg,
            self.seq_len,
            self.batch,
            self.dtype,
            self.name,
            weight_dtype=self.weight_dtype,
            kv_dtype=self.kv_dtype,
        )


def dtype_names() -> list[str]:
    """What the sidebar's dtype computes in (the stored formats are chosen apart)."""
    return list(TRAINING_DTYPES)


def weight_dtype_names(stored: StoredQuant | None = None) -> list[str]:
    """The weights' formats offered: FROM_FILE too while an upload declared its own."""
    return [AS_DTYPE, *([FROM_FILE] if stored is not None else []), *WEIGHT_DTYPES]


def file_weights(state: Any) -> WeightQuant | None:
    """The uploaded file's stored format, while the sidebar counts the weights in it."""
    stored = state.get(KEY_STORED_QUANT)
    if stored is None or state.get(KEY_WEIGHT_DTYPE) != FROM_FILE:
        return None
    return stored_weights(stored)


def kv_dtype_names() -> list[str]:
    return [AS_DTYPE, *KV_DTYPES]


def stored_format(value: str) -> str | None:
    """A stored-format widget's value for ``Selection`` (None: as the dtype, or the file's own
    format, which ``Selection.file_weights`` carries)."""
    return None if value in (AS_DTYPE, FROM_FILE) else value


def dtype_bytes(dtype: str) -> float:
    return DTYPE_BYTES[dtype]


def kv_label(n_heads: int, n_kv_heads: int) -> str:
    """Label of one n_kv_heads choice, e.g. ``2 · GQA (4 query heads per KV head)``."""
    if n_heads % n_kv_heads:
        return f"{n_kv_heads} · ✗ does not divide n_heads={n_heads}"
    if n_kv_heads == n_heads:
        return f"{n_kv_heads} · MHA (one KV head per query head)"
    if n_kv_heads == 1:
        return f"{n_kv_heads} · MQA (all {n_heads} query heads share it)"
    return f"{n_kv_heads} · GQA ({n_heads // n_kv_heads} query heads per KV head)"


def _query_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (RopeScaling, VisionTower)):  # JSON, as --set and a config file take it
        return json.dumps(value.as_dict(), separators=(",", ":"))
    return repr(value) if isinstance(value, float) else str(value)


def query_for(
    preset: str,
    cfg: ModelConfig,
    seq_len: int,
    batch: int,
    dtype: str,
    model: str | None = None,
    *,
    weight_dtype: str | None = None,
    kv_dtype: str | None = None,
) -> dict[str, str]:
    """The URL query that reproduces this view: the preset, the fields that differ from it, the
    workload, and an uploaded model's name."""
    base = PRESETS[preset]
    query = {QUERY_PRESET: preset}
    plain = {
        name: getattr(cfg, name)
        for name in CONFIG_FIELDS
        if name not in DERIVED and getattr(cfg, name) != getattr(base, name)
    }
    try:
        rebuilt = base.replace(**plain)  # derived fields follow their rule there ...
    except ConfigError:
        rebuilt = base  # ... unless only cfg's own values make it valid
    for name in CONFIG_FIELDS:
        if name in plain or (name in DERIVED and getattr(cfg, name) != getattr(rebuilt, name)):
            query[name] = _query_text(getattr(cfg, name))
    query.update({QUERY_SEQ: str(seq_len), QUERY_BATCH: str(batch), QUERY_DTYPE: dtype})
    for key, value in ((QUERY_WEIGHTS, weight_dtype), (QUERY_KV, kv_dtype)):
        if value is not None and value != dtype:
            query[key] = value
    if model:
        query[QUERY_NAME] = model
    return query


def model_name(raw: str | None) -> tuple[str | None, list[str]]:
    """A model name from a URL or an upload: control characters removed, at most MAX_NAME
    characters (with a message when cut). It is only ever shown, escaped."""
    name = strip_control(raw or "").strip()
    if len(name) <= MAX_NAME:
        return name or None, []
    return name[:MAX_NAME] + "…", [
        f"Link: name is {len(name):,} characters long; the first {MAX_NAME} are shown."
    ]


def _positive_int(name: str, raw: str, upper: int) -> int:
    try:
        value = int(str(raw).replace("_", ""))
    except ValueError:
        raise ConfigError(f"{name}={raw!r} must be an integer", field=name) from None
    if not 1 <= value <= upper:
        raise ConfigError(f"{name}={value} must be between 1 and {upper:,}", field=name)
    return value


def values_from_query(query: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
    """Builder values read from a URL query, plus one message per value that was refused.
    A bad config falls back to the preset as a whole; a bad workload value to its default."""
    errors: list[str] = []
    preset = query.get(QUERY_PRESET, DEFAULT_PRESET)
    if preset not in PRESETS:
        errors.append(f"Link: unknown preset {preset!r}; showing {DEFAULT_PRESET!r} instead.")
        preset = DEFAULT_PRESET
    cfg = PRESETS[preset]
    changes = {name: query[name] for name in CONFIG_FIELDS if name in query}
    if changes:
        try:
            cfg = cfg.replace(**{name: coerce_field(name, raw) for name, raw in changes.items()})
        except ConfigError as exc:
            errors.append(f"Link: {exc}. Showing preset {preset!r} instead.")
            cfg = PRESETS[preset]
    values = values_for_config(preset, cfg)
    workload = (
        (QUERY_SEQ, KEY_SEQ_LEN, lambda raw: _positive_int("seq", raw, cfg.max_seq_len)),
        (QUERY_BATCH, KEY_BATCH, lambda raw: _positive_int("batch", raw, MAX_BATCH)),
        (QUERY_DTYPE, KEY_DTYPE, _checked_dtype),
        (QUERY_WEIGHTS, KEY_WEIGHT_DTYPE, lambda raw: _checked_format("weights", raw, WEIGHT_DTYPES)),
        (QUERY_KV, KEY_KV_DTYPE, lambda raw: _checked_format("kv", raw, KV_DTYPES)),
    )
    for query_key, state_key, parse in workload:
        if query_key in query:
            try:
                values[state_key] = parse(query[query_key])
            except ConfigError as exc:
                errors.append(f"Link: {exc}; using {values[state_key]} instead.")
    return _stored_formats_apart(values), errors


def _stored_formats_apart(values: dict[str, Any]) -> dict[str, Any]:
    """A link from before the formats had their own fields (``dtype=int8``): compute in bf16,
    store the weights and the cache at the format the link named (unless it names them)."""
    dtype = values[KEY_DTYPE]
    if dtype not in TRAINING_DTYPES:
        values[KEY_DTYPE] = DEFAULT_DTYPE
        for key in (KEY_WEIGHT_DTYPE, KEY_KV_DTYPE):
            values[key] = dtype if values[key] == AS_DTYPE else values[key]
    return values


def _link_config_holds(query: dict[str, str]) -> bool:
    """Whether a URL's preset and config fields were taken (not fallen back from)."""
    preset = query.get(QUERY_PRESET, DEFAULT_PRESET)
    try:
        PRESETS[preset].replace(
            **{name: coerce_field(name, query[name]) for name in CONFIG_FIELDS if name in query}
        )
    except (KeyError, ConfigError):
        return False
    return True


def _checked_dtype(raw: str) -> str:
    if raw not in DTYPE_BYTES:
        raise ConfigError(f"dtype={raw!r} must be one of {', '.join(DTYPE_BYTES)}", field="dtype")
    return raw


def _checked_format(name: str, raw: str, allowed: tuple[str, ...]) -> str:
    if raw not in allowed:
        raise ConfigError(f"{name}={raw!r} must be one of {', '.join(allowed)}", field=name)
    return raw


def values_for_config(
    preset: str,
    cfg: ModelConfig,
    *,
    seq_len: int | None = None,
    batch: int = 1,
    dtype: str = DEFAULT_DTYPE,
    stored: tuple[str, str] = (AS_DTYPE, AS_DTYPE),
) -> dict[str, Any]:
    """Every builder value (keyed by session-state key) for ``cfg``; ``stored``: the weights'
    and the KV cache's formats (AS_DTYPE: at dtype)."""
    rule, multiple_of, multiplier = detect_ffn_rule(cfg)
    values = {
        KEY_PRESET: preset,
        KEY_FFN_RULE: rule,
        KEY_FFN_MULTIPLE_OF: multiple_of,
        KEY_FFN_MULTIPLIER: multiplier,
        KEY_BATCH: batch,
        KEY_DTYPE: dtype,
        KEY_WEIGHT_DTYPE: stored[0],
        KEY_KV_DTYPE: stored[1],
        KEY_SEQ_LEN: min(seq_len or cfg.max_seq_len, cfg.max_seq_len),
    }
    values.update({field_key(name): widget_value(cfg, name) for name in CONFIG_FIELDS})
    return values


# A derived field's widget shows AUTO while the field follows its rule (DERIVED): 0 for a size,
# None ("follows bias") for a bias switch.
AUTO = {
    "head_dim": 0,
    "expert_ffn_hidden": 0,
    "v_head_dim": 0,
    "query_pre_attn_scalar": 0,
    "rope_local_theta": 0.0,
    "attention_multiplier": 0.0,
    "qkv_bias": None,
    "o_bias": None,
    "mlp_bias": None,
}


def widget_value(cfg: ModelConfig, name: str) -> Any:
    value = getattr(cfg, name)
    if name in DERIVED and value == DERIVED[name](cfg):
        return AUTO[name]
    return value


def config_from_values(values: dict[str, Any]) -> ModelConfig:
    """Build the config the builder values describe; ConfigError names the rule broken."""
    fields_ = {name: values[field_key(name)] for name in CONFIG_FIELDS}
    for name, auto in AUTO.items():
        value = fields_[name]
        if value is None or (auto == 0 and type(value) in (int, float) and value == 0):
            fields_[name] = None
    tower = fields_["vision"]
    if isinstance(tower, VisionTower) and tower.out_size != fields_["d_model"]:
        # a multimodal model's projector keeps feeding the text decoder (as ModelConfig.replace)
        fields_["vision"] = dataclasses.replace(tower, out_size=fields_["d_model"])
    return ModelConfig(**fields_)


_ERROR_FIELD_ALIASES = {"head_dim": "n_heads"}  # head_dim = d_model / n_heads


def error_field(error: ConfigError, prefer: str | None = None) -> str | None:
    """The builder field to show a ConfigError next to: ``prefer`` (the field edited last) when
    the broken rule ties it in (``error.fields``), else the field the error blames."""
    named = [_ERROR_FIELD_ALIASES.get(name, name) for name in error.fields]
    named = [name for name in named if name in CONFIG_FIELDS]
    if prefer in named:
        return prefer
    return named[0] if named else None


def session() -> Any:
    """This browser session's state (``st.session_state``): every key above lives there."""
    return st.session_state


def init_session() -> None:
    """First run of a session: values from the URL. Later runs: put the builder's values back
    into the widget keys (a page switch drops them) and derive what follows from others."""
    state = session()
    if KEY_BUILDER not in state:
        query = dict(st.query_params.to_dict())
        values, errors = values_from_query(query)
        name, name_errors = model_name(query.get(QUERY_NAME))
        name = name if _link_config_holds(query) else None  # it named the link's config
        state[KEY_BUILDER] = values
        state[KEY_LINK_ERRORS] = errors + name_errors
        state[KEY_UPLOAD_NOTES] = []
        state[KEY_UPLOAD_ERROR] = None
        state[KEY_MODEL_NAME], state[KEY_MODEL_BASE] = name, dict(values) if name else None
        state[KEY_STORED_QUANT] = None
    store = state[KEY_BUILDER]
    for key in BUILDER_KEYS:
        state[key] = state[key] if key in state else store[key]
    if state[KEY_WEIGHT_DTYPE] == FROM_FILE and state.get(KEY_STORED_QUANT) is None:
        state[KEY_WEIGHT_DTYPE] = AS_DTYPE  # no file's format to count in (never offered then)
    _apply_derived(state)


def _apply_derived(state: Any) -> None:
    """The FFN width follows its rule; the sequence length stays within max_seq_len."""
    width = ffn_from_rule(
        state[KEY_FFN_RULE],
        state[field_key("d_model")],
        state[KEY_FFN_MULTIPLE_OF],
        state[KEY_FFN_MULTIPLIER] or None,
    )
    if width is not None:
        state[field_key("ffn_hidden")] = width
    seq_len, max_seq = state[KEY_SEQ_LEN], max(1, state[field_key("max_seq_len")])
    if seq_len > max_seq:
        state[KEY_SEQ_NOTE] = (
            max_seq,
            f"T={seq_len:,} is above max_seq_len={max_seq:,}; T is now {max_seq:,}.",
        )
    state[KEY_SEQ_LEN] = max(1, min(seq_len, max_seq))


def load_builder_values(values: dict[str, Any]) -> None:
    """Replace every builder value (from a callback: before the widgets are drawn)."""
    state = session()
    for key in BUILDER_KEYS:
        state[key] = values[key]
    state[KEY_BUILDER] = dict(values)


def on_field_change(name: str | None = None) -> None:
    """A builder widget's callback: the link's errors are stale now; ``name`` was edited last."""
    state = session()
    state[KEY_LINK_ERRORS] = []
    if name is not None:
        state[KEY_LAST_CHANGED] = name


def sync_query_params(query: dict[str, str]) -> None:
    """Mirror the view in the URL, touching only the keys the builder owns."""
    current = st.query_params.to_dict()
    for key in QUERY_KEYS:
        if key in query and current.get(key) != query[key]:
            st.query_params[key] = query[key]
        elif key not in query and key in current:
            del st.query_params[key]
