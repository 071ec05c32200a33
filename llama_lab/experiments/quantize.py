"""Quantisation, live: the small live copy of a model, briefly trained on the built-in text,
with its linear layers stored as real int8 / int4 / fp8 tensors (``model.quant``). The bytes
those tensors and the rest of the model hold are measured and set beside ``analysis``'s
prediction for the same format; the logits' largest error and the loss on held-out text are
measured against the fp32 and the bf16 model, and greedy decoding is timed for all three.
Weight-only: every matmul dequantises its weight, so on a CPU without int kernels the
quantised model saves memory, not time.
"""

from __future__ import annotations

import copy
import time
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

import pandas as pd
import torch

from ..analysis.quant import DEFAULT_KEEP, WeightQuant, weights_bytes
from ..config import PRESETS, ModelConfig, live_config
from ..errors import ExperimentError
from ..figures.common import Figure, Table
from ..model import CausalLM
from ..model.quant import quantize_linears
from ..train.data import TokenData, get_batch, load_builtin
from ..train.measure import tensor_bytes
from ..train.step import next_token_loss
from ..units import Progress, sub_progress
from .registry import ExperimentKind, register
from .speculative import greedy, trained

QUANT_DEFAULTS = dict(d_model=128, n_layers=4, steps=150, seq_len=64, batch=8, new_tokens=32)
Q = QUANT_DEFAULTS


# Mixtral's and DeepSeek's, gpt-oss's, Llama 4's routers and Qwen's shared-expert gate: kept in the
# live copy, as analysis.quant keeps every router
ROUTERS = ("mlp.gate", "mlp.router", "feed_forward.router", "shared_expert_gate")


_M = TypeVar("_M", bound=torch.nn.Module)


def bf16_copy(model: _M) -> _M:
    """A bf16 copy of ``model`` as a checkpoint stores it: DeepSeek-V3's router correction bias
    stays float32 (transformers keeps it so; the router reads it in float32)."""
    half = copy.deepcopy(model).to(torch.bfloat16)
    for name, buffer in half.named_buffers():
        if name.endswith("e_score_correction_bias"):
            buffer.data = buffer.data.float()
    return half


def held_bytes(model: torch.nn.Module) -> int:
    """Bytes of every parameter and buffer the model holds (a tied tensor once)."""
    return tensor_bytes([*model.parameters(), *model.buffers()])


@dataclass(frozen=True)
class QuantRun:
    preset: str
    config: dict[str, Any]  # ModelConfig.to_dict()
    weight_dtype: str
    quant: dict[str, Any]  # WeightQuant.to_dict()
    measured_weight_bytes: int  # what the quantised model's tensors hold
    predicted_weight_bytes: int  # analysis.weights_bytes for the same model and format
    bf16_weight_bytes: int
    fp32_weight_bytes: int
    logit_max_abs_error: float  # against the fp32 model, on a validation batch
    logit_max_abs_error_bf16: float  # the bf16 model's, for scale
    loss_fp: float  # fp32
    loss_bf16: float
    loss_quantized: float
    decode_s: dict[str, float]  # fp32 / bf16 / quantised: greedy decoding of new_tokens
    new_tokens: int

    def to_dict(self) -> dict:
        return asdict(self)

    def to_frame(self) -> pd.DataFrame:
        rows = [
            ("fp32", self.fp32_weight_bytes, self.loss_fp, 0.0),
            ("bf16", self.bf16_weight_bytes, self.loss_bf16, self.logit_max_abs_error_bf16),
            (self.weight_dtype, self.measured_weight_bytes, self.loss_quantized, self.logit_max_abs_error),
        ]
        return pd.DataFrame(
            [
                {
                    "weights": name,
                    "weight_bytes": size,
                    "loss": loss,
                    "logit_max_abs_error": error,
                    "decode_s": self.decode_s[name],
                }
                for name, size, loss, error in rows
            ]
        )


def _loss_and_logits(model: CausalLM, inputs: torch.Tensor, targets: torch.Tensor):
    with torch.no_grad():
        logits = model(inputs).float()
    return next_token_loss(logits, targets).item(), logits


def _timed_decode(model: CausalLM, prompt: torch.Tensor, new_tokens: int) -> float:
    greedy(model, prompt, 2)  # warm-up
    start = time.perf_counter()
    greedy(model, prompt, new_tokens)
    return time.perf_counter() - start


def quantize_run(
    preset: str = "seed-demo",
    weight_dtype: str = "int8",
    steps: int = Q["steps"],
    group_size: int | None = None,
    device: str = "cpu",
    data: TokenData | None = None,
    progress: Progress | None = None,
) -> QuantRun:
    """Train the live copy of ``preset``, quantise its linear layers and measure."""
    if preset not in PRESETS:
        raise ExperimentError(f"preset {preset!r} must be one of {', '.join(PRESETS)}")
    if weight_dtype not in ("int8", "int4", "fp8"):
        raise ExperimentError(f"weight_dtype={weight_dtype!r} must be int8, int4 or fp8")
    data = data or load_builtin()
    cfg = live_config(PRESETS[preset], Q["n_layers"], Q["d_model"], Q["seq_len"] + Q["new_tokens"])
    # the live copy quantises nn.Linear layers; a mixture's fused experts stay in bf16
    keep = DEFAULT_KEEP + (("experts",) if cfg.is_moe else ())
    quant = WeightQuant.of(weight_dtype, group_size=group_size, keep=keep)
    model = trained(cfg, steps, data, device, progress=sub_progress(progress, 0, 0.7, "training"))
    dev = next(model.parameters()).device
    inputs, targets = (
        t.to(dev) for t in get_batch(data.val, Q["batch"], Q["seq_len"], torch.Generator().manual_seed(0))
    )
    loss_fp, logits_fp = _loss_and_logits(model, inputs, targets)
    half = bf16_copy(model)
    loss_bf16, logits_bf16 = _loss_and_logits(half, inputs, targets)
    quantised = copy.deepcopy(half)
    quantize_linears(quantised, weight_dtype, quant.group_size, quant.scale_dtype, skip=("lm_head", *ROUTERS))
    loss_q, logits_q = _loss_and_logits(quantised, inputs, targets)
    if progress:
        progress(0.8, "timing greedy decoding")
    prompt = inputs[:1, :16]
    decode_s = {
        name: _timed_decode(m, prompt, Q["new_tokens"])
        for name, m in (("fp32", model), ("bf16", half), (weight_dtype, quantised))
    }
    if progress:
        progress(1.0, "done")
    return QuantRun(
        preset=preset,
        config=cfg.to_dict(),
        weight_dtype=weight_dtype,
        quant=quant.to_dict(),
        measured_weight_bytes=held_bytes(quantised),
        predicted_weight_bytes=weights_bytes(cfg, quant).total,
        bf16_weight_bytes=held_bytes(half),
        fp32_weight_bytes=held_bytes(model),
        logit_max_abs_error=(logits_q - logits_fp).abs().max().item(),
        logit_max_abs_error_bf16=(logits_bf16 - logits_fp).abs().max().item(),
        loss_fp=loss_fp,
        loss_bf16=loss_bf16,
        loss_quantized=loss_q,
        decode_s=decode_s,
        new_tokens=Q["new_tokens"],
    )


def tables(result: QuantRun, section: str, config: ModelConfig | None = None) -> list[Table]:
    return [
        Table("quantize", f"Weights as stored: fp32, bf16, {result.weight_dtype}", section, result.to_frame())
    ]


def figures(result: QuantRun, section: str) -> list[Figure]:
    return []


KIND = register(
    ExperimentKind(
        name="quantize",
        title="Quantisation, measured",
        result_type=QuantRun,
        run=quantize_run,
        tables=tables,
        figures=figures,
        panel="quantize",
        order=65,
    )
)
