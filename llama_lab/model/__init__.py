"""A configurable decoder-only Transformer: anything between the 2017 recipe and LLaMA-3.

``build_model(cfg, device=None, dtype=None)`` returns a ``CausalLM`` whose state-dict keys are
those of transformers' ``LlamaForCausalLM`` and whose RoPE uses its rotate-half convention.
Parts: ``kernels`` (the two custom autograd Functions beside their references), ``norms``,
``positions``, ``fused``, ``attention``, ``mla`` (DeepSeek's multi-head latent attention),
``mlp``, ``kv_cache``, ``decoder``, ``init``, ``checkpoint``; ``encoder_decoder``: the 2017
encoder-decoder (transformers' ``MarianMTModel``), which ``build_model`` returns for a config
with ``encoder_layers`` > 0.
"""

from .attention import (
    Attention,
    attention_mask,
    causal_attention,
    matmul_attention,
    reference_attention,
)
from .checkpoint import LoadedCheckpoint, checkpoint_files, load_checkpoint
from .decoder import BLOCK_NORMS, CausalLM, DecoderBody, DecoderLayer
from .encoder_decoder import EncoderDecoderCache, EncoderDecoderLM, marian_sinusoidal_table
from .fused import FusedLinear, keep_part_keys, part_tensors
from .init import INIT_STD, build_encoder_decoder, build_model, init_weights  # INIT_STD: from config
from .kernels import rms_norm, rms_norm_reference, swiglu, swiglu_reference
from .kv_cache import KVCache
from .mla import LatentAttention
from .mlp import MLP, ExpertLoop, Experts, GptOssExperts, GptOssMoE, Llama4Experts, Llama4MoE, MoE, SparseMoE
from .norms import RMSNorm, make_norm
from .positions import (
    PositionTables,
    apply_rope,
    apply_rope_interleaved,
    rope_cos_sin,
    rope_inv_freq,
    rotate_half,
    sinusoidal_table,
)

__all__ = [
    "Attention",
    "BLOCK_NORMS",
    "CausalLM",
    "DecoderBody",
    "DecoderLayer",
    "EncoderDecoderCache",
    "EncoderDecoderLM",
    "ExpertLoop",
    "Experts",
    "Llama4Experts",
    "Llama4MoE",
    "GptOssExperts",
    "GptOssMoE",
    "FusedLinear",
    "INIT_STD",
    "KVCache",
    "LatentAttention",
    "LoadedCheckpoint",
    "MLP",
    "MoE",
    "PositionTables",
    "RMSNorm",
    "SparseMoE",
    "apply_rope",
    "apply_rope_interleaved",
    "attention_mask",
    "build_encoder_decoder",
    "build_model",
    "causal_attention",
    "checkpoint_files",
    "init_weights",
    "keep_part_keys",
    "load_checkpoint",
    "make_norm",
    "marian_sinusoidal_table",
    "part_tensors",
    "reference_attention",
    "rms_norm",
    "rms_norm_reference",
    "rope_cos_sin",
    "rope_inv_freq",
    "matmul_attention",
    "rotate_half",
    "sinusoidal_table",
    "swiglu",
    "swiglu_reference",
]
