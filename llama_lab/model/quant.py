"""Weight-only quantisation with real tensors: a matrix stored as fp8 (e4m3), int8 or int4
(two values packed per byte of a row), with its scales (and, asymmetric, its zero points,
int4 ones packed two per byte) in the layout ``analysis.quant`` counts, so that the bytes the
tensors hold equal the prediction; ``QuantLinear`` computes with the dequantised matrix, and
``quantize_linears`` swaps a model's linear layers for it.

Scales: per group of ``group_size`` inputs of a row (the last group padded with zeros), per
output row (``group_size=0``) or one per tensor (-1). Symmetric int formats map [−max|w|, max|w|]
onto [−127, 127] (int8) or [−8, 7] (int4, stored + 8); asymmetric ones map [min, max] onto
[0, 255] or [0, 15] with a zero point per scale.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .fused import FusedLinear

SCALE_TORCH = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
LEVELS = {
    ("int8", False): (-127, 127),
    ("int4", False): (-8, 7),
    ("int8", True): (0, 255),
    ("int4", True): (0, 15),
}


@dataclass
class QTensor:
    """A quantised rows × cols matrix: ``data`` (int8, uint8 packed int4, or float8), ``scales``
    (rows × groups, or 1 × 1), ``zeros`` (packed like the data, or None)."""

    dtype: str
    shape: tuple
    group_size: int
    data: torch.Tensor
    scales: torch.Tensor
    zeros: torch.Tensor | None

    @property
    def nbytes(self) -> int:
        return sum(
            t.numel() * t.element_size() for t in (self.data, self.scales, self.zeros) if t is not None
        )


def _grouped(w: torch.Tensor, group_size: int) -> tuple[torch.Tensor, int]:
    """``w`` (rows, cols) as (rows, groups, g) — zero-padded — and g."""
    rows, cols = w.shape
    if group_size == -1:
        return w.reshape(1, 1, -1), rows * cols
    g = cols if group_size == 0 else group_size
    groups = math.ceil(cols / g)
    padded = F.pad(w, (0, groups * g - cols))
    return padded.reshape(rows, groups, g), g


def _ungroup(x: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """(r, groups, g) back to (rows, cols), the padding dropped."""
    return x.reshape(rows, -1)[:, :cols] if x.shape[0] == rows else x.reshape(rows, cols)


def _pack4(values: torch.Tensor) -> torch.Tensor:
    """(rows, n) integers 0…15 → (rows, ⌈n/2⌉) uint8, the first of each pair in the low nibble."""
    if values.shape[-1] % 2:
        values = F.pad(values, (0, 1))
    values = values.to(torch.uint8)
    return values[..., 0::2] | (values[..., 1::2] << 4)


def _unpack4(packed: torch.Tensor, n: int) -> torch.Tensor:
    low, high = packed & 0x0F, packed >> 4
    return torch.stack((low, high), dim=-1).reshape(*packed.shape[:-1], -1)[..., :n]


def quantize(
    w: torch.Tensor, dtype: str, group_size: int, scale_dtype: str = "fp16", zero_point: bool = False
) -> QTensor:
    """``w`` (rows, cols), any float dtype, quantised (computed in fp32)."""
    rows, cols = w.shape
    x, g = _grouped(w.detach().float(), group_size)  # (r, groups, g)
    if dtype == "fp8":
        amax = x.abs().amax(dim=-1, keepdim=True).clamp_min(1e-12)
        scale = (amax / torch.finfo(torch.float8_e4m3fn).max).to(SCALE_TORCH[scale_dtype])
        data = _ungroup(x / scale.float(), rows, cols).to(torch.float8_e4m3fn)
        return QTensor(dtype, (rows, cols), group_size, data, scale.squeeze(-1), None)
    low, high = LEVELS[(dtype, zero_point)]
    if zero_point:
        lo, hi = x.amin(dim=-1, keepdim=True), x.amax(dim=-1, keepdim=True)
        scale = ((hi - lo) / (high - low)).clamp_min(1e-12).to(SCALE_TORCH[scale_dtype])
        zero = torch.round(-lo / scale.float()).clamp(low, high)
        q = torch.round(x / scale.float() + zero).clamp(low, high)
    else:
        amax = x.abs().amax(dim=-1, keepdim=True).clamp_min(1e-12)
        scale = (amax / high).to(SCALE_TORCH[scale_dtype])
        zero = None
        q = torch.round(x / scale.float()).clamp(low, high)
    q = _ungroup(q, rows, cols)
    if dtype == "int4":
        data = _pack4(q.to(torch.int16) + (0 if zero_point else 8))
    else:
        data = q.to(torch.uint8 if zero_point else torch.int8)
    zeros = None
    if zero is not None:
        flat = zero.reshape(1, -1).to(torch.int16)
        zeros = _pack4(flat) if dtype == "int4" else flat.to(torch.uint8)
    return QTensor(dtype, (rows, cols), group_size, data, scale.squeeze(-1), zeros)


def dequantize(q: QTensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    rows, cols = q.shape
    if q.dtype == "int4":
        values = _unpack4(q.data, cols).to(torch.float32) - (0 if q.zeros is not None else 8)
    else:
        values = q.data.to(torch.float32)
    x, g = _grouped(values, q.group_size)  # (r, groups, g)
    scale = q.scales.float().reshape(x.shape[0], x.shape[1], 1)
    if q.zeros is not None:
        n = x.shape[0] * x.shape[1]
        zero = (_unpack4(q.zeros, n) if q.dtype == "int4" else q.zeros).float()
        x = x - zero.reshape(x.shape[0], x.shape[1], 1)
    return _ungroup(x * scale, rows, cols).to(dtype)


class QuantLinear(nn.Module):
    """A linear layer whose weight is stored quantised (buffers: data, scales, zero points);
    the bias, if any, stays in the layer's dtype. Forward: x · dequant(W)ᵀ + b, read from the
    registered buffers (so ``.to()``, a device move and ``load_state_dict`` reach it). A fused
    projection (q/k/v, gate/up) is quantised part by part, as ``analysis.quant`` counts the
    separate tensors (a per-tensor scale is each part's own), and still runs one GEMM."""

    def __init__(
        self,
        linear: nn.Linear,
        dtype: str,
        group_size: int,
        scale_dtype: str = "fp16",
        zero_point: bool = False,
    ):
        super().__init__()
        fused = isinstance(linear, FusedLinear)
        weights = (
            list(linear.pieces(linear.weight).values())
            if isinstance(linear, FusedLinear)
            else [linear.weight]
        )
        self.sizes = [w.shape[0] for w in weights]
        self.dtype, self.group_size, self.in_features = dtype, group_size, linear.in_features
        self.tags = [str(i) if fused else "" for i in range(len(weights))]
        for tag, w in zip(self.tags, weights):
            q = quantize(w, dtype, group_size, scale_dtype, zero_point)
            self.register_buffer(f"qdata{tag}", q.data)
            self.register_buffer(f"qscales{tag}", q.scales)
            self.register_buffer(f"qzeros{tag}", q.zeros)  # None: not in the state dict
        self.bias = linear.bias

    @property
    def qs(self) -> list[QTensor]:
        """Each part's quantised matrix, made of the module's current buffers."""
        return [
            QTensor(
                self.dtype,
                (rows, self.in_features),
                self.group_size,
                getattr(self, f"qdata{tag}"),
                getattr(self, f"qscales{tag}"),
                getattr(self, f"qzeros{tag}"),
            )
            for tag, rows in zip(self.tags, self.sizes)
        ]

    def split(self, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The parts' outputs, as ``FusedLinear.split``."""
        return y.split(self.sizes, dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        parts = [dequantize(q, x.dtype) for q in self.qs]
        return F.linear(x, parts[0] if len(parts) == 1 else torch.cat(parts), self.bias)


def quantize_linears(
    model: nn.Module,
    dtype: str,
    group_size: int,
    scale_dtype: str = "fp16",
    zero_point: bool = False,
    skip: tuple[str, ...] = ("lm_head",),
) -> int:
    """Replace every nn.Linear of ``model`` (but those whose name ends with one of ``skip``)
    by a QuantLinear; the number of matrices quantised (a fused projection's parts each). A
    mixture of experts' router (``mlp.gate``, ``feed_forward.router``) is skipped as
    ``analysis.quant`` keeps it unless told."""
    replaced = 0
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            full = f"{name}.{child_name}" if name else child_name
            if isinstance(child, nn.Linear) and not full.endswith(skip):
                quantised = QuantLinear(child, dtype, group_size, scale_dtype, zero_point)
                setattr(module, child_name, quantised)
                replaced += len(quantised.qs)
    return replaced
