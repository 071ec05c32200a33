"""LLaMA Lab — Streamlit entry point: `streamlit run app.py`."""
import streamlit as st

from llama_lab.config import PRESETS, ConfigError
from llama_lab.model import build_model

st.set_page_config(page_title="LLaMA Lab", page_icon="🦙", layout="wide")
st.title("🦙 LLaMA Lab")
st.caption("Build, analyse and run LLaMA-style decoders — and the 2017 Transformer they came from.")

name = st.selectbox("Preset", list(PRESETS), index=list(PRESETS).index("seed-demo"))
cfg = PRESETS[name]
try:
    n_params = sum(p.numel() for p in build_model(cfg, device="meta").parameters())
except ConfigError as exc:
    st.error(str(exc))
else:
    cols = st.columns(4)
    cols[0].metric("Parameters", f"{n_params:,}")
    cols[1].metric("Attention", f"{cfg.attention_kind} ({cfg.n_heads} q / {cfg.n_kv_heads} kv heads)")
    cols[2].metric("Layers × width", f"{cfg.n_layers} × {cfg.d_model}")
    cols[3].metric("FFN", f"{cfg.ffn_type} · {cfg.ffn_hidden}")
    st.json(cfg.to_dict())
