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


# ---- NF4 with double quantisation (QLoRA) ----------------------------------------------------
# Pure torch, following bitsandbytes' scheme (bitsandbytes-foundation/bitsandbytes at
# 95f9af309d4d5793847169c39288dcd3fcbdf564): ``quantize_4bit`` (bitsandbytes/functional.py, and
# its torch kernel in bitsandbytes/backends/default/ops.py) takes blocks of 64 values of the
# flattened matrix, scales each by its absmax and rounds to the nearest of the 16 NF4 values;
# with ``compress_statistics`` (double quantisation) the float32 absmaxes, less their mean
# (``offset``), are quantised to 8 bits by ``quantize_blockwise`` with the signed dynamic map in
# blocks of 256, each with a float32 absmax of its own. The lab uses this quantiser, not the
# bitsandbytes wheel; tests/unit/model/test_lora.py checks its codes and dequantised weights
# against bitsandbytes 0.50.2's CPU ``quantize_4bit`` where the wheel imports.
NF4_BLOCK = 64  # values per absmax
NF4_ABSMAX_BLOCK = 256  # absmaxes per float32 constant of the double quantisation
# ``get_4bit_type("nf4")`` (bitsandbytes/functional.py): quantiles of N(0, 1), exact 0 and ±1
NF4_CODE = (
    -1.0,
    -0.6961928009986877,
    -0.5250730514526367,
    -0.39491748809814453,
    -0.28444138169288635,
    -0.18477343022823334,
    -0.09105003625154495,
    0.0,
    0.07958029955625534,
    0.16093020141124725,
    0.24611230194568634,
    0.33791524171829224,
    0.44070982933044434,
    0.5626170039176941,
    0.7229568362236023,
    1.0,
)


def dynamic_map(max_exponent_bits: int = 7, total_bits: int = 8) -> torch.Tensor:
    """bitsandbytes' signed 8-bit dynamic map (``create_dynamic_map(signed=True)``,
    bitsandbytes/functional.py): per exponent 10^(i−6), the midpoints of an even split of
    [0.1, 1] into 2^i parts, both signs, then 0 and 1; 256 values, sorted."""
    data: list[float] = []
    non_sign_bits = total_bits - 1
    for i in range(max_exponent_bits):
        boundaries = torch.linspace(0.1, 1, 2 ** (i + non_sign_bits - max_exponent_bits) + 1)
        means = (boundaries[:-1] + boundaries[1:]) / 2.0
        scale = 10 ** (-(max_exponent_bits - 1) + i)
        data += (scale * means).tolist() + (-scale * means).tolist()
    data += [0.0, 1.0]
    return torch.tensor(sorted(data), dtype=torch.float32)


def _blockwise(x: torch.Tensor, code: torch.Tensor, block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Flat float32 ``x`` → (indices of the nearest ``code`` value after scaling each block of
    ``block`` by its absmax (uint8), the absmaxes (float32)); a short last block its own."""
    n = x.numel()
    blocks = [x[i : i + block] for i in range(0, n, block)] if n % block else [x.reshape(-1, block)]
    absmax = torch.cat([b.abs().amax(dim=-1).reshape(-1) for b in blocks])
    scale = absmax.clamp(min=1e-38).repeat_interleave(block)[:n]
    scaled = torch.clamp(x * (1.0 / scale), -1, 1)
    bounds = (code[:-1] + code[1:]) / 2
    return torch.bucketize(scaled, bounds).to(torch.uint8), absmax


@dataclass
class NF4Tensor:
    """A rows × cols matrix in NF4 with double quantisation: ``codes`` (uint8, two 4-bit
    indices per byte, the first in the low nibble: ``_pack4``), ``absmax_codes`` (uint8, one per
    block of 64), ``absmax_scales`` (float32, one per 256 absmaxes) and ``offset`` (float32, the
    absmaxes' mean). The two code tables are the module's constants, shared by every tensor."""

    shape: tuple
    codes: torch.Tensor
    absmax_codes: torch.Tensor
    absmax_scales: torch.Tensor
    offset: torch.Tensor

    @property
    def nbytes(self) -> int:
        tensors = (self.codes, self.absmax_codes, self.absmax_scales, self.offset)
        return sum(t.numel() * t.element_size() for t in tensors)


def nf4_bytes(numel: int) -> int:
    """What ``quantize_nf4`` stores for ``numel`` values: ½ byte each, a uint8 absmax per 64,
    a float32 scale per 256 absmaxes and the float32 offset."""
    blocks = math.ceil(numel / NF4_BLOCK)
    return math.ceil(numel / 2) + blocks + 4 * math.ceil(blocks / NF4_ABSMAX_BLOCK) + 4


def quantize_nf4(w: torch.Tensor) -> NF4Tensor:
    x = w.detach().float().reshape(-1)
    indices, absmax = _blockwise(x, torch.tensor(NF4_CODE), NF4_BLOCK)
    offset = absmax.mean()
    absmax_codes, absmax_scales = _blockwise(absmax - offset, dynamic_map(), NF4_ABSMAX_BLOCK)
    return NF4Tensor(tuple(w.shape), _pack4(indices[None])[0], absmax_codes, absmax_scales, offset)


def nf4_absmax(q: NF4Tensor) -> torch.Tensor:
    """The float32 absmaxes back from their 8-bit codes (bitsandbytes' ``dequantize_4bit``,
    nested: ``dequantize_blockwise`` + offset)."""
    scale = q.absmax_scales.repeat_interleave(NF4_ABSMAX_BLOCK)[: q.absmax_codes.numel()]
    return dynamic_map()[q.absmax_codes.long()] * scale + q.offset


def dequantize_nf4(q: NF4Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    n = math.prod(q.shape)
    values = torch.tensor(NF4_CODE)[_unpack4(q.codes[None], n)[0].long()]  # float32, as bitsandbytes
    scale = nf4_absmax(q).repeat_interleave(NF4_BLOCK)[:n]
    return (values * scale).reshape(q.shape).to(dtype)


class _NF4Matmul(torch.autograd.Function):
    """x · dequant(W)ᵀ without keeping the dequantised W for backward: it is dequantised again
    there (bitsandbytes' ``MatMul4Bit`` does the same), so the frozen base costs its NF4 bytes
    and no saved copy."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, layer: "NF4Linear") -> torch.Tensor:
        ctx.layer = layer
        return F.linear(x, layer.dequantized(x.dtype))

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad @ ctx.layer.dequantized(grad.dtype), None


class NF4Linear(nn.Module):
    """A frozen linear layer stored in NF4 with double quantisation (buffers), computing in the
    input's dtype; a fused projection quantised part by part (as transformers + bitsandbytes
    quantise each of q_proj, k_proj, ... on its own). The bias, if any, stays as it was."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        weights = (
            list(linear.pieces(linear.weight).values())
            if isinstance(linear, FusedLinear)
            else [linear.weight]
        )
        self.sizes = [w.shape[0] for w in weights]
        self.in_features, self.out_features = linear.in_features, sum(self.sizes)
        for i, w in enumerate(weights):
            q = quantize_nf4(w)
            for name in ("codes", "absmax_codes", "absmax_scales", "offset"):
                self.register_buffer(f"{name}{i}", getattr(q, name))
        self.bias = linear.bias

    @property
    def qs(self) -> list[NF4Tensor]:
        return [
            NF4Tensor(
                (rows, self.in_features),
                *(
                    getattr(self, f"{name}{i}")
                    for name in ("codes", "absmax_codes", "absmax_scales", "offset")
                ),
            )
            for i, rows in enumerate(self.sizes)
        ]

    def dequantized(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The whole (out, in) weight in ``dtype``."""
        return torch.cat([dequantize_nf4(q, dtype) for q in self.qs])

    def split(self, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return y.split(self.sizes, dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = _NF4Matmul.apply(x, self)
        return y if self.bias is None else y + self.bias
