"""figures.finetune: the peak-vs-context curve is finetune_memory at its lengths (a bounded set
up to the model's max, T included) and the GPU's line is its usable bytes; the parts table sums
to the peak."""

import pytest

from llama_lab.analysis.finetune import FinetuneSpec
from llama_lab.analysis.finetune_step import finetune_memory
from llama_lab.config import PRESETS
from llama_lab.figures.common import GIB
from llama_lab.figures.finetune import (
    CURVE_POINTS,
    curve_frame,
    curve_lengths,
    memory_vs_context,
    parts_frame,
)
from llama_lab.runtime.hardware import GPUS


@pytest.mark.parametrize("preset", ["seed-demo", "llama-2-7b", "llama-3.1-405b"])
def test_the_curve_is_finetune_memory_at_its_lengths_and_the_line_the_gpus_usable_bytes(preset):
    cfg, gpu = PRESETS[preset], GPUS["A100 40GB"]
    spec = FinetuneSpec(method="qlora", rank=16, grad_checkpointing=True)
    lengths = curve_lengths(cfg, 100)
    assert lengths[-1] == cfg.max_seq_len and 100 in lengths and len(lengths) <= CURVE_POINTS + 2
    figure = memory_vs_context(curve_frame(cfg, spec, lengths, 2), gpu, 100)
    peak = next(trace for trace in figure.data if trace.name == "peak of a step")
    assert list(peak.x) == list(lengths)
    for T, gib in zip(peak.x, peak.y):
        assert gib * GIB == pytest.approx(finetune_memory(cfg, spec, int(T), 2).peak_bytes, rel=1e-12)
    (line,) = [s for s in figure.layout.shapes if s.y0 == s.y1]
    assert line.y0 * GIB == pytest.approx(gpu.usable_bytes, rel=1e-12)
    # predict_finetune's factor: the curve plots the estimate its fits is judged by
    scaled = curve_frame(cfg, spec, lengths, 2, factor=1.25)
    assert list(scaled.peak_bytes) == pytest.approx([1.25 * p for p in peak.y * GIB], rel=1e-12)


def test_the_parts_table_sums_to_the_peak_and_leaves_out_the_empty_parts():
    memory = finetune_memory(PRESETS["llama-3-8b"], FinetuneSpec(), 2048, 1)
    frame = parts_frame(memory.by_part)
    assert frame["bytes"].sum() == memory.peak_bytes
    assert (frame["bytes"] > 0).all() and "float32 master copy" not in set(frame["part"])
    assert frame["share_pct"].sum() == pytest.approx(100)
