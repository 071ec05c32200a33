"""Time predictions: the roofline **bound** from LLaMA Lab's exact FLOPs and bytes and the GPU's
data sheet, and a calibrated **estimate** from a few named efficiency parameters.

Decode (one token per sequence per step): the step reads the weights in their stored format and
the KV cache (``analysis.roofline``); over ``tp`` GPUs each reads its share. The estimate divides
the memory time by the fraction of HBM bandwidth the weight format's kernels reach
(``decode_bw``), the compute time by ``matmul``, and adds a fixed cost per block per step
(``layer_s``: kernel launches and synchronisation) and, under tensor parallelism, a per-block
all-reduce latency (``tp_layer_s``). Prefill: the larger of compute at ``matmul`` × peak and
memory at the 16-bit bandwidth share, plus a fixed floor (``prefill_floor_s``). Training: the
matmul peak over the FLOPs per token (3 × the causal forward, one forward more under full
recomputation) bounds tokens/s per GPU; the estimate is ``train_bf16`` of it (``train_fp8`` for
runs whose matmuls are fp8, measured against the bf16 peak; ``train_moe`` for a mixture of
experts, whose active FLOPs run at a lower share).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path

from ..analysis import count_flops, roofline
from ..analysis.layouts import step_flops
from ..analysis.quant import BITS, WeightQuant, as_weight_quant
from ..config import ModelConfig
from ..runtime.hardware import GPU

PARAMS_FILE = Path(__file__).with_name("efficiency.json")


def format_class(weights: "WeightQuant | str") -> str:
    """Whose bandwidth share a weight format's decode kernels take, by its bits per weight
    (fp32 weights, rare in serving, take the 16-bit share: uncalibrated)."""
    bits = BITS[as_weight_quant(weights).dtype]
    return "16-bit" if bits >= 16 else "8-bit" if bits >= 8 else "4-bit"


@dataclass(frozen=True)
class Efficiency:
    """The named parameters of the estimate (defaults: before any fit)."""

    decode_bw: dict[str, float] = field(default_factory=lambda: {"16-bit": 0.8, "8-bit": 0.6, "4-bit": 0.5})
    matmul: float = 0.6  # share of the matmul peak prefill reaches
    layer_s: float = 10e-6  # per block per decode step
    tp_layer_s: float = 20e-6  # per block per decode step, added under tensor parallelism
    prefill_floor_s: float = 5e-3
    train_bf16: float = 0.4  # MFU of bf16 training against the bf16 peak
    train_fp8: float = 0.5  # the same for fp8 matmuls, against the bf16 peak
    train_moe: float = 0.2  # MFU of mixture-of-experts training (active FLOPs, the bf16 peak)
    memory_factor: float = 1.0  # a training run's measured peak over the bytes LLaMA Lab counts

    MEANING = {
        "decode_bw": "share of HBM bandwidth a decode step reaches, per weight format",
        "matmul": "share of the bf16 matmul peak prefill reaches",
        "layer_s": "seconds per block per decode step (launches, synchronisation)",
        "tp_layer_s": "seconds per block per decode step added by tensor parallelism (all-reduces)",
        "prefill_floor_s": "fixed seconds of a prefill (scheduling, launch, the first token)",
        "train_bf16": "MFU of bf16 training (causal FLOPs, against the bf16 peak)",
        "train_fp8": "the same with fp8 matmuls (against the bf16 peak)",
        "memory_factor": "a training run's measured peak memory over the bytes LLaMA Lab counts for its "
        "layout (the allocator's cache and fragmentation, communication buffers, the CUDA context)",
        "train_moe": "MFU of mixture-of-experts training, any precision (the active experts' FLOPs, "
        "against the bf16 peak): routing, grouped expert matmuls and all-to-all cost a dense model none of",
    }

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


@dataclass(frozen=True)
class Prediction:
    bound: float  # the roofline's (the best the hardware allows)
    estimate: float  # with the efficiency parameters


def decode_step(
    cfg: ModelConfig,
    gpu: GPU,
    batch: int,
    context: int,
    weights: "WeightQuant | str",
    kv: str,
    tp: int,
    eff: Efficiency,
) -> Prediction:
    """Seconds of one decode step of ``batch`` sequences at ``context`` tokens on ``tp`` GPUs."""
    r = roofline(cfg, gpu, batch, context, "bf16", "decode", weights, kv)
    bound = max(r.compute_time_s, r.memory_time_s) / tp
    share = eff.decode_bw[format_class(weights)]
    fixed = cfg.n_layers * (eff.layer_s + (eff.tp_layer_s if tp > 1 else 0.0))
    return Prediction(bound, max(r.compute_time_s / eff.matmul, r.memory_time_s / share) / tp + fixed)


def decode_tokens_per_s(
    cfg: ModelConfig,
    gpu: GPU,
    batch: int,
    prompt_len: int,
    new_tokens: int,
    weights: str,
    kv: str,
    tp: int,
    eff: Efficiency,
) -> Prediction:
    """Generated tokens per second summed over the batch, at the generation's mean context."""
    context = max(1, prompt_len + new_tokens // 2)
    step = decode_step(cfg, gpu, batch, context, weights, kv, tp, eff)
    return Prediction(batch / step.bound, batch / step.estimate)


def prefill_seconds(
    cfg: ModelConfig, gpu: GPU, batch: int, prompt_len: int, weights: str, tp: int, eff: Efficiency
) -> Prediction:
    """Seconds to process ``batch`` prompts of ``prompt_len`` tokens (time to the first token)."""
    r = roofline(cfg, gpu, batch, prompt_len, "bf16", "prefill", weights)
    bound = max(r.compute_time_s, r.memory_time_s) / tp
    share = eff.decode_bw["16-bit"]
    return Prediction(
        bound, max(r.compute_time_s / eff.matmul, r.memory_time_s / share) / tp + eff.prefill_floor_s
    )


def train_flops_per_token(cfg: ModelConfig, seq_len: int, recompute: str | None = None) -> float:
    """Training FLOPs per token as the kernels run them: 3 × the causal forward (+ one forward
    under full recomputation). The one formula of the training estimates and the device's
    calibration."""
    forward = count_flops(cfg, seq_len, 1).forward_causal / seq_len
    return (4 if recompute == "full" else 3) * forward


def train_tokens_per_s_per_gpu(
    cfg: ModelConfig, gpu: GPU, seq_len: int, recompute: str | None, fp8: bool, eff: Efficiency
) -> Prediction:
    bound = gpu.peak_bf16_flops / train_flops_per_token(cfg, seq_len, recompute)
    share = eff.train_moe if cfg.is_moe else eff.train_fp8 if fp8 else eff.train_bf16
    return Prediction(bound, bound * share)


def layout_step_estimate(
    cfg: ModelConfig,
    seq_len: int,
    recompute: str,
    compute_s: float,
    bubble: float,
    comm_s: float,
    eff: Efficiency,
) -> float:
    """A training layout's step (``analysis.layouts.layout_cost``'s terms) at the calibrated MFU:
    its compute at the dense peak, rescaled to the causal FLOPs the MFU was fitted on and
    divided by that MFU, stretched by the pipeline bubble, plus its communication (not calibrated)."""
    causal = train_flops_per_token(cfg, seq_len, recompute) * seq_len / step_flops(cfg, seq_len, 1, recompute)
    share = eff.train_moe if cfg.is_moe else eff.train_bf16
    return compute_s * causal / share / (1 - bubble) + comm_s
