"""A serving engine's KV-cache budget, as vLLM sizes it, predicted from LLaMA Lab's counts.

vLLM (V0 from 0.6.4, V1; read in its released sources) gives the cache what is left of
``gpu_memory_utilization`` × the device's memory once the weights, the activations of a
profiling forward and the memory outside PyTorch are taken:

    blocks = ⌊(utilization × memory − weights − profile activations − other) / block bytes⌋

and reports ``blocks × 16`` tokens ("GPU KV cache size: N tokens", or "# GPU blocks: N"). A block
holds 16 tokens of every layer's K and V for the KV heads one GPU keeps: the lab's one rule
(``analysis.kv.layer_token_bytes``: ``max(1, G // tp)`` heads, as vLLM's get_num_kv_heads; MLA's
latent whole on every rank, vLLM's "When using MLA during decode it becomes MQA"). The weights
one GPU holds are the Many GPUs page's (``analysis.layouts.gpu_weight_bytes``).
The profiling forward runs the engine's ``max_num_batched_tokens`` tokens spread over its
``max_num_seqs`` sequences, each sampling its last position only.

The **bound** takes nothing but the weights (the most the cache could get at that utilization);
the **estimate** also takes LLaMA Lab's count of the profiling forward's activations and the
fitted ``engine_reserve_bytes``: what the device's reported memory holds beyond what CUDA
reports to the engine, the CUDA context, NCCL's buffers and the other allocations outside
PyTorch. CUDA graphs are captured after the cache is sized (not subtracted).
"""

from __future__ import annotations

import math
from functools import lru_cache

from ..analysis.kv import kv_cache_bytes_per_token
from ..analysis.layouts import gpu_weight_bytes
from ..analysis.memory import inference_activation_bytes
from ..analysis.parallel import Layout
from ..config import ModelConfig
from ..runtime.hardware import GPU
from .efficiency import COUNTS_CACHED, Efficiency, Prediction

BLOCK_TOKENS = 16  # vLLM's block size on CUDA

# `vllm serve`'s profiling batch when the command line leaves it (vLLM V1, 0.9.2–0.11.0,
# vllm/engine/arg_utils.py EngineArgs.get_batch_defaults, OPENAI_API_SERVER): 8,192 tokens over
# at most 1,024 sequences on a GPU of ≥ 70 GiB that is not an A100 ("For GPUs like H100 and
# MI300x"), else 2,048 tokens over 256 — the settings the Validation rows record for each log
ENGINE_DEFAULTS_SOURCE = (
    "vllm serve's defaults (vLLM V1 0.9.2–0.11.0, vllm/engine/arg_utils.py get_batch_defaults): "
    "8192 tokens, 1024 sequences on a GPU of ≥ 70 GiB other than an A100; else 2048 and 256"
)


def engine_profile_defaults(gpu: GPU) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) `vllm serve` profiles with on ``gpu`` by default."""
    large = gpu.memory_bytes >= 70 * 2**30 and "a100" not in gpu.name.lower()
    return (8192, 1024) if large else (2048, 256)


def kv_bytes_per_token_per_gpu(cfg: ModelConfig, kv: str, tp: int) -> int:
    """K and V of one token on one GPU of ``tp`` (the one rule: ``kv.layer_token_bytes``)."""
    return kv_cache_bytes_per_token(cfg, kv, tp)


@lru_cache(maxsize=COUNTS_CACHED)
def weights_per_gpu(cfg: ModelConfig, weights: str, tp: int) -> int:
    """The weights one GPU of a ``tp``-way group holds (the Many GPUs page's rule)."""
    return sum(gpu_weight_bytes(cfg, weights, Layout(tp, tp)).values())


@lru_cache(maxsize=COUNTS_CACHED)
def profile_activation_bytes(cfg: ModelConfig, tokens: int, seqs: int, tp: int) -> float:
    """One GPU's share of the activations of the profiling forward: ``tokens`` spread over
    ``seqs`` sequences (at most one per token), the last position of each sampled."""
    seqs = min(seqs, tokens)
    return inference_activation_bytes(cfg, math.ceil(tokens / seqs), seqs, "bf16", last_only=True) / tp


def profile_peak_bytes(cfg: ModelConfig, weights: str, tokens: int, seqs: int, tp: int) -> int:
    """PyTorch's peak during the profiling forward on one GPU: the weights and its activations."""
    return math.ceil(weights_per_gpu(cfg, weights, tp) + profile_activation_bytes(cfg, tokens, seqs, tp))


def vllm_kv_tokens(
    cfg: ModelConfig,
    gpu: GPU,
    weights: str,
    kv: str,
    utilization: float,
    profile_tokens: int,
    profile_seqs: int,
    tp: int,
    eff: Efficiency,
) -> Prediction:
    """Tokens of KV cache vLLM allots (module docstring): the bound, and the estimate."""
    budget = utilization * gpu.memory_bytes - weights_per_gpu(cfg, weights, tp)
    taken = profile_activation_bytes(cfg, profile_tokens, profile_seqs, tp) + eff.engine_reserve_bytes
    block = BLOCK_TOKENS * kv_bytes_per_token_per_gpu(cfg, kv, tp)

    def tokens(free: float) -> float:
        return BLOCK_TOKENS * max(0, math.floor(free / block))

    return Prediction(tokens(budget), tokens(budget - taken))
