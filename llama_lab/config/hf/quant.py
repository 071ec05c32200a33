"""A checkpoint's ``quantization_config`` read as the weights' stored format, where LLaMA Lab
models that format exactly (AWQ's 4-bit GEMM layout; GPTQ's 4- and 8-bit layout, as AutoGPTQ,
GPTQModel and optimum save it; bitsandbytes' 4-bit (nf4/fp4) and 8-bit (LLM.int8) layouts, as a
saved transformers checkpoint holds them; fp8 e4m3 with block-wise scales, as DeepSeek-V3 and
Kimi K2 ship; MXFP4 experts, as gpt-oss ships; fp8 e4m3 with one scale per output row, as
Meta's Llama-3.1 "-FP8" files store it through transformers' ``fbgemm_fp8``; compressed-tensors'
fp8, as llm-compressor saves Red Hat's / Neural Magic's "-FP8" files); any other is refused by
name. The modules a file keeps unconverted (``modules_to_not_convert``, compressed-tensors'
``ignore``) are matched against the decoder's linear modules as the loader matches them
(``unconverted_modules``), so a mixed-precision checkpoint is counted per module.
``analysis.quant.stored_weights`` turns it into a ``WeightQuant``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping

from ...errors import ConfigError
from ..messages import check_int, name_keys, shown


@dataclass(frozen=True)
class StoredQuant:
    """A checkpoint's ``quantization_config`` as LLaMA Lab reads it (AWQ's GEMM int4, GPTQ,
    bitsandbytes, block-wise fp8, MXFP4 experts): what ``analysis.quant.stored_weights`` turns
    into the weights' stored format."""

    method: str  # "awq", "gptq", "bitsandbytes", "fp8", "mxfp4", "fbgemm_fp8" or "compressed-tensors"
    bits: int
    # inputs per scale (fp8: a block's columns; mxfp4: a 32-value block; gptq: -1 = all of a
    # row's inputs; bitsandbytes 4-bit: values per absmax, 64; 8-bit: 0, one scale per row)
    group_size: int
    zero_point: bool  # gptq: qzeros are stored even when sym is true
    dtype: str  # what the unquantised tensors and the scales' neighbours are stored in
    not_converted: tuple[str, ...]  # modules_to_not_convert, as the file names them
    block_rows: int = 0  # fp8: a block's rows (weight_block_size [rows, cols]); 0: none
    lm_head: bool = False  # the head quantised too (GPTQModel's lm_head; bnb's skip list)
    desc_act: bool = False  # gptq: act-order (the same tensors either way: g_idx is always stored)
    sym: bool = True  # gptq: symmetric (the same tensors either way: qzeros are always stored)
    checkpoint_format: str = ""  # gptq: "gptq" or "gptq_v2" (the zeros' offset, not their size)
    quant_type: str = ""  # bitsandbytes 4-bit: "nf4" or "fp4"
    double_quant: bool = False  # bitsandbytes 4-bit: bnb_4bit_use_double_quant
    storage: str = "uint8"  # bitsandbytes 4-bit: bnb_4bit_quant_storage
    # the decoder's linear modules the file keeps in ``dtype``: (module, the layers it is kept
    # in), e.g. ("self_attn.q_proj", (0, 1, …)); ``unconverted_modules`` reads them
    unconverted: tuple[tuple[str, tuple[int, ...]], ...] = ()
    n_layers: int = 0  # the file's num_hidden_layers (what "every layer" means in the words)
    # compressed-tensors: its input activations, "none" (weight-only), "dynamic" or "static" (an
    # input_scale stored per module)
    activations: str = ""

    @property
    def static_input(self) -> bool:
        return self.activations == "static"

    def unconverted_words(self) -> str:
        """Which modules stay in ``dtype``, in a few words ("" when none): "attention kept in
        bf16", "attention in every layer and mlp in layers 0, 125 kept in bf16"."""
        return kept_words(self.unconverted, self.dtype, self.n_layers)

    def label(self) -> str:
        """The stored format in a few words (the app's "weights stored as" shows it), with the
        modules the file keeps unconverted."""
        kept = self.unconverted_words()
        return f"{self.format_words()}, {kept}" if kept else self.format_words()

    def format_words(self) -> str:
        """The stored format alone, in a few words."""
        if self.method == "gptq":
            group = "one group per row" if self.group_size == -1 else f"g{self.group_size}"
            return f"GPTQ int{self.bits}, {group}" + (", act-order" if self.desc_act else "")
        if self.method == "bitsandbytes":
            if self.bits == 8:
                return "bitsandbytes int8 (LLM.int8)"
            return f"bitsandbytes {self.quant_type}" + (", double quant" if self.double_quant else "")
        if self.method == "mxfp4":
            return "MXFP4 experts"
        if self.method == "fp8":
            scales = (
                "one scale per tensor"
                if self.group_size == -1
                else f"{self.block_rows}×{self.group_size} blocks"
            )
            return f"fp8 e4m3, {scales}" + (", static activations" if self.static_input else "")
        if self.method == "fbgemm_fp8":
            return "fp8 rows (fbgemm)"
        if self.method == "compressed-tensors":
            scales = "rows" if self.group_size == 0 else "one scale per tensor"
            acts = "weight-only" if self.activations == "none" else f"{self.activations} activations"
            return f"fp8 {scales} (compressed-tensors, {acts})"
        return f"AWQ int4, g{self.group_size}"

    def describe(self) -> str:
        """The stored format in words (the note an upload shows), with the modules the file
        keeps unconverted."""
        kept = self.unconverted_words()
        return f"{self.format_description()}; {kept}" if kept else self.format_description()

    def format_description(self) -> str:
        """The stored format alone, in words."""
        head = "" if not self.lm_head else " and the head"
        rest = "embeddings, norms" + ("" if self.lm_head else ", head")
        if self.method == "gptq":
            group = (
                "one group over all of a row's inputs"
                if self.group_size == -1
                else f"groups of {self.group_size} inputs"
            )
            return (
                f"GPTQ int{self.bits} weights{head} in {group} ({'act-order, ' if self.desc_act else ''}"
                f"{'symmetric' if self.sym else 'asymmetric'}, checkpoint format "
                f"{self.checkpoint_format}): qweight and qzeros packed in int32, fp16 scales, an int32 "
                f"g_idx per input, fp16 biases; the rest ({rest}, router) in {self.dtype}"
            )
        if self.method == "bitsandbytes":
            if self.bits == 8:
                return (
                    f"bitsandbytes int8 (LLM.int8) weights{head}: int8 data, one float32 scale (SCB) "
                    f"per output row and a weight_format byte per linear layer; the rest ({rest}, "
                    f"biases) in {self.dtype}"
                )
            stats = (
                f"a uint8 absmax per {self.group_size} values and a float32 per 256 of those (double quant)"
                if self.double_quant
                else f"a float32 absmax per {self.group_size} values"
            )
            return (
                f"bitsandbytes {self.quant_type} weights{head}: two 4-bit codes a byte (stored as "
                f"{self.storage}), {stats}, the code table and the quant_state JSON per linear "
                f"layer; the rest ({rest}, biases) in {self.dtype}"
            )
        if self.method == "mxfp4":
            return (
                f"MXFP4 expert weights (e2m1, two per byte, one e8m0 scale per {self.group_size} "
                f"values: {4 + 8 / self.group_size:g} bits a weight), the rest (attention, router, "
                f"embeddings, head, the experts' biases) in {self.dtype}"
            )
        if self.method == "fp8":
            per = "tensor" if self.group_size == -1 else f"{self.block_rows}×{self.group_size} block"
            static = ", a float32 activation_scale each (static activations)" if self.static_input else ""
            return (
                f"fp8 (e4m3) weights{head} with one float32 scale per {per} of every linear layer"
                f"{static}, the rest ({rest}) in {self.dtype}"
            )
        if self.method == "fbgemm_fp8":
            return (
                f"fp8 (e4m3) weights{head} with one float32 weight_scale per output row (FbgemmFp8Linear) "
                f"and a float32 input_scale_ub buffer per linear layer; the rest ({rest}) in "
                f"{self.dtype}"
            )
        if self.method == "compressed-tensors":
            scale = "per output row" if self.group_size == 0 else "per tensor"
            act = {
                "static": "static (an input_scale stored per linear layer)",
                "dynamic": "quantised dynamically (no scale stored)",
                "none": "in the compute dtype (weight-only)",
            }[self.activations]
            return (
                f"compressed-tensors fp8 (e4m3) weights{head} with a {self.dtype} weight_scale {scale}, "
                f"activations {act}; the rest ({rest}) in {self.dtype}"
            )
        return (
            f"AWQ int4 weights in groups of {self.group_size} inputs "
            f"({'with' if self.zero_point else 'without'} zero points, fp16 scales), the rest in "
            f"{self.dtype}"
        )


STORED_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
GPTQ_BITS = (4, 8)  # 2 and 3 are refused by name: their packing is not modelled
GPTQ_FORMATS = ("gptq", "gptq_v2")  # v2 stores the zeros without v1's −1 offset: the same bytes
BNB_BLOCK = 64  # values per absmax: Params4bit's default blocksize, which transformers keeps
BNB_QUANT_TYPES = ("nf4", "fp4")
# bnb_4bit_quant_storage: the dtypes transformers' BitsAndBytesConfig accepts, by itemsize
BNB_STORAGE_BYTES = {"uint8": 1, "int8": 1, "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
# a mixture's expert count, by the names the families give it
_EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")
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
    if method == "fbgemm_fp8":
        return _fbgemm_fp8(qc, data)
    if method == "compressed-tensors":
        return _compressed_tensors(qc, data)
    if method == "fp8":
        return _fp8(qc, data)
    if method == "mxfp4":
        return _mxfp4(qc, data)
    if method == "gptq":
        return _gptq(qc, data)
    if method == "bitsandbytes":
        return _bitsandbytes(qc, data)
    if method != "awq":
        raise ConfigError(
            f"quantization_config quant_method={shown(method)} is not modelled yet (AWQ, GPTQ, "
            f"bitsandbytes, block-wise fp8, fbgemm_fp8, compressed-tensors fp8 and gpt-oss's "
            f"MXFP4 are): LLaMA Lab refuses rather than count the stored weights wrong",
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
    names = _module_names(qc)
    dtype = STORED_DTYPES.get(str(data.get("torch_dtype", data.get("dtype", "float16"))), "fp16")
    kept = unconverted_modules(names, data)
    return StoredQuant("awq", 4, group, zero, dtype, names, unconverted=kept, n_layers=_layers(data))


def _fp8(qc: Mapping[str, Any], data: Mapping[str, Any]) -> StoredQuant:
    """transformers' FineGrainedFP8 format (``integrations/finegrained_fp8.py`` ``FP8Linear``):
    every linear layer's weight in e4m3 and its float32 ``weight_scale_inv``, one per block of
    ``weight_block_size`` [rows, cols] (DeepSeek-V3), or one 0-d per tensor where the file sets
    ``weight_block_size`` to null; a static ``activation_scheme`` adds a float32 0-d
    ``activation_scale`` per layer. The modules kept, and the head unless a list is given
    without it (no default skips then), in the checkpoint's dtype."""
    fmt, block = qc.get("fmt", "e4m3"), qc.get("weight_block_size")
    per_tensor = "weight_block_size" in qc and block is None
    if fmt != "e4m3" or not (
        per_tensor
        or isinstance(block, list)
        and len(block) == 2
        and all(isinstance(n, int) and not isinstance(n, bool) for n in block)
    ):
        raise ConfigError(
            f"quantization_config: fp8 fmt={shown(fmt)}, weight_block_size={shown(block)} is not "
            f"modelled (e4m3 with a [rows, cols] block, as DeepSeek-V3's, or null: one scale per "
            f"tensor, is)",
            field="quantization_config",
        )
    rows, cols = (0, -1) if block is None else block  # -1: one scale for the whole tensor
    for n in block or ():
        check_int("quantization_config weight_block_size", n, 1, 1 << 20)
    scheme = qc.get("activation_scheme", "dynamic")
    if scheme not in ("dynamic", "static"):
        raise _refused(f"fp8 activation_scheme={shown(scheme)} must be 'dynamic' or 'static'")
    dtype = STORED_DTYPES.get(str(data.get("torch_dtype", data.get("dtype", "bfloat16"))), "bf16")
    names = _module_names(qc)
    listed = qc.get("modules_to_not_convert") is not None
    head = listed and not any(transformers_match(n, "lm_head") for n in names)
    return StoredQuant(
        "fp8",
        8,
        cols,
        False,
        dtype,
        names,
        block_rows=rows,
        lm_head=head,
        unconverted=unconverted_modules(names, data),
        n_layers=_layers(data),
        activations=scheme,
    )


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


def _refused(message: str) -> ConfigError:
    return ConfigError(f"quantization_config {message}", field="quantization_config")


def _flag(qc: Mapping[str, Any], key: str, default: bool) -> bool:
    value = qc.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _refused(f"{key}={shown(value)} must be true or false")
    return value


def _checkpoint_dtype(data: Mapping[str, Any]) -> str:
    """The dtype the unquantised tensors are stored in (torch_dtype; fp16 when it is missing,
    as for AWQ)."""
    return STORED_DTYPES.get(str(data.get("torch_dtype", data.get("dtype", "float16"))), "fp16")


def _fused_experts(method: str, data: Mapping[str, Any]) -> None:
    """gpt-oss keeps its experts as fused parameters (gate_up_proj, down_proj), not the linear
    layers GPTQ and bitsandbytes store: refused by name."""
    if data.get("model_type") == "gpt_oss":
        raise _refused(
            f"quant_method={shown(method)} is not modelled yet for model_type='gpt_oss': its "
            f"experts are fused parameters, not the linear layers {method} stores"
        )


def _gptq(qc: Mapping[str, Any], data: Mapping[str, Any]) -> StoredQuant:
    """GPTQ's checkpoint format (AutoGPTQ, GPTQModel, optimum): every linear layer of a block
    as qweight, qzeros, scales and g_idx (``analysis.quant.stored_weights`` counts them)."""
    _fused_experts("gptq", data)
    bits = qc.get("bits")
    if bits in (2, 3):
        raise _refused(f"GPTQ bits={bits} is not modelled (4 and 8 are): its packing is not counted")
    if isinstance(bits, bool) or bits not in GPTQ_BITS:
        raise _refused(f"GPTQ bits={shown(bits)} must be 4 or 8 (2 and 3 are not modelled)")
    group = qc.get("group_size", 128)
    if group != -1:
        check_int("quantization_config group_size", group, 1, 1 << 20)
    fmt = qc.get("checkpoint_format", qc.get("format")) or "gptq"
    if not isinstance(fmt, str) or fmt.lower() not in GPTQ_FORMATS:
        raise _refused(
            f"GPTQ checkpoint_format={shown(fmt)} is not modelled (gptq and gptq_v2 are; a "
            f"marlin or bitblas repacking stores other tensors)"
        )
    pack = qc.get("pack_dtype", "int32")
    if pack not in ("int32", "torch.int32"):
        raise _refused(f"GPTQ pack_dtype={shown(pack)} is not modelled (int32 is)")
    for key in ("dynamic", "modules_in_block_to_quantize"):
        if qc.get(key):
            raise _refused(
                f"{key}={shown(qc[key])}: LLaMA Lab counts every linear layer of every block "
                f"in one GPTQ format, not a per-module choice"
            )
    desc_act, sym, lm_head = _flag(qc, "desc_act", False), _flag(qc, "sym", True), _flag(qc, "lm_head", False)
    return StoredQuant(
        "gptq",
        bits,
        group,
        True,  # qzeros are registered and packed for sym too
        _checkpoint_dtype(data),
        _not_converted(qc),
        lm_head=lm_head,
        desc_act=desc_act,
        sym=sym,
        checkpoint_format=fmt.lower(),
    )


def _bitsandbytes(qc: Mapping[str, Any], data: Mapping[str, Any]) -> StoredQuant:
    """bitsandbytes' 4-bit (Linear4bit: nf4/fp4) or 8-bit (Linear8bitLt) checkpoint, as
    transformers saves it: every nn.Linear but the skipped modules (``llm_int8_skip_modules``;
    none named: the head) quantised."""
    _fused_experts("bitsandbytes", data)
    experts = [data.get(key) for key in _EXPERT_KEYS]
    if any(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in experts):
        raise _refused(
            f"quant_method='bitsandbytes' is not modelled yet for a mixture of experts "
            f"(model_type={shown(data.get('model_type'))}): which expert tensors a bitsandbytes "
            f"checkpoint holds quantised depends on the transformers version that saved it (one "
            f"nn.Linear per expert, or fused expert parameters bitsandbytes leaves alone)"
        )
    four = _flag(qc, "load_in_4bit", bool(qc.get("_load_in_4bit", False)))
    eight = _flag(qc, "load_in_8bit", bool(qc.get("_load_in_8bit", False)))
    if four == eight:
        raise _refused(
            f"bitsandbytes load_in_4bit={shown(qc.get('load_in_4bit'))}, load_in_8bit="
            f"{shown(qc.get('load_in_8bit'))}: exactly one must be true"
        )
    skip = qc.get("llm_int8_skip_modules")
    # transformers keeps the head (the output embeddings) only when no skip list is given
    lm_head = skip is not None and not any(
        isinstance(name, str) and name.split(".")[-1] == "lm_head" for name in skip or []
    )
    names = _module_names({"modules_to_not_convert": skip}, "llm_int8_skip_modules")
    kept = unconverted_modules(names, data, key="llm_int8_skip_modules")
    dtype = _checkpoint_dtype(data)
    if eight:
        if _flag(qc, "llm_int8_has_fp16_weight", False):
            raise _refused(
                "bitsandbytes llm_int8_has_fp16_weight=true keeps the weights in fp16 and saves no "
                "int8 state: not modelled"
            )
        return StoredQuant(
            "bitsandbytes",
            8,
            0,
            False,
            dtype,
            names,
            lm_head=lm_head,
            unconverted=kept,
            n_layers=_layers(data),
        )
    kind = qc.get("bnb_4bit_quant_type", "fp4")
    if kind not in BNB_QUANT_TYPES:
        raise _refused(f"bnb_4bit_quant_type={shown(kind)} must be 'nf4' or 'fp4'")
    storage = qc.get("bnb_4bit_quant_storage") or "uint8"
    if not isinstance(storage, str) or storage.removeprefix("torch.") not in BNB_STORAGE_BYTES:
        raise _refused(
            f"bnb_4bit_quant_storage={shown(storage)} must be one of {', '.join(BNB_STORAGE_BYTES)}"
        )
    return StoredQuant(
        "bitsandbytes",
        4,
        BNB_BLOCK,
        False,
        dtype,
        names,
        lm_head=lm_head,
        quant_type=kind,
        double_quant=_flag(qc, "bnb_4bit_use_double_quant", False),
        storage=storage.removeprefix("torch."),
        unconverted=kept,
        n_layers=_layers(data),
    )


def _not_converted(
    qc: Mapping[str, Any],
    kept: tuple[str, ...] = _KEPT_MODULES,
    rule: str = "LLaMA Lab keeps whole kinds of tensor apart (the head, the router), not single modules",
    key: str = "modules_to_not_convert",
) -> tuple[str, ...]:
    """modules_to_not_convert (or bitsandbytes' ``llm_int8_skip_modules``), when they are whole
    kinds LLaMA Lab keeps apart anyway (``kept``: the last part of each name,
    "model.layers.*.self_attn" → "self_attn")."""
    names = qc.get("modules_to_not_convert") or []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ConfigError(
            f"quantization_config {key}={shown(names)} must be a list of module names",
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


def _module_names(qc: Mapping[str, Any], key: str = "modules_to_not_convert") -> tuple[str, ...]:
    """The module names (or patterns) a quantization_config keeps unconverted, checked to be a
    list of strings (``key`` names the file's key in a refusal)."""
    names = qc.get("modules_to_not_convert") or []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise _refused(f"{key}={shown(names)} must be a list of module names")
    return tuple(names)


# The decoder's linear modules a per-module format is counted for, as transformers names them in
# a dense block (LlamaDecoderLayer's self_attn and mlp); ``analysis.quant`` names their tensors
# by the last part
DENSE_LINEARS = (
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "self_attn.o_proj",
    "mlp.gate_proj",
    "mlp.up_proj",
    "mlp.down_proj",
)
# transformers' rule (quantizers/quantizers_utils.py should_convert_module, transformers 5.x): a
# pattern matches a module's full name from its start up to a module boundary, as a regex with
# the same boundary, or as a suffix
_BOUNDARY = r"(?:(?<=\.)|(?=\.|$))"


@lru_cache(maxsize=4096)
def _compiled(pattern: str) -> re.Pattern | None:
    try:
        return re.compile(pattern)
    except re.error:
        return None


def transformers_match(pattern: str, name: str) -> bool:
    """Whether transformers keeps module ``name`` unconverted for ``pattern`` (``_BOUNDARY``)."""
    compiled = _compiled(rf"(?:{pattern}){_BOUNDARY}")
    return name.endswith(pattern) or (compiled is not None and compiled.match(name) is not None)


def compressed_tensors_match(pattern: str, name: str) -> bool:
    """compressed-tensors' rule (``src/compressed_tensors/utils/match.py`` ``_match_name``): a
    "re:" pattern as ``re.match``, any other the exact name."""
    if pattern.startswith("re:"):
        compiled = _compiled(pattern.removeprefix("re:"))
        return compiled is not None and compiled.match(name) is not None
    return pattern == name


def _layers(data: Mapping[str, Any]) -> int:
    """num_hidden_layers where it is a count (0 otherwise: the reader refuses it by name)."""
    n = data.get("num_hidden_layers")
    return n if isinstance(n, int) and not isinstance(n, bool) and 0 < n <= 4096 else 0


def _dense_blocks(data: Mapping[str, Any]) -> str:
    """What keeps a config's blocks from the dense names ``DENSE_LINEARS`` ("" when nothing)."""
    experts = [data.get(key) for key in _EXPERT_KEYS]
    if any(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in experts):
        return "a mixture of experts"
    if data.get("kv_lora_rank"):
        return "multi-head latent attention"
    if data.get("model_type") == "phi3":
        return "fused qkv_proj and gate_up_proj"
    if "linear_attention" in (data.get("layer_types") or []):
        return "linear-attention layers"
    return ""


def unconverted_modules(
    patterns: tuple[str, ...],
    data: Mapping[str, Any],
    key: str = "modules_to_not_convert",
    match=transformers_match,
) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """The decoder's linear modules ``patterns`` keep unconverted, by ``match``'s rule, as
    (module, layers) for each of ``DENSE_LINEARS`` kept in one layer or more. A pattern that
    matches none of them must name what LLaMA Lab keeps apart anyway (the head, the embeddings,
    the norms, a router, the vision side), else it is refused by name; so is a per-module
    choice in blocks not named as ``DENSE_LINEARS`` (a mixture, MLA, fused projections)."""
    n_layers = _layers(data)  # 0: the reader refuses the count itself
    kept: dict[str, list[int]] = {}
    unmatched = []
    for pattern in patterns:
        hits = [
            (module, i)
            for i in range(n_layers)
            for module in DENSE_LINEARS
            if match(pattern, f"model.layers.{i}.{module}")
        ]
        for module, i in hits:
            kept.setdefault(module, []).append(i)
        if not hits and not _kept_anyway(pattern):
            unmatched.append(pattern)
    if unmatched:
        raise _refused(
            f"{key} names {name_keys(unmatched)}, which match none of the decoder's linear modules "
            f"(model.layers.N.self_attn.q/k/v/o_proj, mlp.gate/up/down_proj) nor a tensor LLaMA Lab "
            f"keeps apart anyway (head, embeddings, norms, router, vision side): not modelled"
        )
    other = _dense_blocks(data)
    if kept and other:
        raise _refused(
            f"{key} keeps single modules of a model with {other} unconverted: per-module formats "
            f"are modelled for dense blocks (self_attn q/k/v/o_proj, mlp gate/up/down_proj)"
        )
    return tuple((module, tuple(sorted(set(kept[module])))) for module in DENSE_LINEARS if module in kept)


# tensors LLaMA Lab keeps in the checkpoint's dtype in every format (a pattern naming only them
# changes nothing), by the names transformers gives them
_KEPT_NAMES = ("lm_head", "embed_tokens", "norm", "gate", "router", "rotary_emb")


def _kept_anyway(pattern: str) -> bool:
    """Whether ``pattern`` names only tensors kept apart anyway (``_KEPT_NAMES``, the vision side)."""
    if any(part in pattern for part in _OUTSIDE_DECODER):
        return True
    bare = pattern.removeprefix("re:").replace(".*", "").strip(".")
    return bare.split(".")[-1] in _KEPT_NAMES or bare.endswith("layernorm")


def kept_words(unconverted: tuple[tuple[str, tuple[int, ...]], ...], dtype: str, n_layers: int) -> str:
    """The unconverted modules in words: "attention kept in bf16", "attention in every layer and
    mlp in layers 0, 125 kept in bf16", "attention (q_proj) in layers 0–3 kept in bf16" ("" when
    none): the projections of one block kept in the same layers said together."""
    together: dict[tuple[str, tuple[int, ...]], list[str]] = {}
    for module, layers in unconverted:
        block, projection = module.split(".")
        together.setdefault((block, layers), []).append(projection)
    parts = []
    for (block, layers), projections in together.items():
        name = "attention" if block == "self_attn" else block
        whole = len(projections) == sum(m.startswith(block + ".") for m in DENSE_LINEARS)
        what = name if whole else f"{name} ({', '.join(projections)})"
        if len(layers) == n_layers:
            where = " in every layer" if len(together) > 1 else ""
        else:
            where = f" in layer{'s' * (len(layers) > 1)} {_ranges(layers)}"
        parts.append(what + where)
    return f"{' and '.join(parts)} kept in {dtype}" if parts else ""


def _ranges(layers: tuple[int, ...]) -> str:
    """Layer indices as runs: (0, 1, 2, 5) → "0–2, 5"."""
    runs: list[list[int]] = []
    for i in layers:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}–{r[-1]}" for r in runs)


def _fbgemm_fp8(qc: Mapping[str, Any], data: Mapping[str, Any]) -> StoredQuant:
    """transformers' fbgemm_fp8 (Meta's Llama-3.1 "-FP8" files): every nn.Linear not kept is an
    FbgemmFp8Linear (``integrations/fbgemm_fp8.py``): weight float8_e4m3fn (N, K), weight_scale
    float32 (N, 1), input_scale_ub float32 (1,) (a buffer, not saved); the modules kept, and the
    head unless a list is given without it (``get_modules_to_not_convert``: no default skips
    when the file lists its own), in the checkpoint's dtype."""
    _fused_experts("fbgemm_fp8", data)
    if _dense_blocks(data) == "a mixture of experts":
        raise _refused(
            f"quant_method='fbgemm_fp8' is not modelled yet for a mixture of experts (model_type="
            f"{shown(data.get('model_type'))}): transformers converts Llama 4's fused experts "
            f"only, each family's otherwise"
        )
    if data.get("attention_bias") or data.get("mlp_bias") or data.get("model_type") == "qwen2":
        raise _refused(
            f"quant_method='fbgemm_fp8' is not modelled for a model with linear biases (model_type="
            f"{shown(data.get('model_type'))}): FbgemmFp8Linear keeps them in float32"
        )
    bound = qc.get("activation_scale_ub", 1200.0)
    if isinstance(bound, bool) or not isinstance(bound, (int, float)) or not bound > 0:
        raise _refused(f"fbgemm_fp8 activation_scale_ub={shown(bound)} must be a positive number")
    names = _module_names(qc)
    listed = qc.get("modules_to_not_convert") is not None
    head_kept = not listed or any(transformers_match(n, "lm_head") for n in names)
    kept = unconverted_modules(names, data)
    dtype = STORED_DTYPES.get(str(data.get("torch_dtype", data.get("dtype", "bfloat16"))), "bf16")
    return StoredQuant(
        "fbgemm_fp8",
        8,
        0,
        False,
        dtype,
        names,
        lm_head=not head_kept,
        unconverted=kept,
        n_layers=_layers(data),
    )


# compressed-tensors' quantization args LLaMA Lab counts: fp8 (type float, 8 bits) symmetric
# weights with one scale per output row ("channel") or per tensor; activations none, dynamic
# (no tensor stored) or static per tensor (an input_scale)
CT_WEIGHT_STRATEGIES = {"channel": 0, "tensor": -1}  # → group_size (per row, per tensor)


def _compressed_tensors(qc: Mapping[str, Any], data: Mapping[str, Any]) -> StoredQuant:
    """compressed-tensors' fp8 ("float-quantized": llm-compressor's FP8 and FP8_DYNAMIC schemes,
    Red Hat's / Neural Magic's "-FP8" files): per linear module the weight float8_e4m3fn (N, K),
    weight_scale (N, 1) for "channel" or (1,) for "tensor", and for static activations an
    input_scale (1,), both scales in the weight's dtype (``quantization/lifecycle/
    initialize.py`` ``_initialize_scale_zero_point``: ``scale_dtype = module.weight.dtype``);
    symmetric zero points are not saved (``compressors/quantized_compressors/base.py``: "only
    save if asym"). ``ignore`` keeps modules by exact name or "re:" regex (``utils/match.py``)."""
    _fused_experts("compressed-tensors", data)
    fmt = qc.get("format")
    groups = qc.get("config_groups")
    if fmt != "float-quantized" or not isinstance(groups, Mapping) or len(groups) != 1:
        count = len(groups) if isinstance(groups, Mapping) else groups
        raise _refused(
            f"compressed-tensors format={shown(fmt)} with {shown(count)} "
            f"config_groups is not modelled (one float-quantized group, as llm-compressor's FP8 "
            f"schemes save, is)"
        )
    (group,) = groups.values()
    targets = group.get("targets") if isinstance(group, Mapping) else None
    weights = group.get("weights") if isinstance(group, Mapping) else None
    if targets != ["Linear"] or not isinstance(weights, Mapping):
        raise _refused(f"compressed-tensors targets={shown(targets)} is not modelled (['Linear'] is)")
    strategy = weights.get("strategy")
    if (
        weights.get("type") != "float"
        or weights.get("num_bits") != 8
        or weights.get("symmetric") is not True
        or weights.get("dynamic")
        or strategy not in CT_WEIGHT_STRATEGIES
    ):
        raise _refused(
            f"compressed-tensors weights {shown(dict(weights))} are not modelled (symmetric fp8, "
            f"type float, 8 bits, strategy channel or tensor, is)"
        )
    static = _activation_scheme(group.get("input_activations"))
    for key in ("output_activations",):
        if group.get(key) is not None:
            raise _refused(f"compressed-tensors {key}={shown(group[key])} is not modelled")
    sparsity = qc.get("sparsity_config") or {}
    dense = isinstance(sparsity, Mapping) and sparsity.get("format", "dense") == "dense"
    for key, unmodelled in (
        ("kv_cache_scheme", bool(qc.get("kv_cache_scheme"))),  # k_scale, v_scale per attention
        ("sparsity_config", not dense),  # a sparse format stores other tensors
        ("transform_config", bool(qc.get("transform_config"))),  # rotations stored beside
    ):
        if unmodelled:
            raise _refused(f"compressed-tensors {key}={shown(qc[key])} is not modelled")
    ignore = _module_names({"modules_to_not_convert": qc.get("ignore")}, "ignore")
    kept = unconverted_modules(ignore, data, "ignore", compressed_tensors_match)
    head = not any(compressed_tensors_match(n, "lm_head") for n in ignore)
    dtype = STORED_DTYPES.get(str(data.get("torch_dtype", data.get("dtype", "bfloat16"))), "bf16")
    return StoredQuant(
        "compressed-tensors",
        8,
        CT_WEIGHT_STRATEGIES[strategy],
        False,
        dtype,
        ignore,
        lm_head=head,
        unconverted=kept,
        n_layers=_layers(data),
        activations=static,
    )


def _activation_scheme(args: Any) -> str:
    """compressed-tensors' input activations: "none" (weight-only) and "dynamic" (per token or
    tensor) store nothing, "static" (per tensor) an input_scale; any other is refused."""
    if args is None:
        return "none"
    if not isinstance(args, Mapping) or args.get("type") != "float" or args.get("num_bits") != 8:
        raise _refused(f"compressed-tensors input_activations={shown(args)} is not modelled (fp8 is)")
    if args.get("dynamic") is True and args.get("strategy") in ("token", "tensor"):
        return "dynamic"
    if args.get("dynamic") is False and args.get("strategy") == "tensor" and args.get("symmetric", True):
        return "static"
    raise _refused(
        f"compressed-tensors input_activations strategy={shown(args.get('strategy'))}, dynamic="
        f"{shown(args.get('dynamic'))} is not modelled (dynamic per token or tensor, or static "
        f"symmetric per tensor, is)"
    )
