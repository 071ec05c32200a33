"""KV-cache decoding: ms per token and cache bytes of MHA / GQA / MQA."""

from __future__ import annotations

import streamlit as st

from ... import analysis
from ...analysis import derive_memory
from ...experiments import ExperimentEntry
from ...experiments.decode import decode_figure
from ...units import escape_markdown, human_bytes, plural
from ..cached import show_table


def _example(entry: ExperimentEntry, longest) -> str:
    """One row's prediction written out (``derive_memory.kv_cache``), e.g. MHA at the longest context."""
    if entry.config is None:
        return "."
    row = next(longest.itertuples())
    variant = analysis.attention_variants(entry.config, distinct=True)[row.variant]
    bench = entry.result
    d = derive_memory.kv_cache(variant, row.cache_tokens, bench.batch, bench.dtype)
    return (
        f"; {row.variant.upper()} at {row.cache_tokens:,} tokens: "
        + escape_markdown(d.text("KV bytes"))
        + "."
    )


def show(entry: ExperimentEntry, prefix: str) -> None:
    bench = entry.result
    frame = bench.to_frame()
    longest = frame[frame.context_len == frame.context_len.max()]
    cols = st.columns(len(longest))
    for col, row in zip(cols, longest.itertuples()):
        col.metric(
            f"{row.variant.upper()} · {plural(row.n_kv_heads, 'KV head')}",
            f"{row.ms_per_token:.2f} ms/token",
            f"cache {human_bytes(row.cache_bytes_measured)}",
            delta_arrow="off",
            delta_color="off",
        )
    if bench.bytes_agree:
        st.success("Measured cache bytes equal the prediction for every row" + _example(entry, longest))
    else:
        st.error(
            "Measured cache bytes differ from analysis.kv_cache_bytes_per_token × B × tokens; see the table."
        )
    st.plotly_chart(decode_figure(bench), key=prefix + "chart_decode")
    show_table(frame, width="stretch")
    st.caption(
        "On a GPU decoding one token is memory-bound: its time follows the bytes read "
        "(weights + cache), which is where fewer KV heads pay off at long context and "
        "large batch. At small sizes on a CPU, fixed per-call overheads dominate."
    )
