"""Where a decoder's parameters, FLOPs and memory go: closed-form counts, each written once with
its factors commented (``params``, ``flops``, ``kv``, ``memory``, ``rooflines``), the same
parameter count read from the module on the meta device, the fvcore cross-check
(``cross_check``) and the ``analyze`` view (``summary``). Sizes come from ``shapes.Shapes``.

Symbols: V vocab, C = d_model, L layers, H query heads, G KV heads, D head dim, F ffn_hidden,
B batch, T new tokens per sequence, S keys attended (cached + new), b bytes per element.
FLOPs count 2 per multiply-add.
"""

from ..config import MAX_BATCH
from ..errors import AnalysisError
from .activations import (
    ACTIVATION_ASSUMPTIONS,
    ActivationEstimate,
    activation_bytes,
    activation_estimate,
    autocast_activation_bytes,
    finetune_activation_bytes,
    finetune_activation_estimate,
)
from .common import TRAINING_DTYPES
from .flash import AttentionMemory, attention_memory, flash_layer_bytes, hbm_elements, naive_layer_bytes
from .flops import (
    ELEMENTWISE_FLOPS_PER_ELEMENT,
    FLOP_CONVENTIONS,
    MFU_CONVENTION,
    FlopCount,
    count_flops,
    decode_flops,
    elementwise_flops,
    matmul_flops,
    model_flops,
    scores_overtake_ffn_at,
)
from .kv import (
    KVCacheReport,
    attention_variants,
    gqa_kv_heads,
    kv_cache,
    kv_cache_bytes,
    kv_cache_bytes_per_token,
    max_batch_that_fits,
    max_context_that_fits,
    naive_mla_bytes_per_token,
    state_bytes,
    weight_bytes,
)
from .memory import (
    SHARDED_STATES,
    SHARDINGS,
    MemoryEstimate,
    inference_activation_bytes,
    inference_memory,
    training_memory,
)
from .params import (
    COMPONENT_OF,
    COMPONENTS,
    DETAIL_KEYS,
    ParamCount,
    count_params,
    count_params_module,
    largest_parameter,
    layer_param_detail,
    norm_params,
    palm_params,
)
from .quant import (
    KEEP_CHOICES,
    KV_DTYPES,
    SCALE_DTYPES,
    WEIGHT_DTYPES,
    TensorGroup,
    WeightBytes,
    WeightQuant,
    kv_head_bytes,
    stored_weights,
    weight_tensors,
    weights_bytes,
)
from .rooflines import DEFAULT_GPU, Roofline, experts_hit, roofline, roofline_table
from .shapes import Shapes
from .speculative import MAX_GAMMA, Speculation, expected_tokens_per_step, speculation, speedup
from .summary import analyze, format_analysis

__all__ = [
    "AttentionMemory",
    "attention_memory",
    "flash_layer_bytes",
    "hbm_elements",
    "naive_layer_bytes",
    "MAX_GAMMA",
    "Speculation",
    "expected_tokens_per_step",
    "speculation",
    "speedup",
    "KEEP_CHOICES",
    "KV_DTYPES",
    "SCALE_DTYPES",
    "WEIGHT_DTYPES",
    "TensorGroup",
    "WeightBytes",
    "WeightQuant",
    "kv_head_bytes",
    "weight_tensors",
    "stored_weights",
    "weights_bytes",
    "ACTIVATION_ASSUMPTIONS",
    "COMPONENTS",
    "COMPONENT_OF",
    "DEFAULT_GPU",
    "DETAIL_KEYS",
    "ELEMENTWISE_FLOPS_PER_ELEMENT",
    "FLOP_CONVENTIONS",
    "MFU_CONVENTION",
    "MAX_BATCH",
    "SHARDED_STATES",
    "SHARDINGS",
    "TRAINING_DTYPES",
    "ActivationEstimate",
    "AnalysisError",
    "FlopCount",
    "KVCacheReport",
    "MemoryEstimate",
    "ParamCount",
    "Roofline",
    "Shapes",
    "activation_bytes",
    "finetune_activation_bytes",
    "finetune_activation_estimate",
    "autocast_activation_bytes",
    "activation_estimate",
    "analyze",
    "attention_variants",
    "count_flops",
    "count_params",
    "count_params_module",
    "largest_parameter",
    "decode_flops",
    "elementwise_flops",
    "experts_hit",
    "format_analysis",
    "gqa_kv_heads",
    "inference_activation_bytes",
    "inference_memory",
    "kv_cache",
    "kv_cache_bytes",
    "kv_cache_bytes_per_token",
    "state_bytes",
    "naive_mla_bytes_per_token",
    "layer_param_detail",
    "matmul_flops",
    "model_flops",
    "max_batch_that_fits",
    "max_context_that_fits",
    "norm_params",
    "palm_params",
    "roofline",
    "roofline_table",
    "scores_overtake_ffn_at",
    "training_memory",
    "weight_bytes",
]
