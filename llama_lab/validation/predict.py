"""``predict decode|train``: one workload's time, as the roofline bound and the calibrated
estimate with its kind's interval at ``INTERVAL_LEVEL`` (``intervals``: built on the fit half's
errors, its coverage measured on the held-out half)."""

from __future__ import annotations

import math
import re
from functools import cache

from ..analysis import MFU_CONVENTION, kv_cache_bytes, model_flops
from ..analysis.finetune import FinetuneSpec
from ..analysis.finetune_step import (
    finetune_flops,
    finetune_memory,
    fits,
    max_batch_that_fits,
    max_seq_len_that_fits,
)
from ..analysis.parallel import Layout, bubble_fraction, check_layout, parallel_memory
from ..analysis.quant import WeightQuant, as_weight_quant
from ..config import ModelConfig, require_decoder_only
from ..config.hf.quant import StoredQuant
from ..errors import LabError
from ..runtime.hardware import CUDA_CONTEXT_BYTES, GPU, GPUS, VLLM_GPU_MEMORY_UTILIZATION
from .efficiency import (
    Efficiency,
    decode_tokens_per_s,
    finetune_seconds,
    prefill_seconds,
    shipped_cross_validated,
    static_batch_seconds,
    train_seconds_by_term,
    train_tokens_per_s_per_gpu,
)
from .engine import (
    ENGINE_DEFAULTS_SOURCE,
    ENGINES,
    LATEST_ENGINE,
    engine_profile_defaults,
    vllm_kv_tokens,
    weights_per_gpu,
)
from .intervals import Interval, kind_interval
from .validate import results


def find_gpu(name: str) -> GPU:
    """A GPU of the table by name, case, spaces, dashes and underscores free (``h100-80gb``)."""
    key = re.sub(r"[\s_\-]", "", str(name).lower())
    for gpu in GPUS.values():
        if re.sub(r"[\s_\-]", "", gpu.name.lower()) == key:
            return gpu
    raise LabError(f"--gpu {name!r} must be one of: {', '.join(GPUS)} (case and spaces free)")


@cache
def shipped_interval(kind: str) -> Interval:
    """``kind``'s interval with the shipped parameters: the one ``validate``'s summary states."""
    return kind_interval(results(Efficiency.load()), kind, unseen=shipped_cross_validated())


def interval(estimate: float, kind: str, bound: float | None = None) -> tuple[float, float]:
    """(low, high) of what would be measured for an estimate of a rate or an amount: every
    surface's interval (``predict``, the KV and Many GPUs pages, the Validation page's table),
    ending at the roofline ``bound`` where given (no measurement beats it)."""
    low, high = shipped_interval(kind).around(estimate)
    return (low, high) if bound is None else (min(low, bound), min(high, bound))


def time_interval(seconds: float, kind: str, bound: float | None = None) -> tuple[float, float]:
    """``interval`` for a time: the rate's interval, inverted (at least the ``bound``'s time)."""
    low, high = interval(1 / seconds, kind, None if bound is None else 1 / bound)
    return 1 / high, 1 / low


def interval_from(kind: str) -> str:
    """Where ``kind``'s interval comes from, in words, with its level."""
    i = shipped_interval(kind)
    return f"{i.level:.0%} interval from {i.built_from}"


def _band(bound: float, estimate: float, kind: str) -> dict[str, float]:
    low, high = interval(estimate, kind, bound)
    return {"bound": bound, "estimate": estimate, "low": low, "high": high}


def _time_band(bound: float, estimate: float, kind: str) -> dict[str, float]:
    """``_band`` for seconds (the least time, the estimate, and its interval)."""
    low, high = time_interval(estimate, kind, bound)
    return {"bound": bound, "estimate": estimate, "low": low, "high": high}


def matmul_format(weights: "WeightQuant | str", activations: str | None) -> str:
    """The format a serving step's matmuls compute in: bf16 (fp16) activations, whatever the
    weights are stored in (weight-only quantisation dequantises), or fp8 / int8 activations
    with weights of the same format (W8A8: dynamic activation quantisation)."""
    if activations in (None, "bf16", "fp16"):
        return activations or "bf16"
    if activations not in ("fp8", "int8"):
        raise LabError(f"--activation-dtype {activations!r} must be one of bf16, fp16, fp8, int8")
    if as_weight_quant(weights).dtype != activations:
        raise LabError(
            f"--activation-dtype {activations} needs --weight-dtype {activations} (W8A8: both "
            f"operands of a matmul in {activations}; the weights are {weights})"
        )
    return activations


def refuse_sparse_pattern(cfg: ModelConfig, command: str) -> None:
    """The time predictions are calibrated on dense and sliding-window kernels that serving and
    training engines run; a sparse pattern (global tokens, dilation, random blocks) has no such
    kernel or measurement: refused by name (``analyze`` counts its FLOPs and cache exactly)."""
    p = cfg.sparse_pattern
    if p is not None:
        used = [f"global_tokens={p.global_tokens}"] * (p.global_tokens > 0)
        used += [f"dilation={p.dilation}"] * (p.dilation > 1) + [f"random_blocks={p.random_blocks}"] * (
            p.random_blocks > 0
        )
        raise LabError(
            f"{command} is not predicted for a sparse attention pattern ({', '.join(used)}): its "
            f"times are calibrated on dense and sliding-window kernels; analyze counts its FLOPs and "
            f"KV cache exactly"
        )


def predict_decode(
    cfg: ModelConfig,
    gpu: GPU,
    gpus: int = 1,
    tp: int | None = None,
    batch: int = 1,
    prompt_len: int = 128,
    new_tokens: int = 128,
    weights: "WeightQuant | str" = "bf16",
    kv: str = "bf16",
    gpu_memory_utilization: float = VLLM_GPU_MEMORY_UTILIZATION,
    max_num_batched_tokens: int | None = None,
    max_num_seqs: int | None = None,
    engine: str = LATEST_ENGINE,
    activations: str | None = None,
    runtime: str = "compiled",
) -> dict:
    """Generated tokens per second summed over the batch and milliseconds per decode step, the
    matmuls computing in ``activations`` (None: bf16; fp8 or int8: the weights and the
    activations quantised, W8A8, at that format's tensor peak); the
    batch's time to its first token (``ttft_ms``: the prompts' prefill) and its whole run
    (``e2e_s``: prefill and ``new_tokens`` steps, a static batch as TensorRT-LLM's throughput
    tables run it); and the tokens a vLLM-style paged cache holds at ``gpu_memory_utilization``
    (``memory.kv_cache_tokens``; the engine's profiling batch ``max_num_batched_tokens`` over
    ``max_num_seqs`` sequences, `vllm serve`'s defaults for the GPU where not given; sized as
    ``engine``'s release counts memory, ``engine.ENGINES``: the latest read by default).
    ``runtime``: "compiled" (CUDA graphs or torch.compile, as the fitted serving rows ran) or
    "eager" (each kernel launched from the host: ``launch_s`` per kernel the forward launches).
    ``weights``: a format's name, or a checkpoint's stored format (``analysis.stored_weights``),
    counted module by module where the file keeps some unconverted: the memory and the bytes
    each step streams are those of each module's own format (``quant.WeightQuant.parts``)."""
    refuse_sparse_pattern(cfg, "predict decode")
    require_decoder_only(cfg, "predict decode")
    if not 0 < gpu_memory_utilization <= 1:
        raise LabError(
            f"--gpu-memory-utilization {gpu_memory_utilization:g} must be above 0 and at most 1 "
            f"(the share of the GPU's memory the engine may fill)"
        )
    compute = matmul_format(weights, activations)
    gpu.peak_flops(compute)  # a format the GPU has no tensor cores for is refused by name
    tp = tp or gpus
    if tp != gpus:
        raise LabError(
            f"--tp {tp} must equal --gpus {gpus}: decode is predicted for one tensor-parallel group"
        )
    check_layout(cfg, Layout(gpus, tp))  # the layout rules of ``parallel`` and ``predict train``
    if prompt_len + new_tokens > cfg.max_seq_len:
        raise LabError(
            f"--prompt-len {prompt_len} + --new-tokens {new_tokens} exceeds the model's "
            f"max_seq_len={cfg.max_seq_len}"
        )
    eff = Efficiency.load()
    kind = "decode_bs1" if batch == 1 else "decode_batched"
    p = decode_tokens_per_s(cfg, gpu, batch, prompt_len, new_tokens, weights, kv, tp, eff, compute, runtime)
    tokens = _band(p.bound, p.estimate, kind)
    ms = {key: 1000 * batch / value for key, value in tokens.items()}
    ms["low"], ms["high"] = ms["high"], ms["low"]  # fewer tokens per second: more ms per token
    prefill = prefill_seconds(cfg, gpu, batch, prompt_len, weights, tp, eff, True, compute, runtime)
    ttft = _time_band(prefill.bound, prefill.estimate, "prefill")
    # the whole static batch (the Validation rows' static_batch_seconds): its prefill, then
    # new_tokens steps; the interval adds the two parts' intervals (each part's error its kind's)
    run = static_batch_seconds(
        cfg, gpu, batch, prompt_len, new_tokens, weights, kv, tp, eff, compute, runtime
    )
    e2e = {key: ttft[key] + new_tokens * ms[key] / 1000 for key in ("low", "high")}
    e2e = {"bound": run.bound, "estimate": run.estimate, **e2e}
    defaults = engine_profile_defaults(gpu)
    profile = (max_num_batched_tokens or defaults[0], max_num_seqs or defaults[1])
    cache = vllm_kv_tokens(cfg, gpu, weights, kv, gpu_memory_utilization, *profile, tp, eff, engine)
    low, high = interval(cache.estimate, "kv_capacity", cache.bound)
    memory = serving_memory(cfg, gpu, tp, batch, prompt_len + new_tokens, weights, kv)
    memory["kv_cache_tokens"] = {"estimate": cache.estimate, "low": low, "high": high}
    memory["engine"] = {
        "gpu_memory_utilization": gpu_memory_utilization,
        "max_num_batched_tokens": profile[0],
        "max_num_seqs": profile[1],
        "defaults_from": ENGINE_DEFAULTS_SOURCE,
        "sized_as": ENGINES[engine].source,
    }
    return {
        "gpu": gpu.name,
        "tp": tp,
        "memory": memory,
        "batch": batch,
        "prompt_len": prompt_len,
        "new_tokens": new_tokens,
        "weight_dtype": str(weights),
        "activation_dtype": compute,
        "runtime": runtime,
        "kv_dtype": kv,
        "tokens_per_s": tokens,
        "ms_per_token": ms,
        "ttft_ms": {key: 1000 * value for key, value in ttft.items()},
        "e2e_s": e2e,
        "interval_from": f"{interval_from(kind)}; time to first token: {interval_from('prefill')}; "
        f"cache tokens: {interval_from('kv_capacity')} (python -m llama_lab validate)",
        "parameters": eff.to_dict(),
    }


def serving_memory(
    cfg: ModelConfig, gpu: GPU, tp: int, batch: int, seq_len: int, weights: "WeightQuant | str", kv: str
) -> dict:
    """Whether the weights and the cache of ``batch`` sequences of ``seq_len`` fit each of ``tp``
    GPUs, with the reserves named: the device's reported memory, the CUDA context, the margin
    left; and the smallest vLLM-style gpu_memory_utilization (the share of the reported memory
    the engine may fill, here counting its CUDA context) that holds them, against its default.
    One GPU's weights and cache are the Many GPUs page's: ``layouts.gpu_weight_bytes`` and the
    one cache rule (``kv.layer_token_bytes``: G/tp KV heads and at least one, MLA's latent whole)."""
    need = weights_per_gpu(cfg, weights, tp) + kv_cache_bytes(cfg, seq_len, batch, kv, tp)
    utilization = (need + CUDA_CONTEXT_BYTES) / gpu.memory_bytes
    return {
        "reported_bytes": gpu.memory_bytes,
        "reported_source": gpu.memory_source,
        "cuda_context_bytes": CUDA_CONTEXT_BYTES,
        "weights_and_cache_bytes_per_gpu": math.ceil(need),
        "margin_bytes": gpu.usable_bytes - math.ceil(need),
        "fits": need <= gpu.usable_bytes,
        "gpu_memory_utilization_needed": utilization,
        "vllm_default_gpu_memory_utilization": VLLM_GPU_MEMORY_UTILIZATION,
        "fits_at_vllm_default": utilization <= VLLM_GPU_MEMORY_UTILIZATION,
    }


def predict_train(cfg: ModelConfig, gpu: GPU, layout: Layout, seq_len: int, dtype: str = "bf16") -> dict:
    """Tokens per second per GPU and MFU of a training layout, and whether its states fit.
    ``dtype`` fp8: the GEMMs in fp8 (torchao's Float8 linears, Megatron's fp8 recipe: bounded at
    the fp8 dense peak, estimated at the fitted fp8 share), the master weights, gradients,
    optimizer states and saved activations counted as in bf16 mixed precision."""
    refuse_sparse_pattern(cfg, "predict train")
    require_decoder_only(cfg, "predict train")
    eff = Efficiency.load()
    memory = parallel_memory(cfg, layout, seq_len, "bf16" if dtype == "fp8" else dtype)
    bubble = bubble_fraction(layout) if layout.pp > 1 else 0.0
    matmuls_in = "fp8" if dtype == "fp8" else "bf16"
    gpu.peak_flops(matmuls_in)  # refuses fp8 on a GPU without fp8 tensor cores (an A100)
    experts = {"ep": layout.ep, "cp": layout.cp, "micro_batch": layout.micro_batch}
    p = train_tokens_per_s_per_gpu(
        cfg, gpu, seq_len, layout.recompute, matmuls_in, eff, layout.tp, bubble, **experts
    )
    terms = train_seconds_by_term(cfg, gpu, seq_len, layout.recompute, matmuls_in, eff, layout.tp, **experts)
    terms["pipeline_bubble"] = 1 / p.estimate - sum(terms.values())  # the terms sum to 1 / estimate
    tokens = _band(p.bound, p.estimate, "train")
    per_token = model_flops(cfg, seq_len) / seq_len  # MFU_CONVENTION: the model's FLOPs, once
    mfu = {key: tokens[key] * per_token / gpu.peak_bf16_flops for key in ("bound", "estimate")}
    total = memory.per_gpu["total_bytes"]
    return {
        "gpu": gpu.name,
        "layout": layout.label(),
        "micro_batches": layout.m,
        "global_batch": layout.dp * layout.micro_batch * layout.m,  # sequences per step
        "seq_len": seq_len,
        "tokens_per_s_per_gpu": tokens,
        # GPU-seconds per token by term (a mixture of experts': its dense matmuls, expert GEMMs,
        # all-to-all and dispatch copies apart): they sum to 1 / the estimate
        "seconds_per_token_by_term": terms,
        "mfu": mfu,
        "fits": total <= gpu.usable_bytes,
        "per_gpu_bytes": total,
        "gpu_memory_bytes": gpu.usable_bytes,
        "interval_from": f"{interval_from('train')} (python -m llama_lab validate)",
        "dtype": dtype,
        "conventions": f"MFU: {MFU_CONVENTION} (against the bf16 peak, fp8 runs too). The "
        "times: the FLOPs the kernels run, 3 × the causal forward per token (+1 forward under "
        "full recomputation); the bound runs those at the dense peaks, so its MFU in model FLOPs "
        "can exceed 1 (the masked half of the scores is counted, never run)",
        "parameters": eff.to_dict(),
    }


def predict_finetune(
    cfg: ModelConfig,
    gpu: GPU,
    spec: FinetuneSpec,
    seq_len: int,
    batch: int,
    stored: StoredQuant | None = None,
) -> dict:
    """One GPU's fine-tuning step (``analysis.finetune``): trainable parameters as PEFT counts
    them, the peak bytes by part (``peak_bytes``: the count × ``finetune_memory_factor``, with the
    ``finetune_memory`` kind's interval), whether that fits, the longest context and the largest
    batch that fit by the same rule, and tokens per second
    (``efficiency.finetune_seconds``, the ``finetune_throughput`` kind's interval)."""
    refuse_sparse_pattern(cfg, "predict finetune")
    require_decoder_only(cfg, "predict finetune")
    memory = finetune_memory(cfg, spec, seq_len, batch, stored)
    work = finetune_flops(cfg, spec, seq_len, batch)
    eff = Efficiency.load()
    step = finetune_seconds(cfg, gpu, spec, seq_len, batch, eff)
    tokens = batch * seq_len
    factor = eff.finetune_memory_factor
    peak = memory.peak_bytes * factor
    low, high = interval(peak, "finetune_memory")
    return {
        "gpu": gpu.name,
        "method": spec.method,
        "seq_len": seq_len,
        "batch": batch,
        "trainable_params": memory.trainable_params,
        "frozen_params": memory.frozen_params,
        "peak_bytes": {
            "counted": memory.peak_bytes,
            "factor": factor,
            "estimate": round(peak),
            "low": round(low),
            "high": round(high),
        },
        "by_part": memory.by_part,
        "phases": memory.phases,
        "chunked_loss": memory.chunked_loss,
        "fits": fits(memory, gpu, factor),
        # by the same rule: the count × finetune_memory_factor against the GPU's usable bytes
        "longest_seq_len_that_fits": max_seq_len_that_fits(cfg, spec, gpu, batch, stored, factor),
        "largest_batch_that_fits": max_batch_that_fits(cfg, spec, gpu, seq_len, stored, factor),
        "gpu_memory_bytes": gpu.usable_bytes,
        "tokens_per_s": _band(tokens / step.bound, tokens / step.estimate, "finetune_throughput"),
        "step_flops": {"matmuls": work.matmuls, "attention_scores": work.scores, **work.by_term},
        "dequant_bytes": work.dequant_bytes,
        "notes": memory.notes,
        "interval_from": f"tokens/s: {interval_from('finetune_throughput')}; peak bytes: "
        f"{interval_from('finetune_memory')} (python -m llama_lab validate)",
    }
