"""Fine-tuning, live: LoRA, QLoRA, DoRA or full fine-tuning of a preset's small live copy on
this machine (the CPU unless a GPU is asked for), its trainable parameters and peak bytes
measured beside ``analysis.finetune``'s prediction for the same model, method and step.

Base weights: the preset's live copy (``config.live_config``: its recipe at d_model 256, 4
blocks, byte vocabulary) trained ``pretrain_steps`` AdamW steps on the first half of the
built-in text (Python's help pages); it is then fine-tuned on the second half, so the loss
falls from where pre-training left it. Everything runs in float32 with the model's chunked
loss (``FinetuneSpec(dtype="fp32", loss="chunked")``); QLoRA's base is NF4 with double
quantisation (``model.quant``, the lab's pure-torch quantiser, equal to bitsandbytes'), its
adapters float32.

Peak bytes, as the prediction counts them (the bytes the tensors hold at the step's high
point): on CUDA the allocator's peak (``max_memory_allocated``); on the CPU the tensors the
prepared model holds (its storages, counted) plus the CPU allocator's high point over the first
``MEASURED_STEPS`` fine-tuning steps (``AllocatedPeak``: torch's profiler records every
allocation and free; the first step creates AdamW's states, the second is every later step).
The growth of the resident high-water mark (``RssPeak``, what this run measured before) is not
used: it also holds the pages glibc keeps after a free, the Python heap and the profiler's own
records — on seed-demo (batch 16 × 128, 8 steps) the model's tensors plus that growth were
1.3–1.6 × the allocated peak, varying run to run — allocator slack, not the step's tensors,
and not what the prediction (a GPU's allocated bytes) counts.
"""

from __future__ import annotations

import copy
import gc
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from ..analysis.finetune import METHODS, FinetuneSpec, check_finetune, target_modules
from ..analysis.finetune_step import finetune_memory
from ..config import PRESETS, ModelConfig, live_config, require_decoder_only
from ..errors import AnalysisError, ExperimentError
from ..figures.common import Figure, Table
from ..figures.finetune import loss_figure, measured_frame
from ..model.lora import (
    ALL_LINEAR,
    attach_adapters,
    merge_adapters,
    quantize_base_nf4,
    save_adapter,
    trainable_parameters,
)
from ..runtime.devices import pick_device
from ..runtime.memory import AllocatedPeak, check_memory
from ..runtime.precision import make_precision
from ..train.data import TokenData, get_batch, load_builtin, make_token_data
from ..train.loop import evaluate
from ..train.measure import tensor_bytes
from ..train.step import Trainee, make_optimizer, training_step
from .registry import ExperimentKind, register
from .speculative import trained

FINETUNE_DEFAULTS = dict(d_model=256, n_layers=4, seq_len=128, batch=16, pretrain_steps=60)
# Chosen on seed-demo (20 steps, batch 16 × 128): the held-out loss falls for every method
# (all-linear, rank 8: LoRA 3.188 → 3.010, DoRA → 2.985; full → 2.928); the adapters need ten
# times full fine-tuning's step.
LEARNING_RATES = {"full": 1e-3, "lora": 1e-2, "qlora": 1e-2, "dora": 1e-2}
VAL_BATCHES = 2  # fixed held-out batches of the fine-tuning text: the loss before and after
MAX_FINETUNE_STEPS = 10_000
MEASURED_STEPS = 2  # the allocator's peak: AdamW's first step and a steady one


@dataclass(frozen=True)
class FinetuneSettings:
    method: str = "lora"
    rank: int = 8
    alpha: float = 16.0
    targets: tuple[str, ...] | str = ALL_LINEAR  # q_proj, v_proj alone barely move it in 20 steps
    steps: int = 20
    pretrain_steps: int = FINETUNE_DEFAULTS["pretrain_steps"]
    seq_len: int = FINETUNE_DEFAULTS["seq_len"]
    batch: int = FINETUNE_DEFAULTS["batch"]
    device: str = "cpu"
    seed: int = 0
    save_adapter: str | None = None  # a safetensors file for the trained adapters (PEFT's keys)

    def spec(self) -> FinetuneSpec:
        return FinetuneSpec(
            method=self.method,
            rank=self.rank,
            alpha=self.alpha,
            targets=self.targets,
            dtype="fp32",
            loss="chunked",
        )

    def check(self, cfg: ModelConfig) -> None:
        """The run's rules, before anything is built."""
        if self.method not in METHODS:
            raise ExperimentError(f"method={self.method!r} must be one of {', '.join(METHODS)}")
        if not 1 <= self.steps <= MAX_FINETUNE_STEPS:
            raise ExperimentError(f"steps={self.steps} must be between 1 and {MAX_FINETUNE_STEPS}")
        if self.method != "full" and self.rank < 1:
            raise ExperimentError(f"rank={self.rank} must be at least 1")
        if self.seq_len > cfg.max_seq_len:
            raise ExperimentError(
                f"seq_len={self.seq_len} is above the model's max_seq_len={cfg.max_seq_len}"
            )
        if self.save_adapter is not None:
            if self.method == "full":
                raise ExperimentError("save_adapter: full fine-tuning trains every weight, it has no adapter")
            folder = Path(self.save_adapter).expanduser().resolve().parent
            if not folder.is_dir():
                raise ExperimentError(
                    f"save_adapter={self.save_adapter!r}: the folder {folder} does not exist"
                )
        try:
            check_finetune(cfg, self.spec())
            if self.method != "full":
                target_modules(cfg, self.targets)
        except AnalysisError as exc:
            raise ExperimentError(str(exc)) from None


@dataclass(frozen=True)
class FinetuneRun:
    preset: str
    config: dict[str, Any]
    method: str
    rank: int
    targets: list[str]
    base: str  # what the base weights are
    losses: list[float]
    val_loss_before: float
    val_loss_after: float
    measured_trainable_params: int
    predicted_trainable_params: int
    measured_peak_bytes: int
    predicted_peak_bytes: int
    peak_source: str
    predicted_by_part: dict[str, int] = field(default_factory=dict)
    # the adapted model's logits against a copy with the adapters merged into the weights
    merged_logits_max_abs_diff: float | None = None
    adapter_file: str | None = None

    @property
    def peak_ratio(self) -> float:
        return self.measured_peak_bytes / max(1, self.predicted_peak_bytes)

    def to_dict(self) -> dict:
        return asdict(self) | {"peak_ratio": self.peak_ratio}


def finetune_config(preset: str, seq_len: int) -> ModelConfig:
    if preset not in PRESETS:
        raise ExperimentError(f"preset {preset!r} must be one of {', '.join(PRESETS)}")
    F = FINETUNE_DEFAULTS
    return live_config(PRESETS[preset], F["n_layers"], F["d_model"], seq_len)


def _halves(data: TokenData) -> tuple[TokenData, TokenData]:
    """Pre-training text and fine-tuning text: the training split's first and second halves."""
    half = data.train.numel() // 2
    first, second = data.train[:half], data.train[half:]
    return (
        make_token_data(first, data.vocab_size, data.source + ", first half"),
        make_token_data(second, data.vocab_size, data.source + ", second half"),
    )


def prepared_model(cfg: ModelConfig, state: dict, settings: FinetuneSettings, device: torch.device):
    """The base with ``state`` loaded, quantised (QLoRA) and adapted (frozen but the adapters),
    or whole (full)."""
    from ..model import build_model

    model = build_model(cfg, device=device, seed=settings.seed)
    model.load_state_dict(state)
    if settings.method == "qlora":
        quantize_base_nf4(model)
    if settings.method != "full":
        attach_adapters(
            model, settings.rank, settings.alpha, settings.targets, dora=settings.method == "dora"
        )
    return model


def finetune_run(
    preset: str = "seed-demo",
    settings: FinetuneSettings | None = None,
    *,
    on_step: Callable[[dict], None] | None = None,
) -> FinetuneRun:
    s = settings or FinetuneSettings()
    cfg = finetune_config(preset, s.seq_len)
    require_decoder_only(cfg, "fine-tuning")
    s.check(cfg)
    dev = pick_device(s.device)
    memory = finetune_memory(cfg, s.spec(), s.seq_len, s.batch)
    # the pre-training run's model and AdamW state (3 × 4 bytes a parameter) come first
    check_memory(
        memory.peak_bytes + 12 * memory.frozen_params + 4 * memory.trainable_params,
        dev,
        f"fine-tuning this model ({s.method}, B={s.batch}, T={s.seq_len})",
    )
    pretrain, finetune_data = _halves(load_builtin())
    base = trained(cfg, s.pretrain_steps, pretrain, str(dev), seed=s.seed)
    state = copy.deepcopy(base.state_dict())
    del base
    model = prepared_model(cfg, state, s, dev)
    held = tensor_bytes([*model.parameters(), *model.buffers()])
    trainee = Trainee(
        model.train(), make_optimizer(model, LEARNING_RATES[s.method]), make_precision("fp32", dev)
    )
    generator = torch.Generator().manual_seed(s.seed)
    val_stream = torch.Generator().manual_seed(s.seed + 1)
    val = [
        tuple(t.to(dev) for t in get_batch(finetune_data.val, s.batch, s.seq_len, val_stream))
        for _ in range(VAL_BATCHES)
    ]
    val_before = evaluate(model, val, trainee.precision)
    losses = []
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    gc.collect()  # the pre-training's garbage freed now, not inside the measured steps
    allocated = AllocatedPeak()

    def step_once(step: int) -> None:
        inputs, targets = (t.to(dev) for t in get_batch(finetune_data.train, s.batch, s.seq_len, generator))
        loss, _, _ = training_step(trainee, inputs, targets, measure_grad_norm=False)
        losses.append(loss)
        if on_step:
            on_step({"step": step + 1, "loss": loss})

    with allocated if dev.type == "cpu" else nullcontext():
        for step in range(min(s.steps, MEASURED_STEPS)):
            step_once(step)
    for step in range(MEASURED_STEPS, s.steps):
        step_once(step)
    val_after = evaluate(model, val, trainee.precision)
    if dev.type == "cuda":
        peak, source = int(torch.cuda.max_memory_allocated(dev)), "CUDA allocator peak"
    else:
        peak = held + (allocated.bytes or 0)
        source = (
            "the prepared model's tensors + the CPU allocator's peak over the first "
            f"{min(s.steps, MEASURED_STEPS)} fine-tuning steps (torch's profiler: every allocation and free)"
        )
    targeted = [] if s.method == "full" else [m.path for m in target_modules(cfg, s.targets)]
    merged = None if s.method == "full" else merged_logits_error(model, val[0][0])
    if s.save_adapter is not None:
        save_adapter(model, s.save_adapter)
    return FinetuneRun(
        preset=preset,
        config=cfg.to_dict(),
        method=s.method,
        rank=s.rank,
        targets=targeted if s.targets != ALL_LINEAR else [ALL_LINEAR],
        base=(
            f"the live copy of {preset} (d_model {cfg.d_model}, {cfg.n_layers} blocks), "
            f"{s.pretrain_steps} AdamW steps on {pretrain.source}"
        ),
        losses=losses,
        val_loss_before=val_before,
        val_loss_after=val_after,
        measured_trainable_params=trainable_parameters(model),
        predicted_trainable_params=memory.trainable_params,
        measured_peak_bytes=peak,
        predicted_peak_bytes=memory.peak_bytes,
        peak_source=source,
        predicted_by_part=memory.by_part,
        merged_logits_max_abs_diff=merged,
        adapter_file=s.save_adapter,
    )


@torch.no_grad()
def merged_logits_error(model: torch.nn.Module, inputs: torch.Tensor) -> float:
    """The largest |logit| difference between ``model`` with its adapters and a copy of it with
    the adapters merged into the weights (``model.lora.merge_adapters``), on ``inputs``."""
    model.eval()
    adapted = model(inputs)
    merged = merge_adapters(copy.deepcopy(model))(inputs)
    return float((adapted - merged).abs().max())


def tables(result: FinetuneRun, section: str, config: ModelConfig | None = None) -> list[Table]:
    return [
        Table(
            "finetune_measured",
            f"Live {result.method} run: measured against predicted",
            section,
            measured_frame(result),
            f"Base: {result.base}. Peak bytes: {result.peak_source}.",
        )
    ]


def figures(result: FinetuneRun, section: str) -> list[Figure]:
    return [
        Figure(
            "finetune_loss", f"Live {result.method} run: loss per step", section, loss_figure(result.losses)
        )
    ]


KIND = register(
    ExperimentKind(
        name="finetune",
        title="Fine-tuning, measured",
        result_type=FinetuneRun,
        run=finetune_run,
        tables=tables,
        figures=figures,
        panel="finetune",
        order=80,
    )
)
