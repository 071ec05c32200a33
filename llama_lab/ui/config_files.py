"""The sidebar's Load / save group: the uploader of a config.json (ours or Hugging Face's; the
upload callback is ``model_source``'s) and the current config offered as both files."""

from __future__ import annotations

import json
from dataclasses import dataclass

import streamlit as st

from ..config import ConfigError, ModelConfig
from ..units import escape_markdown
from .model_source import on_upload
from .state import KEY_UPLOAD, KEY_UPLOAD_ERROR, WIDGET_PREFIX, session
from .widgets import show_error


def draw_upload_only() -> None:
    """The group when the config breaks a rule: only the uploader, open."""
    with st.expander("Load / save config", expanded=True):
        _draw_uploader()


def _draw_uploader() -> None:
    st.file_uploader(
        "Upload a config.json (Hugging Face or LLaMA Lab)",
        type=["json"],
        key=KEY_UPLOAD,
        on_change=on_upload,
    )
    upload_error = session().get(KEY_UPLOAD_ERROR)
    if upload_error:
        show_error(upload_error)


def draw_load_save(cfg: ModelConfig) -> None:
    """The uploader and the downloads of ``cfg``, open while an upload's refusal stands."""
    with st.expander("Load / save config", expanded=bool(session().get(KEY_UPLOAD_ERROR))):
        _draw_uploader()
        downloads, hf_refusal = config_downloads(cfg)
        for item in downloads:
            st.download_button(
                item.label,
                data=item.data,
                file_name=item.file_name,
                mime=item.mime,
                on_click="ignore",
                key=WIDGET_PREFIX + item.file_name,
            )
        if hf_refusal:
            st.caption("No HF config.json: " + escape_markdown(hf_refusal))


@dataclass(frozen=True)
class Download:
    label: str
    file_name: str
    data: bytes
    mime: str = "application/json"


def config_downloads(cfg: ModelConfig) -> tuple[list[Download], str | None]:
    """The current config as our JSON and, for LLaMA-style configs, as a HF config.json; the
    second item says why the HF file is not offered."""
    ours = Download(
        "Config (LLaMA Lab JSON)",
        "llama_lab_config.json",
        json.dumps(cfg.to_dict(), indent=2).encode("utf-8"),
    )
    try:
        hf = cfg.to_hf_config()
    except ConfigError as exc:
        return [ours], str(exc)
    return [ours, Download("HF config.json", "config.json", json.dumps(hf, indent=2).encode("utf-8"))], None
