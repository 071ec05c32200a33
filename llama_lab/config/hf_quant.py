"""A checkpoint's ``quantization_config`` read as the weights' stored format, where LLaMA Lab
models that format exactly (AWQ's 4-bit GEMM layout; fp8 e4m3 with block-wise scales, as
DeepSeek-V3 and Kimi K2 ship; MXFP4 experts, as gpt-oss ships); any other is refused by name.
``analysis.quant.stored_weights`` turns it into a ``WeightQuant``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import ConfigError
from .messages import check_int, name_keys, shown


@dataclass(frozen=True)
class StoredQuant:
    """A checkpoint's ``quantization_config`` as LLaMA Lab reads it (AWQ's GEMM int4, block-wise
    fp8, MXFP4 experts): what ``analysis.quant.stored_weights`` turns into the weights' stored
    format."""

    method: str  # "awq", "fp8" or "mxfp4"
    bits: int
    group_size: int  # inputs per scale (fp8: a block's columns; mxfp4: a 32-value block)
    zero_point: bool
    dtype: str  # what the unquantised tensors and the scales' neighbours are stored in
    not_converted: tuple[str, ...]  # modules_to_not_convert, as the file names them
    block_rows: int = 0  # fp8: a block's rows (weight_block_size [rows, cols]); 0: none

    def describe(self) -> str:
        """The stored format in words (the note an upload shows)."""
        if self.method == "mxfp4":
            return (
                f"MXFP4 expert weights (e2m1, two per byte, one e8m0 scale per {self.group_size} "
                f"values: {4 + 8 / self.group_size:g} bits a weight), the rest (attention, router, "
                f"embeddings, head, the experts' biases) in {self.dtype}"
            )
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
# MXFP4 converts the experts (GptOssMLP.experts) and nothing else: naming any other kind of
# module keeps it as it is anyway (gpt-oss's file names self_attn, the router, the embeddings
# and the head); naming the experts, or a module holding them, is what LLaMA Lab cannot count
_MXFP4_KEPT = _KEPT_MODULES + (
    "self_attn",
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "sinks",
    "embed_tokens",
    "norm",
    "input_layernorm",
    "post_attention_layernorm",
)
MXFP4_BLOCK = 32  # values per e8m0 scale: OCP microscaling; transformers' *_blocks hold 16 bytes each
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
    if method == "mxfp4":
        return _mxfp4(qc, data)
    if method != "awq":
        raise ConfigError(
            f"quantization_config quant_method={shown(method)} is not modelled yet (AWQ, "
            f"block-wise fp8 and gpt-oss's MXFP4 are): LLaMA Lab refuses rather than count the "
            f"stored weights wrong",
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


def _mxfp4(qc: Mapping[str, Any], data: Mapping[str, Any]) -> StoredQuant:
    """transformers' MXFP4 (gpt-oss): every layer's experts' gate_up_proj and down_proj stored
    as ``*_blocks`` (uint8: two e2m1 values a byte, 16 bytes a block of 32) and ``*_scales`` (one
    e8m0 byte a block); the experts' biases and every other tensor in the checkpoint's dtype.
    transformers converts GptOssMLP's experts only (``replace_with_mxfp4_linear``)."""
    model_type = data.get("model_type")
    if model_type != "gpt_oss":
        raise ConfigError(
            f"quantization_config quant_method='mxfp4' is not modelled yet for model_type="
            f"{shown(model_type)}: transformers' MXFP4 stores gpt_oss's experts (GptOssMLP) and "
            f"nothing else",
            field="quantization_config",
        )
    dtype = STORED_DTYPES.get(str(data.get("torch_dtype", data.get("dtype", "bfloat16"))), "bf16")
    names = _not_converted(
        qc,
        _MXFP4_KEPT,
        "MXFP4 converts every layer's experts and nothing else; LLaMA Lab counts them all in it",
    )
    return StoredQuant("mxfp4", 4, MXFP4_BLOCK, False, dtype, names)


def _not_converted(
    qc: Mapping[str, Any],
    kept: tuple[str, ...] = _KEPT_MODULES,
    rule: str = "LLaMA Lab keeps whole kinds of tensor apart (the head, the router), not single modules",
) -> tuple[str, ...]:
    """modules_to_not_convert, when they are whole kinds LLaMA Lab keeps apart anyway (``kept``:
    the last part of each name, "model.layers.*.self_attn" → "self_attn")."""
    names = qc.get("modules_to_not_convert") or []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ConfigError(
            f"quantization_config modules_to_not_convert={shown(names)} must be a list of module names",
            field="quantization_config",
        )
    inside = [n for n in names if not any(part in n for part in _OUTSIDE_DECODER)]
    apart = [n for n in inside if n.split(".")[-1] not in kept]
    if apart:
        raise ConfigError(
            f"quantization_config keeps {name_keys(apart)} unquantised: {rule}",
            field="quantization_config",
        )
    return tuple(names)
