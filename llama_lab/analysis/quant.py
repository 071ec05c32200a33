"""Quantised storage, byte for byte: every weight tensor of a config with its shape and role
(``weight_tensors``), what a weight format stores for it (``WeightQuant``: the data, packed
int4 two per byte, plus the scales and zero points of its groups) and what a KV-cache format
stores per token (int8 keeps one scale per token and KV head).

Formats: fp32, bf16 and fp16 store every tensor as it is. fp8 (e4m3), int8 and int4 store the
linear layers' matrices (q, k, v, o, the FFN's and every expert's) quantised; the tensors listed
in ``keep`` stay in 16 bits (bf16): by default the token embedding, the lm_head, the norms and
a mixture of experts' router, as GPTQ, AWQ and llm.int8 leave them; biases always stay. A
quantised matrix of R rows (outputs) and K columns (inputs) has scales per group of
``group_size`` inputs of a row (R · ⌈K / g⌉ of them), per block of ``block_rows`` rows ×
``group_size`` inputs (⌈R / r⌉ · ⌈K / g⌉: DeepSeek-V3's fp8 128×128), per row (``group_size=0``:
per output channel) or one for the tensor (``group_size=-1``), each of ``scale_dtype``; an asymmetric
(``zero_point``) int format adds one zero point per scale, stored in the format itself (int4
zero points packed two per byte per row, as GPTQ/AWQ store them). MXFP4 (OCP microscaling,
gpt-oss's experts) is a stored format read from a checkpoint: e2m1 values two per byte, one e8m0
(a power of two, 1 byte) scale per 32 inputs: 4.25 bits a weight.

Checkpoint layouts (``WeightQuant.layout``, read from a quantization_config by
``stored_weights``) count the tensors a saved checkpoint holds per linear module, byte for byte:
"gptq" (AutoGPTQ / GPTQModel / optimum), "bnb4" and "bnb8" (bitsandbytes, as transformers saves
it); see ``stored_weights``. Their per-module extras that are neither data, scales nor zero
points (GPTQ's g_idx; bitsandbytes' code tables, quant-state blob, weight_format) are ``other``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from ..config import ModelConfig
from ..config.hf.quant import BNB_STORAGE_BYTES, StoredQuant
from ..errors import AnalysisError
from ..runtime.hardware import DTYPE_BYTES
from .params import BLOCK_NORMS, norm_params
from .shapes import Shapes
from .vision import projector_params, vision_params

WEIGHT_DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8", "int4")
KV_DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8", "int4")  # int4: KIVI-style, per-token scales
# read from a checkpoint's quantization_config, not offered as a choice (nf4, fp4: bitsandbytes'
# 4-bit codes, two a byte)
STORED_ONLY = ("mxfp4", "nf4", "fp4")
QUANTISED = ("fp8", "int8", "int4", "mxfp4", "nf4", "fp4")  # the formats with scales
BITS = {"fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8, "int4": 4, "mxfp4": 4, "nf4": 4, "fp4": 4}
# "": LLaMA Lab's own layout (the module's docstring); the others: a checkpoint's (stored_weights)
LAYOUTS = ("", "gptq", "bnb4", "bnb8")
TORCH_DTYPE_NAMES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
# bitsandbytes double quant: the absmax quantised in blocks of 256 with an 8-bit dynamic code
BNB_NESTED_BLOCK = 256
BNB_CODE_BYTES = 16 * 4  # get_4bit_type: 16 float32 values, one copy per linear layer
BNB_NESTED_CODE_BYTES = 256 * 4  # create_dynamic_map: 256 float32 values, cloned per layer
# nested_offset (absmax.mean(), a float32 read as a Python float) in the quant-state JSON: its
# repr is 19 characters for most offsets in [0.01, 0.1), a block of LLM weights' usual mean
# absmax; a real file's differs by a few bytes per linear layer (the one approximate term)
BNB_OFFSET_CHARS = 19
SCALE_DTYPES = ("fp16", "bf16", "fp32")
SCALE_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4, "e8m0": 1}  # e8m0: MXFP4's power-of-two scales
# may stay in 16 bits; "linear": the attention projections and the dense FFN matrices
KEEP_CHOICES = ("embeddings", "lm_head", "norms", "router", "experts", "linear")
KEEP_DTYPE = "bf16"
DEFAULT_KEEP = ("embeddings", "lm_head", "norms", "router")
# the usual granularity of each format: int4 in groups of 128 inputs (GPTQ, AWQ), int8 per
# output channel (llm.int8, SmoothQuant W8), fp8 one scale per tensor (e4m3, as vLLM's)
DEFAULT_GROUP = {"int4": 128, "int8": 0, "fp8": -1}
DEFAULT_SCALE_DTYPE = {"int4": "fp16", "int8": "fp16", "fp8": "fp32"}
KV_SCALE_DTYPE = "fp16"  # int8/int4 KV: one per token and KV head


@dataclass(frozen=True)
class TensorGroup:
    """``count`` tensors of ``rows`` × ``cols`` (a vector: rows = 1) with one role."""

    name: str
    role: str  # linear, router, embeddings, lm_head, norms, bias
    count: int
    rows: int
    cols: int
    # linear modules one tensor is in a checkpoint, stacked along its rows (a mixture's
    # gate_up_proj: each expert's gate_proj and up_proj); per-module layouts count each apart
    parts: int = 1
    layers: tuple[int, ...] = ()  # the blocks ``count`` spans (a block's tensors; () for the rest)

    @property
    def params(self) -> int:
        return self.count * self.rows * self.cols


def _linear_mixer_tensors(cfg: ModelConfig, n: int) -> list[TensorGroup]:
    """A Gated DeltaNet block's tensors: its input projections (each a linear module, as the
    checkpoints keep them) and out_proj are linear; the depthwise convolution, A_log and dt_bias
    are kept in 16 bits as biases are (no quantised checkpoint converts them); the gated norm."""
    from ..model.delta_net import projection_parts

    C = cfg.d_model
    groups = [
        TensorGroup(f"linear_attn.{name}", "linear", n, rows, C) for name, rows in projection_parts(cfg)
    ]
    groups += [
        TensorGroup("linear_attn.out_proj", "linear", n, C, cfg.linear_value_dim),
        TensorGroup("linear_attn.conv1d", "bias", n, cfg.linear_conv_dim, cfg.linear_conv_kernel),
        TensorGroup("linear_attn.A_log, dt_bias", "bias", n, 2, cfg.linear_v_heads),
        TensorGroup("linear_attn.norm", "norms", n, 1, cfg.linear_v_head_dim),
    ]
    return groups


def _attention_tensors(cfg: ModelConfig, n: int) -> list[TensorGroup]:
    """An attention block's tensors: the projections (q, k, v, o or MLA's), MLA's latent norms,
    biases, QK-norms, sinks."""
    s = Shapes.of(cfg)
    # DSA's weights_proj (C → a weight per indexer head) is kept 16-bit as a router is: DeepSeek's
    # fp8 checkpoint stores it in bf16, transformers keeps it in fp32 (_keep_in_fp32_modules)
    groups = [
        TensorGroup(name, "router" if name == "indexer_weights_proj" else "linear", n, rows, cols)
        for name, rows, cols in s.attention
    ]
    groups += [
        TensorGroup(name, "norms", n, 1, width)
        for name, width in (("q_a_layernorm", s.Rq), ("kv_a_layernorm", s.Rkv))
        if width
    ]
    if cfg.has_indexer:  # DSA: the indexer key's LayerNorm (γ and β)
        groups.append(TensorGroup("indexer.k_norm", "norms", n, 1, 2 * s.Di))
    if cfg.qkv_bias:
        groups.append(TensorGroup("qkv_bias", "bias", n, 1, s.q_dim + 2 * s.kv_dim))
    if cfg.o_bias:
        groups.append(TensorGroup("o_bias", "bias", n, 1, s.C))
    groups += [
        TensorGroup(name, "norms", n, 1, width)
        for name, width in zip(("q_norm", "k_norm"), cfg.qk_norm_widths)
        if width
    ]
    if cfg.attention_sinks:
        groups.append(TensorGroup("sinks", "bias", n, 1, s.H))
    return groups


def block_tensors(
    cfg: ModelConfig, sparse: bool, linear: bool, n: int, layers: tuple[int, ...] = ()
) -> list[TensorGroup]:
    """The tensors of ``n`` blocks of one kind (dense or sparse; attention or Gated DeltaNet),
    the blocks ``layers`` where given (what a per-module format keeps unconverted is by block)."""
    groups = _block_tensors(cfg, sparse, linear, n)
    return [replace(g, layers=layers) for g in groups] if layers else groups


def _block_tensors(cfg: ModelConfig, sparse: bool, linear: bool, n: int) -> list[TensorGroup]:
    s = Shapes.of(cfg)
    C, F, E, Fe = s.C, s.F, s.E, s.Fe
    groups = _linear_mixer_tensors(cfg, n) if linear else _attention_tensors(cfg, n)
    groups += [TensorGroup(name, "norms", n, 1, norm_params(cfg)) for name in BLOCK_NORMS[cfg.norm_position]]
    if sparse:
        groups += [
            TensorGroup("router", "router", n, E, C),
            TensorGroup("experts.gate_up_proj", "experts", n * E, 2 * Fe, C, parts=2),
            TensorGroup("experts.down_proj", "experts", n * E, C, Fe),
        ]
        if cfg.moe_style == "gpt_oss":  # the router's bias, each expert's two biases
            groups += [
                TensorGroup("router_bias", "bias", n, 1, E),
                TensorGroup("experts.gate_up_proj_bias", "bias", n * E, 1, 2 * Fe),
                TensorGroup("experts.down_proj_bias", "bias", n * E, 1, C),
            ]
        if cfg.shared_expert_gate:  # Qwen's C → 1 gate of the shared expert, kept as a router is
            groups.append(TensorGroup("shared_expert_gate", "router", n, 1, C))
        if s.Fs:  # the shared experts: one SwiGLU, quantised like any dense FFN
            groups += [
                TensorGroup(f"shared_experts.{name}", "linear", n, s.Fs, C)
                for name in ("gate_proj", "up_proj")
            ]
            groups.append(TensorGroup("shared_experts.down_proj", "linear", n, C, s.Fs))
        return groups
    groups += [
        TensorGroup(name, "linear", n, F, C)
        for name in (("gate_proj", "up_proj") if s.n_up == 2 else ("up_proj",))
    ]
    groups.append(TensorGroup("down_proj", "linear", n, C, F))
    if cfg.mlp_bias:
        groups.append(TensorGroup("mlp_bias", "bias", n, 1, s.n_up * F + C))
    return groups


def encoder_decoder_tensors(cfg: ModelConfig) -> list[TensorGroup]:
    """An encoder-decoder's tensors beyond its decoder's: the encoder's blocks (the decoder's
    kind) and each decoder block's cross-attention (q, k, v, o, their biases, its norm)."""
    s, L = Shapes.of(cfg), cfg.n_layers
    encoder = [
        TensorGroup(f"encoder.{g.name}", g.role, g.count, g.rows, g.cols, g.parts)
        for g in block_tensors(cfg, False, False, cfg.encoder_layers)
    ]
    return encoder + [
        TensorGroup("encoder_attn.q_proj", "linear", L, s.q_dim, s.C),
        TensorGroup("encoder_attn.k_proj", "linear", L, s.kv_dim, s.C),
        TensorGroup("encoder_attn.v_proj", "linear", L, s.kv_dim, s.C),
        TensorGroup("encoder_attn.out_proj", "linear", L, s.C, s.q_dim),
        TensorGroup("encoder_attn.bias", "bias", L, 1, s.q_dim + 2 * s.kv_dim + s.C),
        TensorGroup("encoder_attn_layer_norm", "norms", L, 1, norm_params(cfg)),
    ]


def weight_tensors(cfg: ModelConfig) -> list[TensorGroup]:
    """Every parameter tensor of the model by kind (their sizes sum to count_params.total)."""
    s = Shapes.of(cfg)
    kinds = list(zip(cfg.moe_layer_flags, cfg.linear_layer_flags))
    groups = [TensorGroup("embed_tokens", "embeddings", 1, s.V, s.C)]
    if cfg.pos_encoding == "learned" or cfg.is_encoder_decoder:  # an encoder-decoder: one per stack
        tables = 2 if cfg.is_encoder_decoder else 1
        groups.append(TensorGroup("embed_positions", "embeddings", tables, cfg.max_seq_len, s.C))
    if cfg.type_vocab_size:  # BERT's segment table and the norm on the summed embeddings
        groups.append(TensorGroup("embed_token_types", "embeddings", 1, cfg.type_vocab_size, s.C))
    if cfg.embed_norm:
        groups.append(TensorGroup("embed_norm", "norms", 1, 1, norm_params(cfg)))
    for kind in sorted(set(kinds)):
        layers = tuple(i for i, k in enumerate(kinds) if k == kind)
        groups += block_tensors(cfg, *kind, len(layers), layers)
    if cfg.is_encoder_decoder:
        groups += encoder_decoder_tensors(cfg)
    if cfg.final_norm:
        groups.append(TensorGroup("final_norm", "norms", 1, 1, norm_params(cfg)))
    if cfg.lm_head and not cfg.tie_embeddings:
        groups.append(TensorGroup("lm_head", "lm_head", 1, s.V, s.C))
    if cfg.pooler:  # BERT's pooler: a C×C linear layer and its bias
        groups.append(TensorGroup("pooler", "linear", 1, s.C, s.C))
        groups.append(TensorGroup("pooler_bias", "bias", 1, 1, s.C))
    if cfg.vision is not None:  # the image encoder and projector, as one group each (analysis.vision)
        groups.append(TensorGroup("vision_tower", "vision", 1, 1, vision_params(cfg.vision)))
        groups.append(TensorGroup("projector", "vision", 1, 1, projector_params(cfg.vision)))
    return groups


@dataclass(frozen=True)
class WeightQuant:
    """How weights are stored (see the module's docstring); ``of`` fills a format's usual
    group size and scale dtype."""

    dtype: str = "bf16"
    group_size: int = -1
    scale_dtype: str = "fp16"
    zero_point: bool = False
    keep: tuple[str, ...] = field(default=("embeddings", "lm_head", "norms", "router"))
    # the experts of a mixture are quantised by default (they are most of its bytes)
    keep_dtype: str = KEEP_DTYPE  # what the kept tensors and biases are stored in
    block_rows: int = 0  # > 0: scales per block of block_rows × group_size (0: per row's groups)
    layout: str = ""  # a checkpoint's per-module layout (LAYOUTS; stored_weights); "": ours
    double_quant: bool = False  # bnb4: the absmax quantised again (bnb_4bit_use_double_quant)
    storage_bytes: int = 1  # bnb4: the itemsize of the packed weight's dtype (quant_storage)
    # a checkpoint's linear modules kept in ``keep_dtype``: (tensor, the blocks it is kept in),
    # e.g. ("q_proj", (0, 1, …)) (``stored_weights``; counted by ``parts``)
    unconverted: tuple[tuple[str, tuple[int, ...]], ...] = ()
    # bytes each quantised module stores beyond its weight and scales: fbgemm's input_scale_ub
    # (float32), compressed-tensors' static input_scale (the checkpoint's dtype)
    input_scale_bytes: int = 0
    label: str = field(default="", compare=False)  # the format in words (a file's: its label)

    def __str__(self) -> str:
        return self.label or self.dtype

    @classmethod
    def of(
        cls,
        dtype: str,
        group_size: int | None = None,
        scale_dtype: str | None = None,
        zero_point: bool = False,
        keep: tuple | None = None,
        keep_dtype: str = KEEP_DTYPE,
        block_rows: int = 0,
    ) -> "WeightQuant":
        if dtype not in WEIGHT_DTYPES + STORED_ONLY:
            raise AnalysisError(f"weight dtype={dtype!r} must be one of {', '.join(WEIGHT_DTYPES)}")
        quant = cls(
            dtype,
            DEFAULT_GROUP.get(dtype, -1) if group_size is None else group_size,
            scale_dtype or DEFAULT_SCALE_DTYPE.get(dtype, "fp16"),
            zero_point,
            DEFAULT_KEEP if keep is None else tuple(keep),
            keep_dtype,
            block_rows,
        )
        quant.check()
        return quant

    def check(self) -> None:
        if self.dtype not in WEIGHT_DTYPES + STORED_ONLY:
            raise AnalysisError(f"weight dtype={self.dtype!r} must be one of {', '.join(WEIGHT_DTYPES)}")
        if self.layout not in LAYOUTS:
            raise AnalysisError(f"layout={self.layout!r} must be one of {', '.join(map(repr, LAYOUTS))}")
        if self.storage_bytes not in (1, 2, 4, 8):
            raise AnalysisError(f"storage_bytes={self.storage_bytes!r} must be 1, 2, 4 or 8")
        if self.scale_dtype not in SCALE_DTYPES + (("e8m0",) if self.dtype == "mxfp4" else ()):
            raise AnalysisError(f"scale dtype={self.scale_dtype!r} must be one of {', '.join(SCALE_DTYPES)}")
        if isinstance(self.group_size, bool) or not isinstance(self.group_size, int) or self.group_size < -1:
            raise AnalysisError(
                f"group_size={self.group_size!r} must be -1 (one scale per "
                f"tensor), 0 (one per output row) or a group of ≥ 1 inputs"
            )
        unknown = set(self.keep) - set(KEEP_CHOICES)
        if unknown:
            raise AnalysisError(f"keep={sorted(unknown)} must name tensors among {', '.join(KEEP_CHOICES)}")
        if self.keep_dtype not in ("bf16", "fp16", "fp32"):
            raise AnalysisError(f"keep_dtype={self.keep_dtype!r} must be bf16, fp16 or fp32")
        if isinstance(self.block_rows, bool) or not isinstance(self.block_rows, int) or self.block_rows < 0:
            raise AnalysisError(f"block_rows={self.block_rows!r} must be 0 (no blocks) or ≥ 1 rows")
        if self.block_rows and self.group_size < 1:
            raise AnalysisError(f"block_rows={self.block_rows} needs a block width: group_size ≥ 1")
        if self.zero_point and self.dtype not in ("int8", "int4"):
            raise AnalysisError(f"zero points need an integer format (int8, int4), not {self.dtype}")
        for name, layers in self.unconverted:
            if not isinstance(name, str) or not all(isinstance(i, int) and i >= 0 for i in layers):
                raise AnalysisError(f"unconverted={self.unconverted!r} must pair tensor names with blocks")

    @property
    def quantised(self) -> bool:
        return self.dtype in QUANTISED

    def stored_as(self, role: str) -> str:
        """The format a tensor of ``role`` is stored in."""
        if not self.quantised:
            return self.dtype
        if role == "bias" and self.layout == "gptq":  # QuantLinear's bias buffer: fp16
            return "fp16"
        # a multimodal model's vision tower and projector: kept (quantised VLM checkpoints, and
        # LLaMA Lab, leave the image encoder at the compute format)
        if role in ("bias", "vision") or role in self.keep:
            return self.keep_dtype
        return self.dtype

    def n_scales(self, rows: int, cols: int) -> int:
        """Scales of one quantised rows × cols tensor."""
        if self.group_size == -1:
            return 1
        if self.block_rows:
            return math.ceil(rows / self.block_rows) * math.ceil(cols / self.group_size)
        return rows * (1 if self.group_size == 0 else math.ceil(cols / self.group_size))

    def parts(self, group: TensorGroup) -> list[tuple[TensorGroup, str]]:
        """``group`` as the parts stored in one format each, with that format: a linear tensor
        some of whose blocks the checkpoint keeps unconverted (``unconverted``) splits into
        those blocks' share in ``keep_dtype`` and the rest in the quantised format."""
        fmt = self.stored_as(group.role)
        kept_in = dict(self.unconverted).get(group.name, ())
        kept = tuple(i for i in group.layers if i in kept_in)
        if fmt not in QUANTISED or group.role != "linear" or not kept:
            return [(group, fmt)]
        per_block = group.count // len(group.layers)
        rest = tuple(i for i in group.layers if i not in kept_in)
        both = [
            (replace(group, count=per_block * len(kept), layers=kept), self.keep_dtype),
            (replace(group, count=per_block * len(rest), layers=rest), fmt),
        ]
        return [(part, f) for part, f in both if part.count]

    def tensor_bytes(self, group: TensorGroup) -> dict[str, int]:
        """data, scales, zero points and other stored bytes (a checkpoint layout's per-module
        extras: ``module_bytes``) of the ``group``'s tensors, each part in its format (``parts``)."""
        total = {"data": 0, "scales": 0, "zero_points": 0, "other": 0}
        for part, fmt in self.parts(group):
            for key, value in self.part_bytes(part, fmt).items():
                total[key] += value
        return total

    def part_bytes(self, group: TensorGroup, fmt: str) -> dict[str, int]:
        """``tensor_bytes`` of a group stored whole in ``fmt`` (one of ``parts``)."""
        if fmt not in QUANTISED:
            data = math.ceil(group.params * DTYPE_BYTES[fmt])
            return {"data": data, "scales": 0, "zero_points": 0, "other": 0}
        if self.layout:
            modules = group.count * group.parts
            one = self.module_bytes(group.rows // group.parts, group.cols)
            return {key: modules * value for key, value in one.items()}
        bits = BITS[fmt]
        data = group.count * group.rows * math.ceil(group.cols * bits / 8)  # packed per row
        n = self.n_scales(group.rows, group.cols)
        zeros = group.count * math.ceil(n * bits / 8) if self.zero_point else 0  # packed
        return {
            "data": data,
            "scales": group.count * n * SCALE_BYTES[self.scale_dtype],
            "zero_points": zeros,
            "other": group.count * group.parts * self.input_scale_bytes,
        }

    def module_bytes(self, outputs: int, inputs: int) -> dict[str, int]:
        """The tensors a checkpoint layout stores for one quantised linear module of ``inputs``
        (K) and ``outputs`` (N), by part (see ``stored_weights`` for the sources)."""
        N, K = outputs, inputs
        if self.layout == "gptq":
            bits = BITS[self.dtype]
            group = K if self.group_size <= 0 else self.group_size
            groups = math.ceil(K / group)
            return {
                "data": (K // 32 * bits) * N * 4,  # qweight int32 (K // 32 · bits, N)
                "scales": groups * N * 2,  # scales fp16 (⌈K/g⌉, N)
                "zero_points": groups * (N // 32 * bits) * 4,  # qzeros int32 (⌈K/g⌉, N // 32 · bits)
                "other": K * 4,  # g_idx int32 (K,)
            }
        if self.layout == "bnb8":
            return {
                "data": N * K,  # weight int8 (N, K)
                "scales": N * 4,  # SCB float32 (N,)
                "zero_points": 0,
                "other": 1,  # weight_format uint8, a 0-d tensor
            }
        n, s = N * K, self.storage_bytes
        blocks = math.ceil(n / self.group_size)
        blob = {"quant_type": self.dtype, "blocksize": self.group_size}
        blob.update({"dtype": TORCH_DTYPE_NAMES[self.keep_dtype], "shape": [N, K]})
        other = BNB_CODE_BYTES  # quant_map float32 (16,)
        if self.double_quant:
            scales = blocks + math.ceil(blocks / BNB_NESTED_BLOCK) * 4  # absmax uint8, nested_absmax f32
            other += BNB_NESTED_CODE_BYTES  # nested_quant_map float32 (256,)
            blob.update({"nested_blocksize": BNB_NESTED_BLOCK, "nested_dtype": "float32"})
            blob_bytes = len(json.dumps({**blob, "nested_offset": 0.0})) - len("0.0") + BNB_OFFSET_CHARS
        else:
            scales = blocks * 4  # absmax float32 (⌈n/64⌉,)
            blob_bytes = len(json.dumps(blob))
        return {
            "data": (n + 1) // (2 * s) * s,  # weight: ((n+1) // (2·itemsize), 1) of quant_storage
            "scales": scales,
            "zero_points": 0,
            "other": other + blob_bytes,  # + quant_state.bitsandbytes__<type> uint8 (the JSON)
        }

    def row_bytes(self, role: str, cols: int) -> float:
        """Bytes read for one row of a tensor of ``role`` (an embedding row gathered for a
        token): its data and its share of the scales and zero points."""
        fmt = self.stored_as(role)
        if fmt not in QUANTISED:
            return cols * DTYPE_BYTES[fmt]
        groups: float = 1 if self.group_size <= 0 else math.ceil(cols / self.group_size)
        if self.block_rows:  # a row's share of its blocks' scales
            groups /= self.block_rows
        per_scale = SCALE_BYTES[self.scale_dtype] + (BITS[fmt] / 8 if self.zero_point else 0)
        return math.ceil(cols * BITS[fmt] / 8) + groups * per_scale

    def to_dict(self) -> dict:
        return {
            "dtype": self.dtype,
            "group_size": self.group_size,
            "scale_dtype": self.scale_dtype,
            "zero_point": self.zero_point,
            "keep": list(self.keep) if self.quantised else [],
            "keep_dtype": self.keep_dtype if self.quantised else self.dtype,
            "block_rows": self.block_rows,
            "layout": self.layout,
        }


def stored_weights(stored: StoredQuant) -> WeightQuant:
    """The stored format a checkpoint's quantization_config declares (``config.hf.quant.stored_quant``).

    AWQ's GEMM int4 packs eight 4-bit weights per int32 (qweight K × R/8), one fp16 scale per
    group of inputs of each output (scales K/g × R) and, with zero points, eight 4-bit zeros per
    int32 (qzeros K/g × R/8); the embeddings, the head, the norms and a router are not linear
    layers it quantises and stay in the checkpoint's dtype. Block-wise fp8 (DeepSeek-V3, Kimi
    K2): every linear layer's e4m3 weight and its float32 ``weight_scale_inv`` of ⌈R/r⌉ × ⌈K/c⌉
    blocks; the same tensors kept in the checkpoint's dtype. MXFP4 (gpt-oss): every expert's
    gate_up and down as ``*_blocks`` (e2m1, two per byte) and ``*_scales`` (one e8m0 byte per 32
    inputs of a row); everything else, the experts' biases included, in the checkpoint's dtype.

    GPTQ (layout "gptq"), per linear module of K inputs and N outputs, as QuantLinear registers
    its buffers — AutoGPTQ ``auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py`` and
    ``qlinear_exllama.py`` ``__init__``, GPTQModel ``gptqmodel/nn_modules/qlinear/__init__.py``
    ``GPTQQuantLinear._register_gptq_buffers`` — and ``pack`` fills them (GPTQModel ``pack_block``
    registers ``g_idx`` from the quantiser for every layer, and casts ``scales`` and ``bias`` to
    float16): qweight int32 (K // 32 · bits, N), qzeros int32 (⌈K/g⌉, N // 32 · bits) — for
    ``sym`` too —, scales fp16 (⌈K/g⌉, N), g_idx int32 (K,) — with or without ``desc_act`` —,
    bias fp16 (N,) where the layer has one; g = K for ``group_size`` -1. The linear modules are
    every block's attention and FFN projections (a mixture: each expert's gate, up and down) and,
    with ``lm_head: true``, the head; the embeddings, norms and router stay in the checkpoint's
    dtype (AutoGPTQ's model definitions, e.g. ``auto_gptq/modeling/mixtral.py``, list the
    attention and the experts, not the router). GPTQModel's packer refuses K or N not divisible
    by 32; the floor is AutoGPTQ's buffer shape for them.

    bitsandbytes 4-bit (layout "bnb4"), per nn.Linear transformers converts (``integrations/
    bitsandbytes.py`` ``replace_with_bnb_linear``; not the skipped modules, by default the head),
    as ``Linear4bit._save_to_state_dict`` writes the weight, its bias and
    ``QuantState.as_dict(packed=True)`` (bitsandbytes ``nn/modules.py``, ``functional.py``;
    shapes from ``_ops.py``'s ``quantize_4bit``): weight ((n+1) // (2·itemsize), 1) in
    ``quant_storage`` for n = N·K; absmax float32 (⌈n/64⌉,) — with double quant uint8 (⌈n/64⌉,)
    plus nested_absmax float32 (⌈⌈n/64⌉/256⌉,) and nested_quant_map float32 (256,) —; quant_map
    float32 (16,); ``quant_state.bitsandbytes__nf4`` (or ``__fp4``) uint8, the UTF-8 of
    ``json.dumps`` of quant_type, blocksize, dtype and shape [N, K] (``utils.pack_dict_to_tensor``)
    — exact, except with double quant, whose JSON also holds ``nested_offset``, a float whose
    digits depend on the weights (BNB_OFFSET_CHARS assumed: a few bytes per module off); the bias
    in the checkpoint's dtype. bitsandbytes 8-bit (layout "bnb8", ``Linear8bitLt
    ._save_to_state_dict``): weight int8 (N, K), SCB float32 (N,) (``int8_vectorwise_quant``'s
    row stats), weight_format uint8 (a 0-d tensor); the bias in the checkpoint's dtype."""
    label = stored.label()
    if stored.method == "mxfp4":  # the experts only; attention, router, embeddings, head: as stored
        quant = WeightQuant.of(
            "mxfp4",
            group_size=stored.group_size,
            scale_dtype="e8m0",
            keep=DEFAULT_KEEP + ("linear",),
            keep_dtype=stored.dtype,
        )
    elif stored.method == "fp8":
        quant = WeightQuant.of(
            "fp8",
            group_size=stored.group_size,  # -1: one 0-d scale per tensor
            block_rows=stored.block_rows,
            scale_dtype="fp32",
            keep=tuple(k for k in DEFAULT_KEEP if not (k == "lm_head" and stored.lm_head)),
            keep_dtype=stored.dtype,
        )
        quant = replace(quant, input_scale_bytes=4 if stored.static_input else 0)  # activation_scale
    elif stored.method in ("fbgemm_fp8", "compressed-tensors"):
        fbgemm = stored.method == "fbgemm_fp8"
        quant = WeightQuant.of(
            "fp8",
            group_size=stored.group_size,  # 0: one scale per output row; -1: one per tensor
            scale_dtype="fp32" if fbgemm else stored.dtype,
            keep=tuple(k for k in DEFAULT_KEEP if not (k == "lm_head" and stored.lm_head)),
            keep_dtype=stored.dtype,
        )
        extra = 4 if fbgemm else (DTYPE_BYTES[stored.dtype] if stored.static_input else 0)
        quant = replace(quant, input_scale_bytes=int(extra))
    elif stored.method in ("gptq", "bitsandbytes"):
        keep = tuple(k for k in DEFAULT_KEEP if not (k == "lm_head" and stored.lm_head))
        if stored.method == "gptq":
            dtype, group, scale, zeros, layout = f"int{stored.bits}", stored.group_size, "fp16", True, "gptq"
            group = 0 if group == -1 else group  # one group over a row's inputs: one scale per row
        elif stored.bits == 8:
            dtype, group, scale, zeros, layout = "int8", 0, "fp32", False, "bnb8"
        else:
            dtype, group, scale, zeros, layout = stored.quant_type, stored.group_size, "fp32", False, "bnb4"
        quant = WeightQuant(
            dtype,
            group,
            scale,
            zeros,
            keep,
            stored.dtype,
            layout=layout,
            double_quant=stored.double_quant,
            storage_bytes=BNB_STORAGE_BYTES.get(stored.storage, 1) if layout == "bnb4" else 1,
        )
        quant.check()
    else:
        quant = WeightQuant.of(
            "int4",
            group_size=stored.group_size,
            scale_dtype="fp16",
            zero_point=stored.zero_point,
            keep=DEFAULT_KEEP,
            keep_dtype=stored.dtype,
        )
    unconverted = tuple((module.split(".")[-1], layers) for module, layers in stored.unconverted)
    return replace(quant, label=label, unconverted=unconverted)


def as_weight_quant(weights: "WeightQuant | str") -> WeightQuant:
    return weights if isinstance(weights, WeightQuant) else WeightQuant.of(weights)


@dataclass(frozen=True)
class WeightBytes:
    quant: dict[str, Any]  # WeightQuant.to_dict()
    total: int
    quantised: int  # data of the quantised tensors
    scales: int
    zero_points: int
    kept: int  # tensors stored in 16 bits (or the float format itself)
    by_role: dict[str, int]  # role → bytes
    by_tensor: list[dict[str, Any]]  # one row per tensor kind
    other: int = 0  # a checkpoint layout's per-module extras (GPTQ's g_idx, bitsandbytes' state)

    def to_dict(self) -> dict:
        return {
            "quant": self.quant,
            "total": self.total,
            "quantised": self.quantised,
            "scales": self.scales,
            "zero_points": self.zero_points,
            "other": self.other,
            "kept": self.kept,
            "by_role": self.by_role,
            "by_tensor": self.by_tensor,
        }


def buffer_tensors(cfg: ModelConfig) -> list[TensorGroup]:
    """Checkpoint tensors that are not parameters: DeepSeek-V3's router correction bias (one
    float32 per expert of every sparse layer; it steers the choice, no gradient trains it).
    Llama 4's sigmoid router has none."""
    if not cfg.is_moe or cfg.moe_scoring != "sigmoid" or cfg.moe_style != "standard":
        return []
    return [
        TensorGroup("e_score_correction_bias", "float32_buffer", sum(cfg.moe_layer_flags), 1, cfg.n_experts)
    ]


def check_unconverted(cfg: ModelConfig, quant: WeightQuant) -> None:
    """A checkpoint's unconverted modules must be linear tensors of ``cfg``'s blocks (the
    names ``config.hf.quant.DENSE_LINEARS`` gives them): refused by name otherwise."""
    if not quant.unconverted:
        return
    names = {g.name for g in weight_tensors(cfg) if g.role == "linear" and g.layers}
    missing = [name for name, _ in quant.unconverted if name not in names]
    if missing:
        raise AnalysisError(
            f"the checkpoint keeps {', '.join(missing)} unconverted, which this model's blocks do "
            f"not have as linear tensors: per-module formats are modelled for dense blocks"
        )


def weights_bytes(cfg: ModelConfig, weights: "WeightQuant | str" = "bf16") -> WeightBytes:
    """Every weight's bytes in ``weights``' format, quantisation scales included, and the
    checkpoint's float32 buffers (``buffer_tensors``)."""
    quant = as_weight_quant(weights)
    if quant.layout and cfg.fused_keys:
        raise AnalysisError(
            f"a {quant.label or quant.layout} checkpoint of a model with fused_keys (Phi-3's "
            f"qkv_proj and gate_up_proj) is not modelled: its layout is counted per linear module"
        )
    rows: list[dict[str, Any]] = []
    by_role: dict[str, int] = {}
    totals = {"quantised": 0, "scales": 0, "zero_points": 0, "other": 0, "kept": 0}
    check_unconverted(cfg, quant)
    stored = [(g, "fp32") for g in buffer_tensors(cfg)]  # float32 in the checkpoint and in memory
    for group, fmt in [part for g in weight_tensors(cfg) for part in quant.parts(g)] + stored:
        parts = (
            {"data": group.params * 4, "scales": 0, "zero_points": 0, "other": 0}
            if group.role == "float32_buffer"
            else quant.part_bytes(group, fmt)
        )
        size = sum(parts.values())
        totals["quantised" if fmt in QUANTISED else "kept"] += parts["data"]
        totals["scales"] += parts["scales"]
        totals["zero_points"] += parts["zero_points"]
        totals["other"] += parts["other"]
        by_role[group.role] = by_role.get(group.role, 0) + size
        rows.append(
            {
                "tensor": group.name,
                "role": group.role,
                "count": group.count,
                "shape": [group.rows, group.cols],
                "stored_as": fmt,
                **parts,
                "bytes": size,
            }
        )
    return WeightBytes(
        quant=quant.to_dict(), total=sum(r["bytes"] for r in rows), by_role=by_role, by_tensor=rows, **totals
    )


def unconverted_bytes(cfg: ModelConfig, quant: WeightQuant) -> int:
    """The bytes of the linear modules a checkpoint keeps unconverted (``WeightQuant.unconverted``),
    in its dtype: what the Inference systems page names beside the stored format."""
    if not quant.unconverted or not quant.quantised:
        return 0
    rows = weights_bytes(cfg, quant).by_tensor
    return sum(r["bytes"] for r in rows if r["role"] == "linear" and r["stored_as"] not in QUANTISED)


@lru_cache(maxsize=256)
def dominant_format(cfg: ModelConfig, quant: WeightQuant) -> str:
    """The stored format most of the matmul weights' bytes are in (linear layers, experts and
    the head: what a decode step streams), e.g. fp8 for Meta's Llama-3.1-405B-FP8, whose
    attention stays in bf16."""
    by_format: dict[str, int] = {}
    for row in weights_bytes(cfg, quant).by_tensor:
        if row["role"] in ("linear", "experts", "lm_head"):
            by_format[row["stored_as"]] = by_format.get(row["stored_as"], 0) + row["bytes"]
    return max(by_format, key=lambda fmt: by_format[fmt]) if by_format else quant.dtype


def group_label(group_size: int) -> str:
    """How a format's scales are grouped, in words: -1 one per tensor, 0 one per output row."""
    return {-1: "one per tensor", 0: "one per output row"}.get(group_size, f"groups of {group_size}")


def kv_head_bytes(kv_dtype: str, head_dim: int) -> int:
    """Bytes of one token's K (or V) for one KV head: D elements (int4 packed two per byte),
    plus, for int8 and int4, that row's fp16 scale (symmetric, one per token and head)."""
    scale = kv_scale_bytes(kv_dtype)  # checks the name first
    return math.ceil(head_dim * BITS[kv_dtype] / 8) + scale


def kv_scale_bytes(kv_dtype: str) -> int:
    """The scale an integer KV cache stores per token and KV head (0 for float formats)."""
    if kv_dtype not in KV_DTYPES:
        raise AnalysisError(f"KV dtype={kv_dtype!r} must be one of {', '.join(KV_DTYPES)}")
    return int(DTYPE_BYTES[KV_SCALE_DTYPE]) if kv_dtype in ("int8", "int4") else 0
