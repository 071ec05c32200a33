"""The report's fine-tuning section: one GPU's fine-tuning step as the Fine-tuning page shows it
(``predict_finetune``: the counts, the peak by part with its interval, whether it fits, the
longest context and largest batch that fit, tokens/s) and the peak against context. The page's
recipe when it was set there, else PEFT's default LoRA at the report's T, B and GPU."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..analysis.finetune import FinetuneSpec, default_targets
from ..config import ModelConfig
from ..config.hf.quant import StoredQuant
from ..errors import LabError
from ..figures.common import Figure, Table
from ..figures.finetune import curve_frame, curve_lengths, memory_vs_context, parts_frame, prediction_frame
from ..runtime.hardware import GPUS
from ..validation.predict import predict_finetune

SECTION = "Fine-tuning"


@dataclass(frozen=True)
class FinetuneWorkload:
    """What the fine-tuning section is computed for: a recipe on one GPU at T and B."""

    spec: FinetuneSpec
    gpu: str
    seq_len: int
    batch: int
    stored: StoredQuant | None = None


def default_workload(cfg: ModelConfig, gpu: str, seq_len: int, batch: int) -> FinetuneWorkload:
    """PEFT's default LoRA (r = 8; q_proj, v_proj, or the family's attention projections)."""
    return FinetuneWorkload(FinetuneSpec(targets=default_targets(cfg)), gpu, seq_len, batch)


def _recipe(spec: FinetuneSpec) -> str:
    text = f"{spec.method}, {spec.optimizer}, {spec.dtype}"
    if spec.adapters:
        targets = spec.targets if isinstance(spec.targets, str) else ", ".join(spec.targets)
        text += f", rank {spec.rank}, targets {targets}"
    return text + (", gradient checkpointing" if spec.grad_checkpointing else "")


def finetune_part(cfg: ModelConfig, work: FinetuneWorkload) -> tuple[list[Table], list[Figure]]:
    """The section's tables and figure; a refused recipe gives one table saying why."""
    gpu = GPUS[work.gpu]
    try:
        answer = predict_finetune(cfg, gpu, work.spec, work.seq_len, work.batch, work.stored)
    except LabError as exc:
        refused = pd.DataFrame({"recipe": [_recipe(work.spec)], "refused": [str(exc)]})
        return [Table("finetune_prediction", "Fine-tuning on one GPU: refused", SECTION, refused)], []
    lengths = curve_lengths(cfg, work.seq_len)
    factor = answer["peak_bytes"]["factor"]
    curve = curve_frame(cfg, work.spec, lengths, work.batch, work.stored, factor)
    title = f"Fine-tuning on one {gpu.name} ({_recipe(work.spec)}), T={work.seq_len:,}, B={work.batch:,}"
    tables = [
        Table(
            "finetune_prediction",
            title,
            SECTION,
            prediction_frame(answer),
            "; ".join(answer["notes"]) + ". " + answer["interval_from"] + ".",
        ),
        Table("finetune_by_part", "The peak of a step, by part", SECTION, parts_frame(answer["by_part"])),
        Table("finetune_vs_context", "The peak against context", SECTION, curve),
    ]
    figure = Figure(
        "finetune_memory_vs_context",
        "Fine-tuning: peak memory against context",
        SECTION,
        memory_vs_context(curve, gpu, work.seq_len),
    )
    return tables, [figure]
