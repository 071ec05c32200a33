"""Every public measurement against LLaMA Lab's prediction: the bound, the calibrated estimate
and its relative error; the efficiency parameters fitted on the declared ``fit`` half only
(``fit``, deterministic), and per kind the median and worst |error| of each half.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..analysis import MFU_CONVENTION, model_flops
from ..analysis.parallel import Layout, bubble_fraction, parallel_memory
from ..errors import LabError
from .efficiency import (
    Efficiency,
    Prediction,
    decode_tokens_per_s,
    finetune_peak_bytes,
    finetune_seconds,
    prefill_seconds,
    shipped_cross_validated,
    static_batch_seconds,
    train_tokens_per_s_per_gpu,
)
from .engine import LATEST_ENGINE, profile_peak_bytes, vllm_kv_tokens
from .intervals import INTERVAL_LEVEL, held_out_coverage, kind_interval, log_ratio
from .rows import KINDS, Row, load_rows


def predict_row(row: Row, eff: Efficiency) -> Prediction:
    """The row's metric predicted (its unit): tokens/s (per GPU where the row is), or seconds."""
    cfg, gpu, w = row.config, row.gpu, row.workload
    tp = int(w.get("tp") or 1)
    assert cfg is not None  # rows with why_not are not predicted
    if row.kind == "memory":
        if row.engine_profile:  # a serving engine's profiling peak: weights and activations
            peak = profile_peak_bytes(cfg, row.weights or "bf16", *row.engine_profile, tp)
            return Prediction(peak, peak)
        return training_memory(cfg, row, eff)
    if row.kind == "finetune_memory":
        counted = finetune_peak_bytes(cfg, row.finetune, int(w["seq_len"]), int(w["batch"]))
        return Prediction(counted, counted * eff.finetune_memory_factor)
    if row.kind == "finetune_throughput":
        assert gpu is not None
        tokens = int(w["seq_len"]) * int(w["batch"])
        step = finetune_seconds(cfg, gpu, row.finetune, int(w["seq_len"]), int(w["batch"]), eff)
        return Prediction(tokens / step.bound, tokens / step.estimate)
    if row.kind == "kv_capacity":
        assert gpu is not None and row.engine_profile is not None
        kv = row.data["precision"].get("kv") or "bf16"
        utilization = float(w["gpu_memory_utilization"])
        engine = w.get("engine") or LATEST_ENGINE
        profile = row.engine_profile
        return vllm_kv_tokens(cfg, gpu, row.weights or "bf16", kv, utilization, *profile, tp, eff, engine)
    assert gpu is not None
    if row.kind == "train":
        return train_tokens_per_s_per_gpu(
            cfg,
            gpu,
            int(w["seq_len"]),
            w.get("recompute"),
            row.matmuls_in,
            eff,
            tp,
            stated_bubble(row),
            **expert_layout(w),
        )
    weights = row.weights or "bf16"
    batch, prompt_len, compute = int(w["batch"]), int(w["prompt_len"]), row.matmuls_in
    runtime = row.runtime
    if row.kind == "prefill":
        ttft = row.metric == "seconds"  # a time to first token; else a prompt throughput (llama-bench)
        seconds = prefill_seconds(cfg, gpu, batch, prompt_len, weights, tp, eff, ttft, compute, runtime)
        if ttft:
            return seconds
        tokens = batch * prompt_len
        return Prediction(tokens / seconds.bound, tokens / seconds.estimate)
    kv = "fp8" if weights == "fp8" else "bf16"
    new_tokens = int(w.get("new_tokens") or 1)
    if w.get("static_batch"):  # output tokens over the batch's whole run, its prefill included
        run = static_batch_seconds(
            cfg, gpu, batch, prompt_len, new_tokens, weights, kv, tp, eff, compute, runtime
        )
        tokens = batch * new_tokens
        p = Prediction(tokens / run.bound, tokens / run.estimate)
    else:
        p = decode_tokens_per_s(
            cfg, gpu, batch, prompt_len, new_tokens, weights, kv, tp, eff, compute, runtime
        )
    per = tp if row.metric == "tokens_per_s_per_gpu" else 1
    return Prediction(p.bound / per, p.estimate / per)


def stated_bubble(row: Row) -> float:
    """The pipeline bubble of a training row that states its schedule — pp > 1 with its virtual
    stages per rank (``vp``; torchtitan's "Interleaved 1F1B": 2, its default split) and
    micro-batches per step (``pp_microbatches``, else ``grad_accum``) —, by the one rule,
    ``analysis.parallel.bubble_fraction``. A row whose schedule is not stated gets none: the
    fitted shares take it in."""
    w = row.workload
    pp, vp = int(w.get("pp") or 1), int(w.get("vp") or 0)
    micro_batches = int(w.get("pp_microbatches") or w.get("grad_accum") or 0)
    if pp == 1 or not vp or not micro_batches:
        return 0.0
    schedule = "interleaved" if vp > 1 else "1f1b"
    return bubble_fraction(Layout(gpus=pp, pp=pp, schedule=schedule, chunks=vp, micro_batches=micro_batches))


def expert_layout(workload: Mapping[str, Any]) -> dict[str, int]:
    """What a training row's MoE terms read of its layout: ep, cp, micro-batch (1 where unstated)."""
    return {key: int(workload.get(key) or 1) for key in ("ep", "cp", "micro_batch")}


def training_memory(cfg, row: Row, eff: Efficiency) -> Prediction:
    """A training run's peak bytes per GPU: LLaMA Lab's count for its layout (FSDP = ZeRO-3 over
    the data-parallel ranks, sequence parallel with tensor parallelism, mixed-precision bf16),
    and that × ``memory_factor``. A torchtitan run is counted as it runs
    (``analysis.torchtitan``): its operator-level recomputation where the row's selective
    checkpointing is ``selective_ac_option = "op"``, and its float32 loss, eager or compiled
    (``torchtitan_loss``), in place of the lab's chunked one."""
    w = row.workload
    tp, pp = int(w.get("tp") or 1), int(w.get("pp") or 1)
    recompute = w.get("recompute") or "none"
    if recompute == "selective" and w.get("selective_ac_option") == "op":
        recompute = "op"
    layout = Layout(
        gpus=int(row.data["hardware"]["count"]),
        tp=tp,
        pp=pp,
        zero=3 if w.get("fsdp") else 0,
        sequence_parallel=tp > 1,
        recompute=recompute,
        micro_batch=int(w["micro_batch"]),
        micro_batches=int(w.get("grad_accum") or 1),
        loss=w.get("torchtitan_loss") or "chunked",
    )
    counted = parallel_memory(cfg, layout, int(w["seq_len"]), "bf16").per_gpu["total_bytes"]
    return Prediction(counted, counted * eff.memory_factor)


def mfu(row: Row, tokens_per_s_per_gpu: float | None) -> float | None:
    """A training row's tokens per second per GPU as MFU: ``analysis.model_flops`` per token
    (``analysis.MFU_CONVENTION``) against the GPU's dense bf16 peak (fp8 runs too, as
    ``predict train``); None for other kinds."""
    cfg, gpu = row.config, row.gpu
    if row.kind != "train" or tokens_per_s_per_gpu is None or cfg is None or gpu is None:
        return None
    seq_len = int(row.workload["seq_len"])
    return tokens_per_s_per_gpu * model_flops(cfg, seq_len) / seq_len / gpu.peak_bf16_flops


def source_mfu(row: Row) -> float | None:
    """The MFU a training row's source states by its own count (llm-foundry's MFU column, the
    same convention as ``mfu``), or its model TFLOP/s per GPU against the same peak
    (Megatron-Bridge, whose count halves the causal scores); None where it states neither."""
    metric, gpu = row.data["metric"], row.gpu
    if metric.get("mfu_percent") is not None:
        return float(metric["mfu_percent"]) / 100
    if metric.get("model_tflops_per_gpu") is not None and gpu is not None:
        return float(metric["model_tflops_per_gpu"]) * 1e12 / gpu.peak_bf16_flops
    return None


def rel_error(estimate: float, measured: float) -> float:
    """(estimate − measured) / measured."""
    return (estimate - measured) / measured


@dataclass(frozen=True)
class Result:
    row: Row
    prediction: Prediction | None

    @property
    def rel_error(self) -> float | None:
        return None if self.prediction is None else rel_error(self.prediction.estimate, self.row.measured)

    @property
    def log_ratio(self) -> float | None:
        """ln(measured / estimate) of the rate or amount (``intervals.log_ratio``)."""
        p, r = self.prediction, self.row
        return None if p is None else log_ratio(r.measured, p.estimate, r.metric)

    def to_dict(self) -> dict:
        r, p = self.row, self.prediction
        return {
            "id": r.id,
            "kind": r.kind,
            "source": r.source,
            "quote": r.data["quote"],
            "model": r.data["model"]["name"],
            "gpu": r.data["hardware"]["gpu"],
            "metric": r.metric,
            "measured": r.measured,
            "bound": None if p is None else p.bound,
            "estimate": None if p is None else p.estimate,
            "rel_error": self.rel_error,
            "half": r.half,
            "not_predicted": r.why_not,
            # training rows: the measured and the estimated rate as MFU (MFU_CONVENTION), and the
            # source's own figure where it states one
            "mfu_measured": mfu(r, r.measured) if r.why_not is None else None,
            "mfu_estimate": None if p is None else mfu(r, p.estimate),
            "mfu_source": source_mfu(r),
        }


def results(eff: Efficiency, rows: tuple[Row, ...] | None = None) -> list[Result]:
    rows = load_rows() if rows is None else rows
    return [Result(r, None if r.why_not else predict_row(r, eff)) for r in rows]


# Which parameters each kind's rows inform, and how each is searched (a log grid, or a linear one
# for the fixed seconds): deterministic coordinate descent on the fit half's mean |log error|.
GRIDS: dict[str, list[float]] = {
    "share": [0.02 * 1.02**i for i in range(200) if 0.02 * 1.02**i <= 1.0],  # of a peak: ≤ 1
    "seconds": [0.0] + [1e-6 * 1.1**i for i in range(160)],
    "factor": [0.5 * 1.01**i for i in range(140)],  # 0.5 … 2.0
    "bytes": [i * 2**25 for i in range(129)],  # 0 … 4 GiB in steps of 32 MiB
}
PARAMETERS: dict[str, tuple[tuple[str, str], ...]] = {
    # kind → (parameter path, grid), fitted in this order (train first: decode's and prefill's
    # tensor-parallel all-reduces run at the link share its rows fit)
    "train": (
        ("train_bf16", "share"),
        ("train_fp8", "share"),
        ("train_attention", "share"),
        ("tp_link", "share"),
    ),
    "decode": (
        ("decode_bw.16-bit", "share"),
        ("decode_bw.8-bit", "share"),
        ("decode_bw.4-bit", "share"),
        ("layer_s", "seconds"),
        ("tp_layer_s", "seconds"),
    ),
    # a mixture of experts' training rows inform its grouped GEMMs' share alone, after the dense
    # rows have fitted the shares its other terms run at
    "moe_train": (("moe_gemm", "share"),),
    "prefill": (("matmul", "share"), ("matmul_fp8", "share"), ("prefill_floor_s", "seconds")),
    "memory": (("memory_factor", "factor"),),
    "kv_capacity": (("engine_non_torch_bytes", "bytes"),),
    "finetune_memory": (("finetune_memory_factor", "factor"),),
    "finetune_throughput": (("finetune_matmul", "share"),),
    # eager rows (decode or prefill run without torch.compile or CUDA graphs) inform the launch
    # cost alone, after the compiled rows have fitted everything else
    "eager": (("launch_s", "seconds"),),
}
REGIME = {
    "decode_bs1": "decode",
    "decode_batched": "decode",
    "prefill": "prefill",
    "train": "train",
    "memory": "memory",
    "kv_capacity": "kv_capacity",
    "finetune_memory": "finetune_memory",
    "finetune_throughput": "finetune_throughput",
}


def regime_of(row: Row) -> str | None:
    """The parameters a row informs: its kind's regime, "eager" (the launch cost alone) for a
    decode or prefill row that ran eagerly, or "moe_train" (``moe_gemm`` alone) for a mixture of
    experts' training row."""
    if row.runtime == "eager" and REGIME.get(row.kind) in ("decode", "prefill"):
        return "eager"
    if row.kind == "train" and row.config is not None and row.config.is_moe:
        return "moe_train"
    return REGIME.get(row.kind)


def _set(eff: Efficiency, path: str, value: float) -> Efficiency:
    """``eff`` with the parameter at ``path`` ("matmul", or "decode_bw.16-bit") set to ``value``."""
    name, _, key = path.partition(".")
    changed: dict[str, Any] = {name: {**getattr(eff, name), key: value} if key else value}
    return replace(eff, **changed)


def _loss(eff: Efficiency, rows: list[Row]) -> float:
    errors = [abs(math.log(predict_row(r, eff).estimate / r.measured)) for r in rows]
    return sum(errors) / len(errors)


def fit(rows: tuple[Row, ...] | None = None, sweeps: int = 4) -> tuple[Efficiency, dict[str, int]]:
    """The parameters that minimise the mean |log(estimate / measured)| over the ``fit`` half of
    each regime's rows (coordinate descent over fixed grids, from the defaults); and how many
    fit rows informed each regime (a regime with none keeps its defaults)."""
    rows = load_rows() if rows is None else rows
    eff, informed = Efficiency(), {}
    for regime, params in PARAMETERS.items():
        used = [r for r in rows if r.half == "fit" and not r.why_not and regime_of(r) == regime]
        informed[regime] = len(used)
        if not used:
            continue
        for _ in range(sweeps):
            for path, grid in params:
                eff = min((_set(eff, path, v) for v in GRIDS[grid]), key=lambda e: _loss(e, used))
    return eff, informed


def cross_validated(rows: tuple[Row, ...] | None = None, sweeps: int = 4) -> dict[str, float]:
    """Each predicted fit-half row's ``log_ratio`` under the parameters fitted without it (leave
    one out): the errors the intervals are built from (``intervals``)."""
    rows = load_rows() if rows is None else rows
    out = {}
    for row in rows:
        if row.half != "fit" or row.why_not:
            continue
        eff, _ = fit(tuple(r for r in rows if r is not row), sweeps)
        out[row.id] = log_ratio(row.measured, predict_row(row, eff).estimate, row.metric)
    return out


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def summary(found: list[Result], unseen: Mapping[str, float] | None = None) -> dict[str, dict]:
    """Per kind: rows, rows predicted, the median and worst |relative error| of each half, and
    the interval (``intervals``; from the fit rows' ``unseen`` ratios where given,
    ``cross_validated``): its level, its ends as measured / estimate, the rows it is built from,
    and the share of the held-out rows it holds."""
    out = {}
    for kind in KINDS:
        mine = [r for r in found if r.row.kind == kind]
        fitted = [abs(r.rel_error) for r in mine if r.rel_error is not None and r.row.half == "fit"]
        held = [abs(r.rel_error) for r in mine if r.rel_error is not None and r.row.half == "held_out"]
        interval = kind_interval(found, kind, unseen=unseen)
        out[kind] = {
            "n": len(mine),
            "predicted": sum(r.prediction is not None for r in mine),
            "fit_median_abs_error": _median(fitted),
            "held_out_median_abs_error": _median(held),
            "held_out_max_abs_error": max(held) if held else None,
            "interval_level": interval.level,
            "interval_ratio": interval.ratios,
            "interval_from": interval.built_from,
            "held_out_coverage": held_out_coverage(found, interval),
        }
    return out


def percent(x: float | None) -> str:
    """A share as text, one decimal ("—" for none)."""
    return "—" if x is None else f"{100 * x:.1f} %"


def ratio_range(ratios: list[float]) -> str:
    """An interval's ends as measured / estimate: "×0.61 – ×1.15"."""
    return " – ".join(f"×{x:.2f}" for x in ratios)


def summary_markdown(summaries: dict[str, dict]) -> str:
    """The summary as docs/cli.md's table: rows, predicted, the fit half's median and the
    held-out median and worst |error| of each kind, its interval at the level and the share
    of the held-out rows inside."""
    level = next(iter(summaries.values()))["interval_level"] if summaries else INTERVAL_LEVEL
    lines = [
        "| kind | rows | predicted | fit half: median \\|error\\| "
        f"| held-out median \\|error\\| | held-out worst | {100 * level:.0f} % interval "
        "| held out inside |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for kind in (k for k in KINDS if k in summaries):
        s = summaries[kind]
        errors = (s["fit_median_abs_error"], s["held_out_median_abs_error"], s["held_out_max_abs_error"])
        cells = [*map(percent, errors), ratio_range(s["interval_ratio"]), percent(s["held_out_coverage"])]
        lines.append(f"| `{kind}` | {s['n']} | {s['predicted']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def validate(kind: str | None = None, eff: Efficiency | None = None) -> dict:
    """The ``validate`` answer: every row (or those of ``kind``) and the summary per kind."""
    if kind is not None and kind not in KINDS:
        raise LabError(f"--kind {kind!r} must be one of {', '.join(KINDS)}")
    unseen = shipped_cross_validated() if eff is None else None  # (the shipped fit's)
    eff = eff or Efficiency.load()
    found = results(eff)
    shown = [r for r in found if kind is None or r.row.kind == kind]
    return {
        "parameters": eff.to_dict(),
        "meaning": Efficiency.MEANING,
        "mfu_convention": MFU_CONVENTION,
        "rows": [r.to_dict() for r in shown],
        "summary": summary(found, unseen) if kind is None else {kind: summary(found, unseen)[kind]},
    }
