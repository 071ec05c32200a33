"""A checkpoint's ``quantization_config`` read as the weights' stored format, where LLaMA Lab
models that format exactly (AWQ's 4-bit GEMM layout; GPTQ's 4- and 8-bit layout, as AutoGPTQ,
GPTQModel and optimum save it; bitsandbytes' 4-bit (nf4/fp4) and 8-bit (LLM.int8) layouts, as a
saved transformers checkpoint holds them; fp8 e4m3 with block-wise scales, as DeepSeek-V3 and
Kimi K2 ship; MXFP4 experts, as gpt-oss ships); any other is refused by name.
``analysis.quant.stored_weights`` turns it into a ``WeightQuant``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ...errors import ConfigError
from ..messages import check_int, name_keys, shown


@dataclass(frozen=True)
class StoredQuant:
    """A checkpoint's ``quantization_config`` as LLaMA Lab reads it (AWQ's GEMM int4, GPTQ,
    bitsandbytes, block-wise fp8, MXFP4 experts): what ``analysis.quant.stored_weights`` turns
    into the weights' stored format."""

    method: str  # "awq", "gptq", "bitsandbytes", "fp8" or "mxfp4"
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

    def label(self) -> str:
        """The stored format in a few words (the app's "weights stored as" shows it)."""
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
            return f"fp8 e4m3, {self.block_rows}×{self.group_size} blocks"
        return f"AWQ int4, g{self.group_size}"

    def describe(self) -> str:
        """The stored format in words (the note an upload shows)."""
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
            return (
                f"fp8 (e4m3) weights with one float32 scale per {self.block_rows}×{self.group_size} "
                f"block of every linear layer, the rest in {self.dtype}"
            )
        return (
            f"AWQ int4 weights in groups of {self.group_size} inputs "
            f"({'with' if self.zero_point else 'without'} zero points, fp16 scales), the rest in {self.dtype}"
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
            f"bitsandbytes, block-wise fp8 and gpt-oss's MXFP4 are): LLaMA Lab refuses rather "
            f"than count the stored weights wrong",
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
    names = _not_converted({"modules_to_not_convert": skip}, rule=_BNB_RULE, key="llm_int8_skip_modules")
    dtype = _checkpoint_dtype(data)
    if eight:
        if _flag(qc, "llm_int8_has_fp16_weight", False):
            raise _refused(
                "bitsandbytes llm_int8_has_fp16_weight=true keeps the weights in fp16 and saves no "
                "int8 state: not modelled"
            )
        return StoredQuant("bitsandbytes", 8, 0, False, dtype, names, lm_head=lm_head)
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
    )


_BNB_RULE = "LLaMA Lab counts every linear layer of a block quantised, not single modules skipped"


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
