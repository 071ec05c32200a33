"""A serving engine's KV-cache budget, as vLLM sizes it, predicted from LLaMA Lab's counts.

vLLM (read in its released sources, 0.6.4.post1 to 0.11.0: ``vllm/worker/worker.py``
``determine_num_available_blocks`` in V0, ``vllm/v1/worker/gpu_worker.py``
``determine_available_memory`` in V1, ``vllm/utils.py`` ``memory_profiling`` / ``MemorySnapshot``)
gives the cache what is left of ``gpu_memory_utilization`` × the device's memory as CUDA reports
it (``torch.cuda.mem_get_info()[1]``) once the weights, PyTorch's peak during a profiling forward
and the memory outside PyTorch are taken:

    blocks = ⌊(U × CUDA's total − weights − profile peak − non-torch) / block bytes⌋

and reports ``blocks × 16`` tokens ("GPU KV cache size: N tokens", or "# GPU blocks: N"). A block
holds 16 tokens of every layer's K and V for the KV heads one GPU keeps: the lab's one rule
(``analysis.kv.layer_token_bytes``: ``max(1, G // tp)`` heads, as vLLM's get_num_kv_heads; MLA's
latent whole on every rank, vLLM's "When using MLA during decode it becomes MQA"). The weights
one GPU holds are the Many GPUs page's (``analysis.layouts.gpu_weight_bytes``).

Each term, as the sources define it:

* **CUDA's total**: the device's reported memory less ``CUDA_RESERVED_BYTES``, what the driver
  keeps from CUDA, read from vLLM's own logs (below).
* **profile peak**: the most the profiling run holds beyond the weights — ``max_num_batched_tokens``
  tokens through vLLM's own blocks (its fused norms, merged gate_up and fused MoE keep less
  alive than LLaMA Lab's model: ``forward_stage_elements``), or the sampling of each of
  ``max_num_seqs`` sequences' last position after it, the logits in bf16 and the sampler's
  float32 copy (V1's ``_dummy_sampler_run``; V0's ``profile_run`` samples too: ``Sampler``
  casts the logits ``.to(torch.float)``).
* **non-torch**, by what each release measures (``ENGINES``): V0 0.6.4–0.6.5 and V1 0.8.x count
  every byte on the device outside PyTorch's allocations (``mem_get_info`` used − torch
  allocated): the CUDA context too (``runtime.hardware.CUDA_CONTEXT_BYTES``). V0 0.6.6 on and V1
  0.9.2 on count the increase since a snapshot taken after the context: not the context. Up to
  0.10.x that snapshot precedes the tensor-parallel group's set-up, so under tp > 1 its
  collective buffers count (``COLLECTIVE_BYTES``: vLLM's custom all-reduce, an 8 MiB buffer and
  8 MiB more of metadata per rank); 0.11.0 takes it after ("Initialize the distributed
  environment BEFORE taking memory snapshot"). Every release counts ``engine_non_torch_bytes``
  (fitted): cuBLAS workspaces, NCCL's own buffers and the attention backends' allocations.

CUDA graphs are captured after the cache is sized and not subtracted in any of these releases
(0.11.0 logs their size, for ``--kv-cache-memory``, only). The **bound** takes nothing but the
weights (the most the cache could get at that utilization of the device's reported memory).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from ..analysis.kv import kv_cache_bytes_per_token
from ..analysis.layouts import gpu_weight_bytes
from ..analysis.parallel import Layout
from ..analysis.quant import WeightQuant
from ..analysis.shapes import Shapes
from ..config import ModelConfig
from ..runtime.hardware import CUDA_CONTEXT_BYTES, DTYPE_BYTES, GPU
from .efficiency import COUNTS_CACHED, Efficiency, Prediction

BLOCK_TOKENS = 16  # vLLM's block size on CUDA
# vLLM's custom all-reduce per rank (vllm/distributed/device_communicators/custom_all_reduce.py,
# 0.6.4–0.11.0: max_size=8192 * 1024; create_shared_buffer(max_size) for the buffer and
# create_shared_buffer(ops.meta_size() + max_size) for the signals), allocated outside PyTorch
COLLECTIVE_BYTES = 2 * 8192 * 1024
# nvidia-smi's total less the total vLLM logs (torch.cuda.mem_get_info): an H100 80GB's 81,559 MiB
# are "total_gpu_memory (79.22GiB)" (vllm-project/vllm PRs #10511 and #12126: 0.427 GiB less); an
# RTX 4090's 24,564 MiB are 23.08 / 0.98 = 23.55 GiB (issue #13061: 0.437 GiB less); an RTX 3090's
# 24,576 MiB "total_gpu_memory=23.58GiB" (issue #10517: 0.42 GiB less)
CUDA_RESERVED_BYTES = round(0.43 * 2**30)


@dataclass(frozen=True)
class Engine:
    """What one run of vLLM releases counts as memory outside PyTorch (module docstring)."""

    context: bool  # the CUDA context (used − torch allocated, no snapshot)
    collectives: bool  # a tensor-parallel group's buffers (snapshot before the group's set-up)
    source: str


ENGINES = {
    "vllm-v0-0.6.4": Engine(
        True,
        True,
        "vLLM V0 0.6.4–0.6.5 (vllm/worker/worker.py determine_num_available_blocks: "
        "non_torch_allocations = (mem_get_info total − free) − allocated_bytes.all.current)",
    ),
    "vllm-v0-0.6.6": Engine(
        False,
        True,
        "vLLM V0 0.6.6–0.10 (vllm/utils.py memory_profiling: the non-torch increase since the "
        "worker's baseline, taken in init_device after the context, before "
        "init_worker_distributed_environment)",
    ),
    "vllm-v1-0.8": Engine(
        True,
        True,
        "vLLM V1 0.8.x (vllm/v1/worker/gpu_worker.py determine_available_memory: as V0 0.6.4)",
    ),
    "vllm-v1-0.9": Engine(
        False,
        True,
        "vLLM V1 0.9.2–0.10.x (gpu_worker.py: memory_profiling from init_snapshot, taken before "
        "init_worker_distributed_environment)",
    ),
    "vllm-v1-0.11": Engine(
        False,
        False,
        "vLLM V1 0.11.0 (gpu_worker.py init_device: 'Initialize the distributed environment BEFORE "
        "taking memory snapshot'; CUDA graphs captured after, not subtracted)",
    ),
}
LATEST_ENGINE = "vllm-v1-0.11"  # what `predict decode` sizes the cache as

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
def weights_per_gpu(cfg: ModelConfig, weights: "WeightQuant | str", tp: int) -> int:
    """The weights one GPU of a ``tp``-way group holds (the Many GPUs page's rule)."""
    return sum(gpu_weight_bytes(cfg, weights, Layout(tp, tp)).values())


# vLLM's fused MoE sizes its three intermediate caches for at most this many tokens and loops over
# chunks beyond it (vllm/envs.py VLLM_FUSED_MOE_CHUNK_SIZE, default "32768", 0.6.x–0.9.x;
# vllm/model_executor/layers/fused_moe/fused_moe.py fused_experts: M = min(num_tokens, CHUNK_SIZE))
FUSED_MOE_CHUNK_TOKENS = 32768


def forward_stage_elements(cfg: ModelConfig, tp: int) -> tuple[float, float, float]:
    """Elements per token one of ``tp`` GPUs holds at the peak of each stage of a block of vLLM's
    model in its profiling forward, as (attention, dense FFN, routed experts' per-token share
    beside their caches). vLLM's blocks (vllm/model_executor/models/llama.py, qwen2.py,
    qwen3.py: ``LlamaDecoderLayer.forward``, ``LlamaMLP.forward``) run the norms in place
    (``fused_add_rms_norm``), so every stage holds the layer loop's input and the residual
    (2·C) and:

    * attention, at ``o_proj``: every projection's output (the head-sharded ones 1/tp; MLA's
      q_a and kv_a are replicated), the attention kernel's output (H·Dv/tp), o_proj's output
      (C, before its all-reduce), and under qk_norm the normed copies of q and k;
    * a dense FFN, at ``SiluAndMul``: its input (C), the merged gate_up output (2·F/tp) and
      the activation's (F/tp) — ``x, _ = self.gate_up_proj(x); x = self.act_fn(x)`` frees
      gate_up before ``down_proj`` — (a plain FFN: up and its activation, 2·F/tp); a
      mixture's shared experts the same at their width;
    * a mixture's routed experts: the input, the output (``torch.empty_like``), the shared
      experts' output, the router's logits (E) — the caches are ``moe_cache_elements``."""
    s = Shapes.of(cfg)
    C, F, Fs = s.C, s.F, s.Fs
    replicated = ("q_a_proj", "kv_a_proj_with_mqa")
    projections = [(name, rows) for name, rows, _ in s.attention if name != "o_proj"]
    attention = sum(rows if name in replicated else rows / tp for name, rows in projections)
    attention += s.H * (s.Dv or s.D) / tp + C
    if cfg.qk_norm:
        attention += (s.q_dim + s.kv_dim) / tp
    dense = C + (s.n_up + 1) * F / tp
    shared = C + (s.n_up + 1) * Fs / tp if Fs else 0.0
    routed = 2 * C + (C if Fs else 0) + s.E
    ffn = max(dense if not all(cfg.moe_layer_flags) else 0.0, shared)
    return 2 * C + attention, 2 * C + ffn, 2 * C + routed


def moe_cache_elements(cfg: ModelConfig, tp: int) -> float:
    """Elements per token of vLLM's fused-MoE caches on one of ``tp`` GPUs (``fused_experts``):
    cache1 (M, k, 2·Fe/tp: gate and up), cache2 (M·k, Fe/tp: the activation) and cache3 (M, k, C:
    each expert's output), alive together; a plain expert's cache1 is Fe/tp wide."""
    s = Shapes.of(cfg)
    return s.K * ((s.n_up + 1) * s.Fe / tp + s.C)


@lru_cache(maxsize=COUNTS_CACHED)
def profile_activation_bytes(cfg: ModelConfig, tokens: int, seqs: int, tp: int) -> float:
    """The most one GPU of ``tp`` holds beyond its weights during vLLM's profiling run:
    ``tokens`` through vLLM's model (``forward_stage_elements`` at 2 bytes, the fused-MoE caches
    for at most ``FUSED_MOE_CHUNK_TOKENS``), or, after it, the sampling of the last position of
    each of ``seqs`` sequences (at most one per token) with the forward's output still held
    (``sampler_logits_bytes``), whichever is larger. Derived from vLLM's sources, then checked:
    the RTX 3090 log of issue #10517 gives 17.06 GiB at 20,000 tokens and 17.98 at 29,000 for
    Llama-3.1-8B (peak_torch_memory), these 17.02 and 17.95 with the weights' 14.96 (this rule
    was written after that held-out log showed the lab's own model's count 0.6 to 0.9 GiB high)."""
    b = DTYPE_BYTES["bf16"]
    attention, dense, routed = forward_stage_elements(cfg, tp)
    forward = tokens * max(attention, dense)
    if cfg.is_moe:
        caches = min(tokens, FUSED_MOE_CHUNK_TOKENS) * moe_cache_elements(cfg, tp)
        forward = max(forward, tokens * routed + caches)
    after = b * tokens * cfg.d_model + sampler_logits_bytes(cfg, seqs, tokens)
    return max(b * forward, after)


def profile_peak_bytes(
    cfg: ModelConfig, weights: "WeightQuant | str", tokens: int, seqs: int, tp: int
) -> int:
    """PyTorch's peak during the profiling run on one GPU: the weights and
    ``profile_activation_bytes``."""
    return math.ceil(weights_per_gpu(cfg, weights, tp) + profile_activation_bytes(cfg, tokens, seqs, tp))


def sampler_logits_bytes(cfg: ModelConfig, seqs: int, tokens: int) -> int:
    """The logits of the profiling run's sequences (one row of the vocabulary for each of
    ``min(seqs, tokens)``) in bf16 and the sampler's float32 copy (V1's ``_dummy_sampler_run``;
    V0's ``Sampler`` casts them ``.to(torch.float)``)."""
    return (2 + 4) * min(seqs, tokens) * cfg.vocab_size


def non_torch_bytes(engine: str, tp: int, eff: Efficiency) -> float:
    """The memory outside PyTorch that ``engine``'s release takes from the cache (module docstring)."""
    e = ENGINES[engine]
    collectives = COLLECTIVE_BYTES if tp > 1 and e.collectives else 0
    return eff.engine_non_torch_bytes + (CUDA_CONTEXT_BYTES if e.context else 0) + collectives


def vllm_kv_tokens(
    cfg: ModelConfig,
    gpu: GPU,
    weights: "WeightQuant | str",
    kv: str,
    utilization: float,
    profile_tokens: int,
    profile_seqs: int,
    tp: int,
    eff: Efficiency,
    engine: str = LATEST_ENGINE,
) -> Prediction:
    """Tokens of KV cache ``engine`` (a release of ``ENGINES``) allots (module docstring): the
    bound, and the estimate."""
    bound = utilization * gpu.memory_bytes - weights_per_gpu(cfg, weights, tp)
    peak = profile_peak_bytes(cfg, weights, profile_tokens, profile_seqs, tp)  # the weights too
    free = utilization * (gpu.memory_bytes - CUDA_RESERVED_BYTES) - peak
    block = BLOCK_TOKENS * kv_bytes_per_token_per_gpu(cfg, kv, tp)

    def tokens(free: float) -> float:
        return BLOCK_TOKENS * max(0, math.floor(free / block))

    return Prediction(tokens(bound), tokens(free - non_torch_bytes(engine, tp, eff)))
