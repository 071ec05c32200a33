"""KV-cache decoding for the MHA, GQA and MQA variants of one model: prefill, then greedy
decoding one token at a time; cache bytes read from the cache tensors next to
``analysis.kv_cache_bytes_per_token``.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import pandas as pd
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from .. import analysis
from ..config import ModelConfig, require_decoder_only
from ..errors import ExperimentError
from ..figures.common import ATTENTION_COLORS, Figure, Table, display_frame, layout_figure
from ..model import CausalLM, build_model
from ..runtime.devices import pick_device, sync
from ..runtime.memory import check_memory
from ..runtime.precision import check_dtype
from ..train.budgets import check_cpu_budget, check_sizes
from ..units import Progress, plain, plain_fields, plural, sub_progress
from .registry import ExperimentKind, register


@dataclass(frozen=True)
class DecodeRow:
    variant: str
    n_kv_heads: int
    context_len: int
    prefill_ms: float
    ms_per_token: float
    cache_tokens: int
    cache_bytes_measured: int  # storage allocated by the cache tensors, filled exactly
    cache_bytes_predicted: int  # analysis.kv_cache_bytes(cfg, tokens, batch): window-capped


@dataclass(frozen=True)
class DecodeBench:
    device: str
    dtype: str
    batch: int
    new_tokens: int
    rows: list[DecodeRow]

    @property
    def bytes_agree(self) -> bool:
        return all(r.cache_bytes_measured == r.cache_bytes_predicted for r in self.rows)

    def to_dict(self) -> dict:
        out = plain_fields(self, exclude=("rows",)) | {"bytes_agree": self.bytes_agree}
        return out | {"rows": plain(self.rows)}

    def to_frame(self):
        return pd.DataFrame([r.__dict__ for r in self.rows])


@torch.inference_mode()
def _time_decode(
    model: CausalLM,
    prompt: torch.Tensor,
    new_tokens: int,
    device: torch.device,
    tick: Callable[[int], None] | None = None,
):
    """(prefill seconds, median seconds per new token, the cache); ``tick(i)`` after the
    prefill (i = 0) and after each new token i (outside the timed region)."""
    cache = model.new_cache(prompt.shape[0], prompt.shape[1] + new_tokens)
    sync(device)
    start = time.perf_counter()
    logits = model(prompt, cache, last_only=True)  # prefill
    sync(device)
    prefill_s = time.perf_counter() - start
    per_token = []
    for i in range(new_tokens):
        if tick:
            tick(i)
        token = logits[:, -1:].argmax(-1)  # (B, 1) greedy
        sync(device)
        start = time.perf_counter()
        logits = model(token, cache)
        sync(device)
        per_token.append(time.perf_counter() - start)
    return prefill_s, statistics.median(per_token), cache


def decode_benchmark(
    cfg: ModelConfig,
    context_lens: Sequence[int] = (32, 64, 128, 256),
    batch: int = 1,
    device: str = "auto",
    dtype: str = "fp32",
    new_tokens: int = 8,
    seed: int = 0,
    progress: Progress | None = None,
) -> DecodeBench:
    """Greedy decoding with the KV cache after a prefill of each context length, for each
    attention variant; weights and cache in ``dtype``."""
    require_decoder_only(cfg, "the KV decode experiment")
    context_lens = sorted({int(c) for c in context_lens})
    if not context_lens or context_lens[0] < 1:
        raise ExperimentError(f"context_lens={context_lens} must be positive lengths")
    if new_tokens < 1:
        raise ExperimentError(f"new_tokens={new_tokens} must be at least 1")
    if context_lens[-1] + new_tokens > cfg.max_seq_len:
        raise ExperimentError(
            f"context {context_lens[-1]} + {plural(new_tokens, 'new token')} exceeds "
            f"max_seq_len={cfg.max_seq_len}"
        )
    check_sizes(cfg, context_lens[-1], batch)
    dev = pick_device(device)
    torch_dtype = check_dtype(dtype, dev)
    variants = analysis.attention_variants(cfg, distinct=True)
    worst = analysis.inference_memory(variants["mha"], context_lens[-1] + new_tokens, batch, dtype)
    check_memory(int(worst.total_bytes), dev, f"decoding (B={batch}, context {context_lens[-1]}, {dtype})")

    generator = torch.Generator().manual_seed(seed)
    prompt_all = torch.randint(0, cfg.vocab_size, (batch, context_lens[-1]), generator=generator).to(dev)
    rows = []
    for v, (name, vcfg) in enumerate(variants.items()):
        model = build_model(vcfg, device=dev, dtype=torch_dtype, seed=seed).eval()
        _time_decode(model, prompt_all[:, : context_lens[0]], 2, dev)  # warm-up, excluded
        for c, context in enumerate(context_lens):
            done, parts = v * len(context_lens) + c, len(variants) * len(context_lens)
            part = sub_progress(
                progress,
                done / parts,
                (done + 1) / parts,
                f"{name.upper()} at context {context} ({done + 1}/{parts})",
            )
            tick = (lambda i, part=part: part(i / new_tokens, f"token {i}/{new_tokens}")) if part else None
            prefill_s, token_s, cache = _time_decode(model, prompt_all[:, :context], new_tokens, dev, tick)
            rows.append(
                DecodeRow(
                    variant=name,
                    n_kv_heads=vcfg.n_kv_heads,
                    context_len=context,
                    prefill_ms=1e3 * prefill_s,
                    ms_per_token=1e3 * token_s,
                    cache_tokens=cache.length,
                    cache_bytes_measured=int(cache.allocated_bytes()),
                    cache_bytes_predicted=int(analysis.kv_cache_bytes(vcfg, cache.length, batch, dtype)),
                )
            )
        del model
    if progress:
        progress(1.0, "done")
    return DecodeBench(device=str(dev), dtype=dtype, batch=batch, new_tokens=new_tokens, rows=rows)


def context_choices(max_seq_len: int, new_tokens: int) -> list[int]:
    """Prompt lengths a page offers: powers of two from 8 that leave room for the new tokens
    within max_seq_len, and the longest that does."""
    room = max(1, max_seq_len - new_tokens)
    return sorted({c for c in (2**k for k in range(3, 21)) if c <= room} | {room})


def decode_flops_needed(cfg: ModelConfig, contexts: Sequence[int], batch: int, new_tokens: int) -> int:
    """The benchmark's forward FLOPs: per variant and context, a prefill of c tokens, then
    ``new_tokens`` single-token steps (each counted at its longest context)."""
    return sum(
        analysis.count_flops(v, c, batch).forward
        + new_tokens * analysis.decode_flops(v, c + new_tokens, batch).forward
        for v in analysis.attention_variants(cfg, distinct=True).values()
        for c in contexts
    )


def check_decode_budget(
    cfg: ModelConfig, contexts: Sequence[int], batch: int, new_tokens: int, device: str
) -> None:
    """Refuse (ExperimentError) a benchmark beyond the CPU's FLOP budget."""
    if not contexts:
        raise ExperimentError("choose at least one context length")
    check_cpu_budget(
        decode_flops_needed(cfg, contexts, batch, new_tokens),
        device,
        "decoding",
        "use shorter contexts, fewer new tokens or the scaled-down copy",
    )


# ---- figures and tables --------------------------------------------------------------------
def decode_figure(bench: DecodeBench) -> go.Figure:
    """ms per new token and cache bytes (measured ● vs predicted —) against context length."""
    frame = display_frame(bench.to_frame())
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.1,
        subplot_titles=["decode time per new token", "KV cache bytes: measured (●) vs predicted (—)"],
    )
    for variant, part in frame.groupby("variant", sort=False):
        color = ATTENTION_COLORS.get(variant, "#7f7f7f")
        g = int(part.n_kv_heads.iloc[0])
        name = f"{variant.upper()} ({plural(g, 'KV head')})"
        fig.add_trace(
            go.Scatter(
                x=part.context_len,
                y=part.ms_per_token,
                mode="lines+markers",
                name=name,
                legendgroup=variant,
                line=dict(color=color),
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=part.cache_tokens,
                y=part.cache_bytes_predicted,
                mode="lines",
                legendgroup=variant,
                showlegend=False,
                line=dict(color=color),
                hovertemplate="predicted %{y:,} B at %{x} tokens<extra></extra>",
            ),
            row=1,
            col=2,
        )
        fig.add_trace(
            go.Scatter(
                x=part.cache_tokens,
                y=part.cache_bytes_measured,
                mode="markers",
                legendgroup=variant,
                showlegend=False,
                marker=dict(color=color, size=9),
                hovertemplate="measured %{y:,} B at %{x} tokens<extra></extra>",
            ),
            row=1,
            col=2,
        )
    fig.update_xaxes(title_text="context length (prompt tokens)", row=1, col=1)
    fig.update_xaxes(title_text="tokens in the cache", row=1, col=2)
    fig.update_yaxes(title_text="ms per token (median)", row=1, col=1)
    fig.update_yaxes(title_text="bytes", row=1, col=2)
    fig.update_annotations(font_size=12)
    return layout_figure(
        fig,
        f"KV-cache decoding on {bench.device}, {bench.dtype}, B={bench.batch}, "
        f"{plural(bench.new_tokens, 'new token')}",
        height=400,
    )


def tables(result: DecodeBench, section: str, config: ModelConfig | None = None) -> list[Table]:
    agree = "match" if result.bytes_agree else "DO NOT match"
    return [
        Table(
            "decode",
            "Decode speed and cache bytes",
            section,
            result.to_frame(),
            f"Cache bytes {agree} analysis.kv_cache_bytes (2·G·D·b per token held, a window "
            f"layer holding at most W) × batch.",
        )
    ]


def figures(result: DecodeBench, section: str) -> list[Figure]:
    return [Figure("decode", "Decode speed and cache bytes", section, decode_figure(result))]


KIND = register(
    ExperimentKind(
        name="decode",
        title="KV-cache decoding: MHA / GQA / MQA",
        result_type=DecodeBench,
        run=decode_benchmark,
        tables=tables,
        figures=figures,
        panel="decode",
        order=60,
    )
)
