"""One GPU's fine-tuning step (the recipe and its counts: ``analysis.finetune``): the bytes alive
at its peak by part — over the start of backward, backward's high point and the optimizer step —
whether that fits a GPU, the longest context and largest batch that do, and the step's FLOPs."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..config import MAX_BATCH, ModelConfig, require_decoder_only
from ..config.hf.quant import StoredQuant
from ..errors import AnalysisError
from ..runtime.hardware import DTYPE_BYTES, GPU
from .activations import backward_temporaries, finetune_activation_estimate, released_at_backward_peak
from .common import check_seq, checked_gpu, first_true, nbytes
from .finetune import (
    ADAPTER_BYTES,
    FinetuneSpec,
    adapter_tensors,
    check_finetune,
    frozen_params,
    frozen_weight_bytes,
    full_tensors,
    nf4_bytes,
    nf4_modules,
    optimizer_state_bytes,
    paged_state_bytes,
    target_modules,
    trainable_params,
)
from .flops import count_flops
from .params import count_params
from .shapes import Shapes


def _step_activation_bytes(cfg: ModelConfig, spec: FinetuneSpec, seq_len: int, batch: int) -> tuple[int, int]:
    """(the blocks' saved activations, the loss head's) of one step:
    ``activations.finetune_activation_estimate`` (the frozen layers keep only what the adapters'
    gradients need; full fine-tuning = training's ``activation_estimate``)."""
    est = finetune_activation_estimate(
        cfg,
        seq_len,
        batch,
        spec.dtype,
        method=spec.method,
        rank=spec.rank,
        targets=spec.targets,
        checkpointing=spec.grad_checkpointing,
        loss=spec.loss,
    )
    head = est.components["head_and_loss"]
    return est.total_bytes - head, head


def _logits_gradient_bytes(cfg: ModelConfig, spec: FinetuneSpec, seq_len: int, batch: int) -> int:
    """The gradient of the N·V logits, backward's first tensor, alive beside the saved
    log-probabilities: float32 for the upcast loss, the dtype for plain logits; none chunked."""
    if spec.loss == "chunked":
        return 0
    return nbytes(batch * seq_len * cfg.vocab_size, 4 if spec.loss == "upcast" else DTYPE_BYTES[spec.dtype])


def _transient_bytes(cfg: ModelConfig, spec: FinetuneSpec) -> dict[str, int]:
    """Temporaries of one layer at a time: QLoRA's dequantised weight (out × in in ``dtype``);
    DoRA's per-forward B·A, built from an in × in identity (``get_lora_weight``: the identity,
    A·I and B·A in float32) and W + s·B·A with its cast (``get_weight_norm``)."""
    b = DTYPE_BYTES[spec.dtype]
    out: dict[str, int] = {}
    if spec.method == "qlora":
        out["dequantised_weight"] = max(nbytes(m.inputs * m.outputs, b) for m in nf4_modules(cfg))
    if spec.method == "dora":
        out["dora_weight_norm"] = max(
            4 * (m.inputs**2 + m.inputs * spec.rank + m.inputs * m.outputs)
            + nbytes(2 * m.inputs * m.outputs, b)
            for m in target_modules(cfg, spec.targets)
        )
    return out


def _released_at_backward_peak(cfg: ModelConfig, spec: FinetuneSpec, seq_len: int, batch: int) -> int:
    """``activations.released_at_backward_peak``, the down projection's input saved under full
    fine-tuning or an adapter on down_proj."""
    saved = not spec.adapters or any(m.name == "down_proj" for m in target_modules(cfg, spec.targets))
    return released_at_backward_peak(cfg, seq_len, batch, spec.dtype, down_input_saved=saved)


@dataclass(frozen=True)
class FinetuneMemory:
    """One GPU's bytes in a fine-tuning step: ``by_part`` what is alive at the peak (its
    values sum to ``peak_bytes``), ``phases`` the three candidates for the peak."""

    by_part: dict[str, int]
    peak_bytes: int
    phases: dict[str, int]
    trainable_params: int
    frozen_params: int
    chunked_loss: bool
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def finetune_memory(
    cfg: ModelConfig, spec: FinetuneSpec, seq_len: int, batch: int, stored: StoredQuant | None = None
) -> FinetuneMemory:
    """The peak over forward, backward and the optimizer step of one GPU's step (not the first
    step: the optimizer states exist from the first update on).

    Always alive: the frozen base, the trainable weights, the optimizer states (and full
    fine-tuning's float32 master copy). Gradients are freed after each step (``zero_grad
    (set_to_none=True)``). Forward saves the activations; backward starts with all of them and
    the loss head's tensors alive, and frees each block's as it passes it while the gradients
    build up. Three candidates for the peak:

    - ``backward_start``: every activation, the loss head and the gradients produced first
      (adapters: all of them, they are small; full: the head's V·C) plus one layer's
      temporaries (QLoRA's dequantised weight, DoRA's weight norm);
    - ``backward_peak``: a few operations later, in the last block's FFN, where backward holds
      its widest gradients (``activations.backward_temporaries``) while every block's
      activations are still saved but the loss head's and a few of the last block's
      (``activations.released_at_backward_peak``); full fine-tuning's gradients then are the
      head's and the last down projection's ((V + F)·C). Measured: the live peak of all four
      methods on seed-demo, debug and transformer-2017 (``experiments.finetune``);
    - ``optimizer_step``: every gradient alive, the activations gone."""
    require_decoder_only(cfg, "fine-tuning")
    check_seq(seq_len, batch)
    if seq_len > cfg.max_seq_len:
        raise AnalysisError(f"seq_len={seq_len} is above the model's max_seq_len={cfg.max_seq_len}")
    check_finetune(cfg, spec, stored)
    b = DTYPE_BYTES[spec.dtype]
    mixed = spec.dtype != "fp32"
    state_bytes = b if spec.pure_16bit else 4
    if spec.adapters:
        tensors = adapter_tensors(cfg, spec)
        n_train = sum(n * c for n, c in tensors)
        weights = nbytes(n_train, b) if spec.pure_16bit else ADAPTER_BYTES * n_train
        grads, first_grads = weights, weights
        master = 0
    else:
        tensors = full_tensors(cfg)
        n_train = count_params(cfg).total
        weights = nbytes(n_train, b)
        grads = weights
        first_grads = nbytes(cfg.vocab_size * cfg.d_model, b)  # the head's (or tied table's)
        master = 4 * n_train if mixed and not spec.pure_16bit else 0
    activations, head = _step_activation_bytes(cfg, spec, seq_len, batch)
    transient = _transient_bytes(cfg, spec)
    persistent = {
        "frozen_weights": frozen_weight_bytes(cfg, spec, stored),
        "trainable_weights": weights,
        "master_weights": master,
        "optimizer_states": optimizer_state_bytes(tensors, spec.optimizer, state_bytes)
        - paged_state_bytes(tensors, spec.optimizer),
    }
    backward_start = {
        **persistent,
        "gradients": first_grads,
        "activations": activations,
        "logits_and_loss": head + _logits_gradient_bytes(cfg, spec, seq_len, batch),
        **transient,
    }
    backward_peak = {
        **persistent,
        "gradients": grads if spec.adapters else nbytes((cfg.vocab_size + Shapes.of(cfg).F) * cfg.d_model, b),
        "activations": activations - _released_at_backward_peak(cfg, spec, seq_len, batch),
        "logits_and_loss": 0,
        "backward_temporaries": backward_temporaries(cfg, seq_len, batch, spec.dtype),
    }
    optimizer_step = {**persistent, "gradients": grads, "activations": 0, "logits_and_loss": 0}
    candidates = {
        "backward_start": backward_start,
        "backward_peak": backward_peak,
        "optimizer_step": optimizer_step,
    }
    phases = {name: sum(parts.values()) for name, parts in candidates.items()}
    at_peak = candidates[max(phases, key=lambda name: phases[name])]
    by_part = {key: at_peak.get(key, 0) for key in {**backward_start, **backward_peak}}
    return FinetuneMemory(
        by_part,
        sum(by_part.values()),
        phases,
        trainable_params(cfg, spec),
        frozen_params(cfg, spec),
        spec.loss == "chunked",
        _memory_notes(spec, stored),
    )


def _memory_notes(spec: FinetuneSpec, stored: StoredQuant | None) -> list[str]:
    notes = [
        "activations: what our model saves with the base frozen (finetune_activation_estimate: "
        "frozen layers keep only what the adapters' gradients read; full = training's)",
        "logits_and_loss: "
        + {
            "chunked": "the chunked head (never the N·V logits)",
            "logits": "the N·V logits and log-probabilities in the compute dtype, and their gradient",
            "upcast": "transformers' loss: the N·V logits in the compute dtype (the output holds them), "
            "their float32 log-probabilities and float32 gradient",
        }[spec.loss],
    ]
    if spec.pure_16bit:
        notes.append(
            f"pure {spec.dtype}: the trainable weights, their gradients and AdamW's states in "
            f"{spec.dtype}, no float32 copy"
        )
    elif spec.adapters:
        notes.append(
            "adapters in float32, as PEFT 0.21 creates them (autocast_adapter_dtype=True): "
            "weights, gradients and AdamW states 4 bytes an element; no master copy"
        )
    else:
        notes.append(
            f"full fine-tuning in {spec.dtype}"
            + (" with a float32 master copy (mixed precision)" if spec.dtype != "fp32" else "")
        )
    if spec.method == "qlora":
        notes.append(
            "QLoRA: every block nn.Linear in NF4 with double quantisation; embeddings, lm_head, "
            f"norms, routers and fused experts in {spec.dtype} (transformers' bitsandbytes integration)"
        )
    if stored is not None:
        notes.append(f"frozen base as the checkpoint stores it: {stored.label()}")
    if spec.optimizer == "paged_adamw8bit":
        notes.append(
            "paged: the 8-bit states of tensors ≥ 1e5 elements live in CUDA unified memory, outside "
            "PyTorch's allocator, and the driver pages them to the host when the GPU is full: they are "
            "in no peak PyTorch reports and not in this one"
        )
    return notes


def fits(memory: FinetuneMemory, gpu: GPU | str, factor: float = 1.0) -> bool:
    """Whether the peak (× ``factor``: the calibrated estimate's, ``predict finetune``) fits what
    a process can fill on ``gpu`` (its memory less the CUDA context)."""
    return memory.peak_bytes * factor <= checked_gpu(gpu).usable_bytes


def max_seq_len_that_fits(
    cfg: ModelConfig,
    spec: FinetuneSpec,
    gpu: GPU | str,
    batch: int = 1,
    stored: StoredQuant | None = None,
    factor: float = 1.0,
) -> int | None:
    """The longest context (≤ the model's max_seq_len) whose step fits ``gpu``; None: not even 1."""

    def too_long(T: int) -> bool:
        return not fits(finetune_memory(cfg, spec, T, batch, stored), gpu, factor)

    first_over = first_true(too_long, 1, cfg.max_seq_len)
    return cfg.max_seq_len if first_over is None else (first_over - 1 or None)


def max_batch_that_fits(
    cfg: ModelConfig,
    spec: FinetuneSpec,
    gpu: GPU | str,
    seq_len: int,
    stored: StoredQuant | None = None,
    factor: float = 1.0,
) -> int | None:
    """The largest batch (≤ MAX_BATCH) of ``seq_len`` tokens whose step fits ``gpu``; None: not 1."""

    def too_big(B: int) -> bool:
        return not fits(finetune_memory(cfg, spec, seq_len, B, stored), gpu, factor)

    first_over = first_true(too_big, 1, MAX_BATCH)
    return MAX_BATCH if first_over is None else (first_over - 1 or None)


@dataclass(frozen=True)
class FinetuneFlops:
    """One step's work over B × T tokens: ``matmuls`` and ``scores`` (causal attention) FLOPs,
    and ``dequant_bytes`` QLoRA's NF4 reads and 16-bit writes."""

    matmuls: float
    scores: float
    dequant_bytes: float
    by_term: dict[str, float]


def finetune_flops(cfg: ModelConfig, spec: FinetuneSpec, seq_len: int, batch: int) -> FinetuneFlops:
    """FLOPs of a step. Full: the lab's training count (3 × the causal forward). Adapters: the
    forward, the backward's input gradients through every frozen layer (≈ 1 × the forward's
    matmuls: no weight gradients), the attention scores' backward (2 ×, as in training), and
    the adapters' matmuls: 2·r·(in + out) a token forward, 3 × that with their backward (input
    and weight gradients); DoRA adds B·A from an in × in identity per module per forward
    (2·r·in·(in + out)). Gradient checkpointing runs one more forward. QLoRA dequantises each
    NF4 weight on every forward and backward through it: a memory-bound read of its NF4 bytes
    and a write of ``dtype``'s."""
    flops = count_flops(cfg, seq_len, batch)
    tokens = batch * seq_len
    fwd_scores = flops.attention_scores_causal
    fwd_matmuls = flops.forward_causal - fwd_scores
    forwards = 2 if spec.grad_checkpointing else 1
    if not spec.adapters:
        passes = forwards + 2
        return FinetuneFlops(
            passes * fwd_matmuls,
            passes * fwd_scores,
            0.0,
            {"base_matmuls": passes * fwd_matmuls, "attention_scores": passes * fwd_scores},
        )
    targets = target_modules(cfg, spec.targets)
    lora_fwd = (
        sum(2 * spec.rank * m.rank_multiple * (m.inputs + m.outputs) * m.count for m in targets) * tokens
    )
    dora = (
        sum(2 * spec.rank * m.inputs * (m.inputs + m.outputs) * m.count for m in targets) * forwards
        if spec.method == "dora"
        else 0
    )
    terms: dict[str, float] = {
        "base_matmuls": (forwards + 1) * fwd_matmuls,  # forward(s) + input gradients
        "attention_scores": (forwards + 2) * fwd_scores,
        "adapter_matmuls": (forwards + 2) * lora_fwd,
        "dora_weight_norm": dora,
    }
    dequant = 0.0
    if spec.method == "qlora":
        b = DTYPE_BYTES[spec.dtype]
        per_pass = sum(
            m.count * (nf4_bytes(m.inputs * m.outputs) + m.inputs * m.outputs * b) for m in nf4_modules(cfg)
        )
        dequant = (forwards + 1) * per_pass
    return FinetuneFlops(
        terms["base_matmuls"] + terms["adapter_matmuls"] + dora, terms["attention_scores"], dequant, terms
    )
