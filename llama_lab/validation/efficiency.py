"""Time predictions: the roofline **bound** from LLaMA Lab's exact FLOPs and bytes and the GPU's
data sheet, and a calibrated **estimate** from a few named efficiency parameters.

Decode (one token per sequence per step): the step reads the weights in their stored format and
the KV cache (``analysis.roofline``); over ``tp`` GPUs each reads its own weights and cache, by the
Many GPUs page's per-GPU rules (``roofline(..., tp=tp)``: the KV heads G/tp and at least one,
MLA's latent whole on every rank; norms and the latent projections whole). Every matmul runs at
the dense peak of the format it computes in (``GPU.peak_flops``: bf16, or fp8/int8 where the
activations are quantised too; weight-only formats compute in bf16). The estimate divides
the memory time by the fraction of HBM bandwidth the weight format's kernels reach
(``decode_bw``), the compute time by ``matmul`` (``matmul_fp8`` where the matmuls compute in fp8),
and adds a fixed cost per block per step
(``layer_s``: kernel launches and synchronisation) and, under tensor parallelism, a per-block
all-reduce latency (``tp_layer_s``); an eager run (no torch.compile, no CUDA graphs) adds
``launch_s`` per kernel its forward launches (``analysis.launches``), to decode and prefill.
Prefill: the larger of compute at ``matmul`` × peak
(``matmul_fp8`` × the fp8 peak for fp8 matmuls) and
memory at the 16-bit bandwidth share, plus a fixed floor (``prefill_floor_s``). Training: the
FLOPs per token (3 × the causal forward, one forward more under full recomputation) bound
tokens/s per GPU: the matmuls at their format's peak (fp8 for fp8 training), the causal
attention scores at bf16's (FlashAttention). The estimate runs the matmuls at ``train_bf16`` of
the peak (``train_fp8`` of the fp8 peak for runs whose matmuls are fp8) and the causal attention
scores at ``train_attention`` (FlashAttention's kernels reach a lower share than a GEMM, and long
contexts are mostly scores); a tensor-parallel group adds its all-reduces / reduce-scatters at
``tp_link`` of the GPU's own link (``hardware.link_bytes_per_s``: its NVLink, or PCIe, within its
scale-up domain); a pipeline idles its bubble. A mixture of experts splits its
matmuls: the dense parts as above, the routed experts' grouped GEMMs, their all-to-all and the
dispatcher's copies as ``moe_step`` counts them (``moe_gemm``: the share of a dense GEMM's rate
grouped GEMMs reach).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from functools import cache, lru_cache
from pathlib import Path

from ..analysis import count_flops, roofline
from ..analysis.experts import FORWARD, INPUT_GRAD, WEIGHT_GRAD, expert_flops_per_token, train_passes
from ..analysis.finetune import FinetuneSpec
from ..analysis.finetune_step import FinetuneFlops, finetune_flops, finetune_memory
from ..analysis.launches import forward_launches
from ..analysis.layouts import LayoutCost
from ..analysis.parallel import Layout, parallel_memory, tp_forward_bytes
from ..analysis.quant import BITS, WeightQuant, as_weight_quant, dominant_format
from ..config import ModelConfig
from ..errors import LabError
from ..runtime.hardware import GPU, RUNTIMES, link_bytes_per_s
from .moe_step import moe_seconds_per_token

PARAMS_FILE = Path(__file__).with_name("efficiency.json")


def format_class(weights: "WeightQuant | str", cfg: ModelConfig | None = None) -> str:
    """Whose bandwidth share a weight format's decode kernels take, by its bits per weight
    (fp32 weights, rare in serving, take the 16-bit share: uncalibrated). A checkpoint that
    keeps some modules unconverted streams each module's own bytes (the roofline counts them
    per module) at the share of the format most of its matmul weights' bytes are in
    (``quant.dominant_format``: one share per step, as the fit has one per format)."""
    quant = as_weight_quant(weights)
    bits = BITS[dominant_format(cfg, quant) if cfg is not None and quant.unconverted else quant.dtype]
    return "16-bit" if bits >= 16 else "8-bit" if bits >= 8 else "4-bit"


@dataclass(frozen=True)
class Efficiency:
    """The named parameters of the estimate (defaults: before any fit)."""

    decode_bw: dict[str, float] = field(default_factory=lambda: {"16-bit": 0.8, "8-bit": 0.6, "4-bit": 0.5})
    matmul: float = 0.6  # share of the matmul peak prefill reaches
    matmul_fp8: float = 0.6  # the same for matmuls that compute in fp8, of the fp8 peak
    layer_s: float = 10e-6  # per block per decode step
    launch_s: float = 10e-6  # per kernel launched by an eager (uncompiled) forward
    tp_layer_s: float = 20e-6  # per block per decode step, added under tensor parallelism
    prefill_floor_s: float = 5e-3
    train_bf16: float = 0.4  # share of the bf16 peak a training step's matmuls reach
    train_fp8: float = 0.5  # the same for fp8 matmuls, of the fp8 peak
    moe_gemm: float = 0.5  # share of a dense GEMM's rate (its format's) grouped expert GEMMs reach
    train_attention: float = 0.3  # share of the bf16 peak the causal attention scores reach
    tp_link: float = 0.8  # share of the GPU's link bandwidth tensor-parallel collectives reach
    memory_factor: float = 1.0  # a training run's measured peak over the bytes LLaMA Lab counts
    finetune_matmul: float = 0.4  # share of the peak a one-GPU fine-tuning step's matmuls reach
    finetune_memory_factor: float = 1.0  # a fine-tuning step's measured peak over the bytes counted
    engine_non_torch_bytes: float = 0.0  # outside PyTorch, counted by every vLLM release

    MEANING = {
        "decode_bw": "share of HBM bandwidth a decode step reaches, per weight format",
        "matmul": "share of the matmul peak (its compute format's) prefill reaches",
        "matmul_fp8": "share of the fp8 dense peak prefill reaches where its matmuls compute in fp8 "
        "(TensorRT-LLM's fp8 engines; compute-bound decode too): fp8 GEMMs reach a lower share of their "
        "own, doubled peak than 16-bit ones do of theirs",
        "layer_s": "seconds per block per decode step (launches, synchronisation)",
        "launch_s": "seconds per kernel an eager forward (no torch.compile, no CUDA graphs) adds: the "
        "host's Python, dispatch and launch of each operator (analysis.launches counts them)",
        "tp_layer_s": "seconds per block per decode step added by tensor parallelism (all-reduces)",
        "prefill_floor_s": "fixed seconds a served request's time to first token adds "
        "(scheduling, launch, sampling)",
        "train_bf16": "share of the bf16 peak a training step's matmuls reach",
        "train_fp8": "share of the fp8 peak a training step's fp8 matmuls reach",
        "train_attention": "share of the bf16 peak a training step's causal attention scores reach "
        "(QKᵀ and PV: FlashAttention's kernels, which long contexts are mostly made of)",
        "tp_link": "share of the GPU's own link bandwidth (a direction: NVLink 4's 450 GB/s on H100/H200, "
        "NVLink 5's 900 on B200/GB200, NVLink 3's 300 on A100, PCIe on PCIe cards; the inter-node "
        "network beyond the scale-up domain) a tensor-parallel group's all-reduces and "
        "reduce-scatters, and an expert-parallel all-to-all, reach",
        "memory_factor": "a training run's measured peak memory over the bytes LLaMA Lab counts for its "
        "layout (the allocator's cache and fragmentation, communication buffers, the CUDA context)",
        "finetune_matmul": "share of its compute dtype's dense peak a one-GPU fine-tuning step's matmuls "
        "reach (PEFT's and torchtune's loops: small batches, frozen layers' input gradients only)",
        "finetune_memory_factor": "a fine-tuning step's measured peak over the bytes LLaMA Lab counts for it "
        "(the caching allocator's reserve and fragmentation, the CUDA context where the source counts it)",
        "engine_non_torch_bytes": "bytes outside PyTorch every vLLM release takes from its KV-cache budget "
        "beyond those counted from its sources (the CUDA context where counted, the custom all-reduce "
        "buffers): cuBLAS workspaces, NCCL's buffers, attention backends' allocations",
        "moe_gemm": "share of a dense GEMM's rate (train_bf16 / train_fp8 of its format's peak; "
        "finetune_matmul's on one GPU) a mixture of experts' grouped expert GEMMs reach, each also capped "
        "by its own shape's roofline; fitted on the MoE training rows alone",
    }

    def matmul_share(self, compute: str) -> float:
        """The share of ``compute``'s dense peak an inference matmul reaches: ``matmul_fp8`` for
        fp8, else ``matmul``."""
        return self.matmul_fp8 if compute == "fp8" else self.matmul

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def load(cls) -> "Efficiency":
        """The fitted parameters (``tools/fit_efficiency.py``), or the defaults before a fit;
        read once per process (pages ask on every rerun)."""
        return _shipped()


@cache
def _shipped() -> Efficiency:
    if not PARAMS_FILE.exists():
        return Efficiency()
    return Efficiency(**json.loads(PARAMS_FILE.read_text())["parameters"])


@cache
def _shipped_cross_validated() -> dict[str, float]:
    if not PARAMS_FILE.exists():
        return {}
    return json.loads(PARAMS_FILE.read_text()).get("cross_validated", {})


def shipped_cross_validated() -> dict[str, float]:
    """Each fit row's log ratio under the shipped fit made without it (``validate.cross_validated``,
    written by ``tools/fit_efficiency.py``): what the intervals are built from."""
    return dict(_shipped_cross_validated())


# The counts an estimate starts from do not depend on the efficiency parameters: the fit tries
# thousands of parameter values on the same rows, and a page asks for the same layouts on every
# rerun, so each count is made once (bounded caches of pure functions of frozen inputs).
COUNTS_CACHED = 4096


@lru_cache(maxsize=COUNTS_CACHED)
def _roofline(
    cfg: ModelConfig,
    gpu: GPU,
    batch: int,
    tokens: int,
    phase: str,
    weights,
    kv: str | None = None,
    tp: int = 1,
    compute: str = "bf16",
):
    return roofline(cfg, gpu, batch, tokens, compute, phase, weights, kv, tp=tp)


@dataclass(frozen=True)
class Prediction:
    bound: float  # the roofline's (the best the hardware allows)
    estimate: float  # with the efficiency parameters


def tp_link_seconds(cfg: ModelConfig, gpu: GPU, tp: int, tokens: int, eff: Efficiency) -> float:
    """Seconds a ``tp``-way group's forward over ``tokens`` tokens spends in its all-reduces
    (``analysis.parallel.tp_forward_bytes``) at the link share ``tp_link`` of the link the group
    crosses on ``gpu`` (``hardware.link_bytes_per_s``: NVLink 4, 5, 3 or PCIe by GPU)."""
    return tp_forward_bytes(cfg, tp, tokens) / (link_bytes_per_s(gpu, tp) * eff.tp_link)


def launch_seconds(cfg: ModelConfig, tokens: int, runtime: str, eff: Efficiency) -> float:
    """Seconds an eager forward of ``tokens`` new tokens adds for its kernel launches
    (``analysis.launches.forward_launches`` × ``launch_s``); none when compiled (CUDA graphs or
    torch.compile, as the other rows ran)."""
    if runtime not in RUNTIMES:
        raise LabError(f"--runtime {runtime!r} must be one of {', '.join(RUNTIMES)}")
    return forward_launches(cfg, tokens) * eff.launch_s if runtime == "eager" else 0.0


def decode_step(
    cfg: ModelConfig,
    gpu: GPU,
    batch: int,
    context: int,
    weights: "WeightQuant | str",
    kv: str,
    tp: int,
    eff: Efficiency,
    compute: str = "bf16",
    runtime: str = "compiled",
) -> Prediction:
    """Seconds of one decode step of ``batch`` sequences at ``context`` tokens on ``tp`` GPUs
    (one GPU's roofline: its FLOPs, at ``compute``'s peak, and the bytes it reads; in a
    ``tp``-way group a fixed cost per block and the step's all-reduces of the batch's
    activations, ``analysis.parallel.tp_forward_bytes``, at the link share ``tp_link``)."""
    r = _roofline(cfg, gpu, batch, context, "decode", weights, kv, tp, compute)
    bound = max(r.compute_time_s, r.memory_time_s)
    share = eff.decode_bw[format_class(weights, cfg)]
    fixed = cfg.n_layers * (eff.layer_s + (eff.tp_layer_s if tp > 1 else 0.0))
    fixed += tp_link_seconds(cfg, gpu, tp, batch, eff) + launch_seconds(cfg, batch, runtime, eff)
    matmul = eff.matmul_share(compute)
    return Prediction(bound, max(r.compute_time_s / matmul, r.memory_time_s / share) + fixed)


def decode_tokens_per_s(
    cfg: ModelConfig,
    gpu: GPU,
    batch: int,
    prompt_len: int,
    new_tokens: int,
    weights: "WeightQuant | str",
    kv: str,
    tp: int,
    eff: Efficiency,
    compute: str = "bf16",
    runtime: str = "compiled",
) -> Prediction:
    """Generated tokens per second summed over the batch, at the generation's mean context."""
    context = max(1, prompt_len + new_tokens // 2)
    step = decode_step(cfg, gpu, batch, context, weights, kv, tp, eff, compute, runtime)
    return Prediction(batch / step.bound, batch / step.estimate)


def static_batch_seconds(
    cfg: ModelConfig,
    gpu: GPU,
    batch: int,
    prompt_len: int,
    new_tokens: int,
    weights: "WeightQuant | str",
    kv: str,
    tp: int,
    eff: Efficiency,
    compute: str = "bf16",
    runtime: str = "compiled",
) -> Prediction:
    """Seconds of a static batch's whole run, as TensorRT-LLM's throughput tables and ``predict
    decode``'s ``e2e_s`` count it: the prompts' prefill to the first token, then ``new_tokens``
    decode steps at the generation's mean context."""
    first = prefill_seconds(cfg, gpu, batch, prompt_len, weights, tp, eff, True, compute, runtime)
    rate = decode_tokens_per_s(
        cfg, gpu, batch, prompt_len, new_tokens, weights, kv, tp, eff, compute, runtime
    )
    steps = new_tokens * batch
    return Prediction(first.bound + steps / rate.bound, first.estimate + steps / rate.estimate)


def prefill_seconds(
    cfg: ModelConfig,
    gpu: GPU,
    batch: int,
    prompt_len: int,
    weights: "WeightQuant | str",
    tp: int,
    eff: Efficiency,
    request: bool = True,
    compute: str = "bf16",
    runtime: str = "compiled",
) -> Prediction:
    """Seconds to process ``batch`` prompts of ``prompt_len`` tokens, the matmuls at ``compute``'s
    peak; in a ``tp``-way group, each block's two all-reduces of the prompts' activations
    (``analysis.parallel.tp_forward_bytes``) at the link share training's rows fit, ``tp_link``.
    ``request``: a served request's time to the first token, which adds the fixed
    ``prefill_floor_s`` (scheduling, launch, sampling); otherwise the prompt's processing alone,
    as llama-bench's pp times it."""
    r = _roofline(cfg, gpu, batch, prompt_len, "prefill", weights, None, tp, compute)
    bound = max(r.compute_time_s, r.memory_time_s)
    share = eff.decode_bw["16-bit"]
    floor = eff.prefill_floor_s if request else 0.0
    matmul = eff.matmul_share(compute)
    links = tp_link_seconds(cfg, gpu, tp, batch * prompt_len, eff)
    links += launch_seconds(cfg, batch * prompt_len, runtime, eff)
    return Prediction(bound, max(r.compute_time_s / matmul, r.memory_time_s / share) + links + floor)


def train_flops_per_token(cfg: ModelConfig, seq_len: int, recompute: str | None = None) -> float:
    """Training FLOPs per token as the kernels run them: 3 × the causal forward (+ one forward
    under full recomputation). The one formula of the training estimates and the device's
    calibration."""
    return sum(train_flops_split(cfg, seq_len, recompute))


@lru_cache(maxsize=COUNTS_CACHED)
def train_flops_split(cfg: ModelConfig, seq_len: int, recompute: str | None = None) -> tuple[float, float]:
    """``train_flops_per_token`` as (the matmuls', the causal attention scores')."""
    flops = count_flops(cfg, seq_len, 1)
    passes = 4 if recompute == "full" else 3
    scores = passes * flops.attention_scores_causal / seq_len
    return passes * flops.forward_causal / seq_len - scores, scores


@lru_cache(maxsize=COUNTS_CACHED)
def tp_bytes_per_token(cfg: ModelConfig, tp: int, seq_len: int, recompute: str | None = None) -> float:
    """Bytes one GPU of a ``tp``-way tensor-parallel group (sequence parallel) sends per token
    of a training step (``analysis.parallel``'s count)."""
    if tp == 1:
        return 0.0
    layout = Layout(gpus=tp, tp=tp, sequence_parallel=True, recompute=recompute or "none")
    return parallel_memory(cfg, layout, seq_len, "bf16").comm_by_kind["tp"] / seq_len


def train_peak_seconds_per_token(
    cfg: ModelConfig, gpu: GPU, seq_len: int, recompute: str | None, matmuls_in: str
) -> tuple[float, float]:
    """GPU-seconds of one training token at the peaks, as (its matmuls at ``matmuls_in``'s dense
    peak, its causal attention scores at bf16's: FlashAttention's, whatever the GEMMs run in)."""
    matmuls, scores = train_flops_split(cfg, seq_len, recompute)
    return matmuls / gpu.peak_flops(matmuls_in), scores / gpu.peak_bf16_flops


def train_seconds_by_term(
    cfg: ModelConfig,
    gpu: GPU,
    seq_len: int,
    recompute: str | None,
    matmuls_in: str,
    eff: Efficiency,
    tp: int = 1,
    *,
    ep: int = 1,
    cp: int = 1,
    micro_batch: int = 1,
) -> dict[str, float]:
    """GPU-seconds of one token of a training step, by term: the (dense) matmuls and the attention
    scores at their shares of their peaks, and, in a ``tp``-way group, each GPU's collectives at
    ``tp_link``; a mixture of experts' routed experts apart (``moe_step.moe_seconds_per_token``:
    ``expert_matmuls``, ``expert_all_to_all`` over ``ep`` ranks, ``dispatch_memory``), the rows
    each expert receives set by ``micro_batch`` sequences per rank and ``cp``."""
    matmuls_s, scores_s = train_peak_seconds_per_token(cfg, gpu, seq_len, recompute, matmuls_in)
    share = eff.train_fp8 if matmuls_in == "fp8" else eff.train_bf16
    link = link_bytes_per_s(gpu, tp) * eff.tp_link
    links = tp * tp_bytes_per_token(cfg, tp, seq_len, recompute) / link
    terms = {"matmuls": matmuls_s / share, "attention_scores": scores_s / eff.train_attention}
    terms["tp_collectives"] = links
    if cfg.is_moe:
        layout = Layout(
            tp * cp * ep, tp, cp=cp, ep=ep, micro_batch=micro_batch, recompute=recompute or "none"
        )
        passes = train_passes(recompute)
        experts = expert_flops_per_token(cfg, layout, seq_len, passes) / gpu.peak_flops(matmuls_in)
        terms["matmuls"] = (matmuls_s - experts) / share  # the dense parts: attention, shared, head
        terms |= moe_seconds_per_token(cfg, gpu, layout, seq_len, matmuls_in, share, eff, passes)
    return terms


def train_tokens_per_s_per_gpu(
    cfg: ModelConfig,
    gpu: GPU,
    seq_len: int,
    recompute: str | None,
    matmuls_in: str,
    eff: Efficiency,
    tp: int = 1,
    bubble: float = 0.0,
    *,
    ep: int = 1,
    cp: int = 1,
    micro_batch: int = 1,
) -> Prediction:
    """Tokens per second per GPU: the bound at the dense peaks (``train_peak_seconds_per_token``:
    no communication, no bubble), and the estimate (``train_seconds_by_term``'s sum), idle for the
    pipeline's ``bubble`` share. ``matmuls_in``: the format the GEMMs compute in (bf16, fp8)."""
    bound = 1 / sum(train_peak_seconds_per_token(cfg, gpu, seq_len, recompute, matmuls_in))
    terms = train_seconds_by_term(
        cfg, gpu, seq_len, recompute, matmuls_in, eff, tp, ep=ep, cp=cp, micro_batch=micro_batch
    )
    return Prediction(bound, (1 - bubble) / sum(terms.values()))


def layout_step_estimate(
    cfg: ModelConfig, gpu: GPU, seq_len: int, cost: LayoutCost, eff: Efficiency
) -> float:
    """A training layout's step (``analysis.layouts.layout_cost``) as estimated: each GPU's
    tokens at ``train_tokens_per_s_per_gpu`` (its tensor-parallel collectives and pipeline
    bubble included), plus the pipeline and data-parallel traffic as the modeled step counts it
    (not calibrated)."""
    tokens = cost.global_batch * seq_len / (cost.tp * cost.pp * cost.dp)  # each GPU's share
    rate = train_tokens_per_s_per_gpu(
        cfg, gpu, seq_len, cost.recompute, "bf16", eff, cost.tp, cost.bubble_fraction
    )
    return tokens / rate.estimate + cost.comm_s - cost.tp_comm_s


@lru_cache(maxsize=COUNTS_CACHED)
def _finetune_flops(cfg: ModelConfig, spec: FinetuneSpec, seq_len: int, batch: int) -> FinetuneFlops:
    return finetune_flops(cfg, spec, seq_len, batch)


@lru_cache(maxsize=COUNTS_CACHED)
def finetune_peak_bytes(cfg: ModelConfig, spec: FinetuneSpec, seq_len: int, batch: int) -> int:
    """The bytes ``analysis.finetune_step.finetune_memory`` counts at a step's peak (made once per
    recipe: the fit asks for the same rows under thousands of parameter values)."""
    return finetune_memory(cfg, spec, seq_len, batch).peak_bytes


def finetune_passes(spec: FinetuneSpec) -> tuple[str, ...]:
    """The GEMM passes a fine-tuning step runs through a frozen or trainable base weight: its
    forward (twice under gradient checkpointing), the input's gradient, and the weight's when
    the base trains (``full``)."""
    forwards = (FORWARD,) * (2 if spec.grad_checkpointing else 1)
    return forwards + (INPUT_GRAD,) + (() if spec.adapters else (WEIGHT_GRAD,))


def finetune_seconds(
    cfg: ModelConfig, gpu: GPU, spec: FinetuneSpec, seq_len: int, batch: int, eff: Efficiency
) -> Prediction:
    """Seconds of one GPU's fine-tuning step (``analysis.finetune_step.finetune_flops``): its matmuls
    at ``finetune_matmul`` of the compute dtype's dense peak (a mixture of experts' routed experts
    apart, ``moe_step.moe_seconds_per_token`` on one GPU: their grouped GEMMs and the
    dispatcher's copies), the causal attention scores at ``train_attention``, and QLoRA's
    dequantisation memory-bound at the 4-bit decode share of the HBM bandwidth (bitsandbytes'
    kernel reads NF4 and writes 16 bits as a decode kernel streams 4-bit weights: an
    assumption)."""
    work = _finetune_flops(cfg, spec, seq_len, batch)
    peak = gpu.peak_flops(spec.dtype)
    share = eff.finetune_matmul
    bound = (work.matmuls + work.scores) / peak + work.dequant_bytes / gpu.hbm_bytes_per_s
    matmuls_s, experts_s = work.matmuls / (peak * share), 0.0
    if cfg.is_moe:
        layout, passes, tokens = Layout(micro_batch=batch), finetune_passes(spec), batch * seq_len
        routed = expert_flops_per_token(cfg, layout, seq_len, passes) * tokens
        matmuls_s = (work.matmuls - routed) / (peak * share)
        terms = moe_seconds_per_token(cfg, gpu, layout, seq_len, spec.dtype, share, eff, passes)
        experts_s = sum(terms.values()) * tokens
    estimate = (
        matmuls_s
        + experts_s
        + work.scores / (peak * eff.train_attention)
        + work.dequant_bytes / (gpu.hbm_bytes_per_s * eff.decode_bw["4-bit"])
    )
    return Prediction(bound, estimate)
