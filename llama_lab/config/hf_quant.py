"""A checkpoint's ``quantization_config`` read as the weights' stored format, where LLaMA Lab
models that format exactly (AWQ's 4-bit GEMM layout; fp8 e4m3 with block-wise scales, as
DeepSeek-V3 and Kimi K2 ship); any other is refused by name.
``analysis.quant.stored_weights`` turns it into a ``WeightQuant``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import ConfigError
from .messages import check_int, name_keys, shown


@dataclass(frozen=True)
class StoredQuant:
    """A checkpoint's ``quantization_config`` as LLaMA Lab reads it (AWQ's GEMM int4, block-wise
    fp8): what ``analysis.quant.stored_weights`` turns into the weights' stored format."""

    method: str  # "awq" or "fp8"
    bits: int
    group_size: int  # inputs per scale (fp8: a block's columns)
    zero_point: bool
    dtype: str  # what the unquantised tensors and the scales' neighbours are stored in
    not_converted: tuple[str, ...]  # modules_to_not_convert, as the file names them
    block_rows: int = 0  # fp8: a block's rows (weight_block_size [rows, cols]); 0: none

    def describe(self) -> str:
        """The stored format in words (the note an upload shows)."""
        if self.method == "fp8":
            return (
                f"fp8 (e4m3) weights with one float32 scale per {self.block_rows}×{self.group_size} "
                f"block of every linear layer, the rest in {self.dtype}"
            )
        return (
            f"AWQ int4 weights in groups of {self.group_size} inputs "
            f"({'with' if self.zero_point else 'without'} zero points, fp16 scales), the rest in {self.dtype}"
        )


STORED_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
# modules_to_not_convert: names LLaMA Lab keeps apart anyway (the head, a mixture's router) or
# that lie outside the text decoder (a multimodal model's vision side)
_KEPT_MODULES = ("lm_head", "gate", "router")
_OUTSIDE_DECODER = ("visual", "vision", "multi_modal_projector", "audio", "mm_projector")


def stored_quant(data: Mapping[str, Any]) -> StoredQuant | None:
    """The weights' stored format a config.json (a text decoder's: ``hf.text_decoder``)
    declares, None when it declares none (as ``torch_dtype`` says); a quantisation LLaMA Lab
    does not model is refused by name."""
    qc = data.get("quantization_config")
    if qc is None:
        return None
    if not isinstance(qc, Mapping):
        raise ConfigError(
            f"quantization_config={shown(qc)} must be a JSON object", field="quantization_config"
        )
    method = qc.get("quant_method")
    if method == "fp8":
        return _fp8(qc, data)
    if method != "awq":
        raise ConfigError(
            f"quantization_config quant_method={shown(method)} is not modelled yet (AWQ and "
            f"block-wise fp8 are): LLaMA Lab refuses rather than count the stored weights wrong",
            field="quantization_config",
        )
    bits, group, version = (
        qc.get("bits", qc.get("w_bit", 4)),
        qc.get("group_size", 128),
        qc.get("version", "gemm"),
    )
    if bits != 4 or str(version).lower() != "gemm":
        raise ConfigError(
            f"quantization_config: AWQ bits={shown(bits)}, version={shown(version)} is not modelled "
            f"(4-bit GEMM is)",
            field="quantization_config",
        )
    check_int("quantization_config group_size", group, 1, 1 << 20)
    zero = qc.get("zero_point", True)
    if not isinstance(zero, bool):
        raise ConfigError(
            f"quantization_config zero_point={shown(zero)} must be true or false", field="quantization_config"
        )
    names = _not_converted(qc)
    dtype = STORED_DTYPES.get(str(data.get("torch_dtype", data.get("dtype", "float16"))), "fp16")
    return StoredQuant("awq", 4, group, zero, dtype, names)


def _fp8(qc: Mapping[str, Any], data: Mapping[str, Any]) -> StoredQuant:
    """transformers' FineGrainedFP8 format (DeepSeek-V3): every linear layer's weight in e4m3 and
    its ``weight_scale_inv``, one float32 per block of ``weight_block_size`` [rows, cols]."""
    fmt, block = qc.get("fmt", "e4m3"), qc.get("weight_block_size")
    if fmt != "e4m3" or not (
        isinstance(block, list)
        and len(block) == 2
        and all(isinstance(n, int) and not isinstance(n, bool) for n in block)
    ):
        raise ConfigError(
            f"quantization_config: fp8 fmt={shown(fmt)}, weight_block_size={shown(block)} is not "
            f"modelled (e4m3 with a [rows, cols] block, as DeepSeek-V3's, is)",
            field="quantization_config",
        )
    for n in block:
        check_int("quantization_config weight_block_size", n, 1, 1 << 20)
    dtype = STORED_DTYPES.get(str(data.get("torch_dtype", data.get("dtype", "bfloat16"))), "bf16")
    return StoredQuant("fp8", 8, block[1], False, dtype, _not_converted(qc), block_rows=block[0])


def _not_converted(qc: Mapping[str, Any]) -> tuple[str, ...]:
    """modules_to_not_convert, when they are whole kinds LLaMA Lab keeps apart anyway."""
    names = qc.get("modules_to_not_convert") or []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ConfigError(
            f"quantization_config modules_to_not_convert={shown(names)} must be a list of module names",
            field="quantization_config",
        )
    inside = [n for n in names if not any(part in n for part in _OUTSIDE_DECODER)]
    apart = [n for n in inside if n.split(".")[-1] not in _KEPT_MODULES]
    if apart:
        raise ConfigError(
            f"quantization_config keeps {name_keys(apart)} unquantised: LLaMA Lab keeps whole kinds "
            f"of tensor apart (the head, the router), not single modules",
            field="quantization_config",
        )
    return tuple(names)
