"""Kind ``finetune``: the live fine-tuning run (``experiments.finetune``) as the report and the
Fine-tuning page show it — its loss per step, and its measured trainable parameters and peak
bytes against the prediction. Declared apart from the run itself, which only runs and measures."""

from __future__ import annotations

from ..config import ModelConfig
from ..figures.common import Figure, Table
from ..figures.finetune import loss_figure, measured_frame
from .finetune import FinetuneRun, finetune_run
from .registry import ExperimentKind, register


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
