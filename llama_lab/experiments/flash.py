"""FlashAttention, live: ``reference_attention`` (the naive path: Q·Kᵀ, softmax, P·V) against
``scaled_dot_product_attention`` (the fused kernel) over a sweep of sequence lengths, one
layer's attention at the model's head shapes. For each T: the bytes autograd keeps for
backward (saved-tensor hooks) beside ``analysis.flash``'s prediction, and the time of a
forward + backward; and, for the whole model on a chosen GPU, the context where the naive path
no longer fits next to the weights.
"""

from __future__ import annotations

import statistics
import time
import warnings
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import pandas as pd
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots
from torch.nn.attention import SDPBackend, sdpa_kernel

from ..analysis.flash import attention_memory, flash_layer_bytes, naive_layer_bytes
from ..analysis.quant import weights_bytes
from ..config import ModelConfig
from ..errors import ExperimentError
from ..figures.common import GROUP_PALETTE, Figure, Table, display_number, display_values, layout_figure, mark
from ..model import reference_attention
from ..model.attention import causal_attention
from ..runtime.devices import pick_device
from ..runtime.hardware import get_gpu
from ..runtime.memory import check_memory
from ..train.measure import SavedTensorMeter
from ..units import Progress
from .registry import ExperimentKind, register

FLASH_SEQ_LENS = (64, 128, 256, 512, 1024)
PATHS = {"naive": "reference_attention (naive)", "flash": "scaled_dot_product_attention (fused)"}
COLORS = {"naive": GROUP_PALETTE[8], "flash": GROUP_PALETTE[0]}
TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# The fused kernels alone: where none takes the shapes (on CUDA, heads wider than 256), SDPA
# would quietly run its math path, which keeps the T × T weights: refused instead.
FUSED = [SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]


def _fused(q, k, v, n_rep: int) -> torch.Tensor:
    try:  # PyTorch warns of each kernel it passes over: the refusal below says why in one line
        with sdpa_kernel(FUSED), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return causal_attention(q, k, v, n_rep)
    except RuntimeError as exc:
        if "No available kernel" not in str(exc):
            raise
        raise ExperimentError(
            f"no fused attention kernel on {q.device.type} takes these heads ({q.shape[1]} of width "
            f"{q.shape[-1]}, {k.shape[1]} KV heads, {q.dtype}): on CUDA the fused kernels take a head "
            "width of at most 256; PyTorch would run its math path, which keeps the T × T weights"
        ) from None


def _kept_and_time(path: str, q, k, v, n_rep: int, repeats: int = 3) -> tuple[int, float]:
    """Bytes kept for backward (train.measure.SavedTensorMeter: distinct storages; q, k and v
    are inputs here, not parameters, so they count) and the median time of a forward +
    backward."""

    def run():
        if path == "naive":
            return reference_attention(q, k, v, n_rep)[0]
        return _fused(q, k, v, n_rep)

    with SavedTensorMeter(torch.nn.Module()) as meter:
        run()
    run().sum().backward()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run().sum().backward()
        if q.device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return meter.bytes, statistics.median(times)


@dataclass(frozen=True)
class FlashSweep:
    config: dict[str, Any]  # ModelConfig.to_dict()
    batch: int
    dtype: str
    device: str
    rows: list[dict[str, Any]]  # per T and path: measured and predicted bytes, time
    gpu: str
    naive_fits_up_to: int  # the whole model on the GPU, at its own shapes
    flash_fits_up_to: int

    def to_dict(self) -> dict:
        return asdict(self)

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows)


def flash_sweep(
    cfg: ModelConfig,
    seq_lens: Sequence[int] = FLASH_SEQ_LENS,
    batch: int = 1,
    dtype: str = "fp32",
    device: str = "cpu",
    gpu: str = "H100 80GB",
    progress: Progress | None = None,
) -> FlashSweep:
    """One attention layer of ``cfg``'s heads (H, G, D) at each T, both paths."""
    if dtype not in TORCH_DTYPES or not seq_lens:
        raise ExperimentError(f"dtype={dtype!r} must be fp32, bf16 or fp16, with ≥ 1 length")
    dev = pick_device(device)
    H, G, D = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    check_memory(
        3 * naive_layer_bytes(cfg, max(seq_lens), batch, dtype), dev, f"naive attention at T={max(seq_lens)}"
    )
    rows, gen = [], torch.Generator().manual_seed(0)
    for i, T in enumerate(sorted(seq_lens)):
        if progress:
            progress(i / len(seq_lens), f"T={T} ({i + 1}/{len(seq_lens)})")
        shapes = ((batch, H, T, D), (batch, G, T, D), (batch, G, T, D))
        q, k, v = (
            torch.randn(s, generator=gen).to(dev, TORCH_DTYPES[dtype]).requires_grad_() for s in shapes
        )
        for path, predict in (("naive", naive_layer_bytes), ("flash", flash_layer_bytes)):
            kept, seconds = _kept_and_time(path, q, k, v, H // G)
            rows.append(
                {
                    "seq_len": T,
                    "path": path,
                    "measured_bytes": kept,
                    "predicted_bytes": predict(cfg, T, batch, dtype),
                    "fwd_bwd_ms": 1e3 * seconds,
                }
            )
    whole = attention_memory(cfg, max(seq_lens), batch, dtype, gpu)
    if progress:
        progress(1.0, "done")
    return FlashSweep(
        config=cfg.to_dict(),
        batch=batch,
        dtype=dtype,
        device=str(dev),
        rows=rows,
        gpu=whole.gpu,
        naive_fits_up_to=whole.naive_fits_up_to,
        flash_fits_up_to=whole.flash_fits_up_to,
    )


# ---- figures and tables --------------------------------------------------------------------
def flash_figure(sweep: FlashSweep) -> go.Figure:
    """Kept bytes (measured markers on the predicted lines) and time, against T, log-log."""
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("bytes kept for backward, one layer", "forward + backward time (ms)"),
        horizontal_spacing=0.1,
    )
    frame = sweep.to_frame()
    for path, label in PATHS.items():
        part = frame[frame.path == path]
        color = COLORS[path]
        fig.add_trace(
            go.Scatter(
                x=part.seq_len,
                y=part.predicted_bytes,
                mode="lines",
                name=f"{label}, predicted",
                line=dict(color=color, dash="dash"),
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=part.seq_len,
                y=part.measured_bytes,
                mode="markers",
                name=f"{label}, measured",
                marker=dict(color=color, size=9),
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=part.seq_len,
                y=part.fwd_bwd_ms,
                mode="lines+markers",
                name=f"{label}, time",
                line=dict(color=color),
                showlegend=False,
            ),
            row=1,
            col=2,
        )
    fig.update_xaxes(type="log", title_text="sequence length T")
    fig.update_yaxes(type="log")
    return layout_figure(
        fig, f"Naive vs fused attention on {sweep.device} ({sweep.dtype}, B={sweep.batch})", height=420
    )


def fit_figure(cfg: ModelConfig, batch: int, dtype: str, gpu: str, upper: int) -> go.Figure:
    """The whole model's attention memory against T on a GPU, the crossover marked."""
    lengths = sorted({int(2 ** (i / 4)) for i in range(24, 4 * max(7, upper.bit_length()) + 1)})
    fig = go.Figure()
    for path, layer in (("naive", naive_layer_bytes), ("flash", flash_layer_bytes)):
        fig.add_trace(
            go.Scatter(
                x=lengths,
                y=display_values([cfg.n_layers * layer(cfg, T, batch, dtype) for T in lengths]),
                mode="lines",
                name=PATHS[path],
                line=dict(color=COLORS[path]),
            )
        )
    room = attention_memory(cfg, lengths[0], batch, dtype, gpu).naive_fits_up_to
    free = get_gpu(gpu).usable_bytes - weights_bytes(cfg, dtype).total
    mark(
        fig,
        y=display_number(max(free, 1)),
        text=f"{gpu} memory left after the weights",
        color="#7f7f7f",
        dash="dot",
    )
    if room:
        mark(fig, x=room, text=f"naive stops fitting at T={room:,}", color=COLORS["naive"], dash="dash")
    fig.update_xaxes(type="log", title_text="sequence length T")
    fig.update_yaxes(type="log", title_text="bytes kept for backward, all layers")
    return layout_figure(
        fig, f"Attention memory of the whole model on {gpu} (B={batch}, {dtype})", height=400
    )


def tables(result: FlashSweep, section: str, config: ModelConfig | None = None) -> list[Table]:
    return [Table("flash_sweep", "Naive vs fused attention: kept bytes and time", section, result.to_frame())]


def figures(result: FlashSweep, section: str) -> list[Figure]:
    return [Figure("flash_sweep", "Naive vs fused attention", section, flash_figure(result))]


KIND = register(
    ExperimentKind(
        name="flash",
        title="FlashAttention, measured",
        result_type=FlashSweep,
        run=flash_sweep,
        tables=tables,
        figures=figures,
        panel="flash",
        order=67,
    )
)
