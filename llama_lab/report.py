"""The full report of one model: every analysis table and figure, the seed's claims, any live
experiment results, and the environment — rendered as one self-contained HTML file (plotly.js
inlined once, so it opens offline), JSON (plain numbers), Markdown tables, or a zip of CSVs.

``build_report`` collects; ``render`` / ``render_csv`` only format what was collected, so every
format holds the same numbers. The JSON keeps ``analysis.analyze`` verbatim under ``analysis``
next to every table as a list of records.

CSV: a zip holding one ``<table name>.csv`` per table (see ``Report.tables``), plus
``index.csv`` listing each file's section and title.
"""
from __future__ import annotations

import datetime as _dt
import html
import io
import json
import math
import numbers
import platform
import zipfile
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from . import analysis, claims, experiment_plots, hardware, plots
from . import experiments as exps
from .config import ConfigError, ModelConfig

FORMATS = ("html", "json", "md", "csv")
DEFAULT_GPU = "H100 80GB"
ZERO_GPUS = 8                                  # data-parallel width of the ZeRO / FSDP table
ROOFLINE_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
SWEEP_POINTS = 40
MAX_SHOWN_ROWS = 400       # HTML and Markdown show this many rows of a table; JSON and CSV all

# The experiments a report can carry, in the order they are shown, with their result types.
EXPERIMENT_TYPES: dict[str, type] = {
    "gradnorms": exps.GradNormComparison,
    "depth_sweep": exps.DepthSweep,
    "training": exps.RunComparison,
    "ablation": exps.RunComparison,
    "live_pass": exps.LivePass,
    "decode": exps.DecodeBench,
}
EXPERIMENT_TITLES = {
    "gradnorms": "Gradient norms: Post-LN vs Pre-LN",
    "depth_sweep": "Depth sweep (Xiong et al. 2020)",
    "training": "Training runs: Post-LN / Pre-LN × warmup",
    "ablation": "Training contrasts of the 2017-vs-LLaMA table",
    "live_pass": "Live pass",
    "decode": "KV-cache decoding: MHA / GQA / MQA",
}
EXPERIMENT_STATE_PREFIX = "llama_lab.experiment."


def experiment_state_key(kind: str) -> str:
    """The session-state key under which the app keeps this session's ``ExperimentEntry`` of
    ``kind`` (the pages write it, the Report page reads it)."""
    if kind not in EXPERIMENT_TYPES:
        raise ReportError(f"experiment kind={kind!r} must be one of {', '.join(EXPERIMENT_TYPES)}")
    return EXPERIMENT_STATE_PREFIX + kind


class ReportError(ConfigError):
    """A report that cannot be built or rendered; the message says why."""


@dataclass(frozen=True, eq=False)
class ExperimentEntry:
    """One experiment result with the config it ran on and the settings it was run with."""
    kind: str
    result: Any                                   # an EXPERIMENT_TYPES[kind] instance
    config: ModelConfig | None = None
    settings: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "config": self.config.to_dict() if self.config else None,
                "settings": dict(self.settings), "result": self.result.to_dict()}


@dataclass(frozen=True, eq=False)
class Table:
    name: str                                     # file-safe id; the CSV file name
    title: str
    section: str
    frame: pd.DataFrame
    note: str = ""


@dataclass(frozen=True, eq=False)
class Figure:
    name: str
    title: str
    section: str
    figure: go.Figure


@dataclass(frozen=True, eq=False)
class Report:
    title: str
    config: dict
    hf_config: dict | None
    hf_config_note: str | None                    # why there is no HF config.json
    workload: dict                                # seq_len, batch, dtype, gpu
    analysis: dict                                # analysis.analyze(...) verbatim
    tables: tuple                                 # Table, in display order
    figures: tuple                                # Figure, in display order
    claims: tuple                                 # Claim.to_dict() of every seed claim
    experiments: dict                             # kind → ExperimentEntry.to_dict()
    environment: dict
    notes: tuple

    @property
    def sections(self) -> list[str]:
        seen: dict[str, None] = {}
        for item in (*self.tables, *self.figures):
            seen.setdefault(item.section, None)
        return list(seen)

    def table(self, name: str) -> Table:
        for table in self.tables:
            if table.name == name:
                return table
        raise KeyError(name)

    def to_dict(self) -> dict:
        return _plain({
            "title": self.title, "config": self.config, "hf_config": self.hf_config,
            "hf_config_note": self.hf_config_note, "workload": self.workload,
            "analysis": self.analysis,
            "tables": {t.name: {"title": t.title, "section": t.section, "note": t.note,
                                "columns": [str(c) for c in t.frame.columns],
                                "rows": t.frame.to_dict(orient="records")} for t in self.tables},
            "figures": [{"name": f.name, "title": f.title, "section": f.section}
                        for f in self.figures],
            "claims": list(self.claims), "experiments": self.experiments,
            "environment": self.environment, "notes": list(self.notes)})


# ---- plain JSON -------------------------------------------------------------------------------------
def _plain(value: Any) -> Any:
    """JSON-ready copy: numpy scalars to Python, NaN/inf to None, tuples to lists."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):     # numpy scalar
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if value is pd.NA or value is pd.NaT:
        return None
    return str(value)


# ---- collecting ------------------------------------------------------------------------------------
def _frame(mapping: Mapping, key: str, value: str) -> pd.DataFrame:
    return pd.DataFrame({key: list(mapping), value: list(mapping.values())})


def environment() -> dict:
    versions = {}
    for package in ("torch", "streamlit", "plotly", "pandas", "numpy"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    from . import __version__
    device = exps.pick_device("auto")
    return {"llama_lab": __version__, "python": platform.python_version(), **versions,
            "platform": platform.platform(), "device": str(device),
            "device_name": exps.device_name(device),
            "time_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}


def _config_tables(cfg: ModelConfig, hf: dict | None) -> list[Table]:
    ours = cfg.to_dict()
    derived = {"head_dim": cfg.head_dim, "n_rep (query heads per KV head)": cfg.n_rep,
               "attention_kind": cfg.attention_kind, "is_llama_style": cfg.is_llama_style}
    frame = pd.DataFrame({"field": [*ours, *derived],
                          "value": [str(v) for v in (*ours.values(), *derived.values())]})
    tables = [Table("config", "ModelConfig (and derived values)", "Configuration", frame)]
    if hf is not None:
        tables.append(Table("hf_config", "Hugging Face config.json (LlamaConfig keys)",
                            "Configuration", pd.DataFrame({"key": list(hf),
                                                           "value": [json.dumps(v) for v in hf.values()]})))
    return tables


def _analysis_parts(cfg: ModelConfig, seq_len: int, batch: int, dtype: str,
                    gpu: hardware.GPU) -> tuple[list[Table], list[Figure]]:
    params = analysis.count_params(cfg)
    flops = analysis.count_flops(cfg, seq_len, batch)
    kv = analysis.kv_cache(cfg, seq_len, batch, dtype)
    training_dtype = dtype if dtype in analysis.TRAINING_DTYPES else "bf16"
    inference = analysis.inference_memory(cfg, seq_len, batch, dtype)
    at = f"B={batch}, T={seq_len:,}"

    tables = [
        Table("params_by_component", "Parameters by component", "Parameters", params.to_frame(),
              "A tied lm_head counts 0; the components sum to the total "
              f"({params.total:,}; non-embedding {params.non_embedding:,}; per block "
              f"{params.per_layer:,})."),
        Table("params_detail", "Parameters by tensor kind (all blocks)", "Parameters",
              _frame(params.detail, "tensor", "params")),
        Table("params_per_block", "One decoder block: parameters and its component's FLOPs",
              "Parameters", plots.block_table(cfg, flops)),
        Table("flops_by_component", f"Forward FLOPs by component ({at})", "FLOPs",
              flops.to_frame(), "2 FLOPs per multiply-add; attention scores over the full T×T. "
                                f"Forward {flops.forward:,}; training step (3×) "
                                f"{flops.training_step:,}; causal scores only "
                                f"{flops.attention_scores_causal:,}."),
        Table("flops_elementwise", "Element-wise FLOPs (not in the forward total)", "FLOPs",
              _frame(flops.elementwise, "operation", "flops")),
        Table("flops_conventions", "Counting conventions", "FLOPs",
              pd.DataFrame({"convention": flops.conventions})),
        Table("kv_cache_attention", f"KV cache: MHA vs GQA vs MQA ({at}, {dtype})", "KV cache",
              kv.to_frame(), kv.note),
        Table("kv_cache_by_dtype", "KV cache bytes per token by dtype", "KV cache",
              _frame(kv.by_dtype, "dtype", "bytes_per_token")),
        Table("gpu_fit", f"What fits each GPU (weights + KV cache, {at}, {dtype})", "KV cache",
              pd.concat([plots.kv_fit_frame(cfg, g, seq_len, batch, dtype).assign(gpu=name)
                         for name, g in hardware.GPUS.items()], ignore_index=True)
              [["gpu", "attention", "n_kv_heads", "kv_bytes_per_token", "kv_cache_bytes",
                "weight_bytes", "max_context_at_batch", "max_batch_at_seq_len", "is_current"]]),
        Table("memory_inference", f"Inference memory ({at}, {dtype})", "Memory",
              inference.to_frame(), "; ".join(inference.notes)),
        Table("memory_training", f"Training memory per GPU, AdamW, {training_dtype} "
                                 f"({'mixed precision' if training_dtype != 'fp32' else 'fp32'}), "
                                 f"{batch} sequences of {seq_len:,} per GPU", "Memory",
              _training_table(cfg, seq_len, batch, training_dtype),
              f"ZeRO stages and FSDP across {ZERO_GPUS} GPUs (Rajbhandari et al. 2020); "
              "activations are never sharded."),
        Table("roofline_workload", f"Roofline of this workload on every GPU ({at}, {dtype})",
              "Roofline", _roofline_by_gpu(cfg, seq_len, batch, dtype)),
        Table("roofline_decode", f"Decode roofline on {gpu.name}: MHA / GQA / MQA over batch × "
                                 f"context ({dtype})", "Roofline",
              analysis.roofline_table(cfg, gpu, dtype=dtype), gpu.source),
        Table("gpus", "GPUs (data-sheet peaks)", "Roofline",
              pd.DataFrame([g.to_dict() for g in hardware.GPUS.values()])),
    ]

    crossover = analysis.scores_overtake_ffn_at(cfg)
    upper = max(cfg.max_seq_len, seq_len, 2 * crossover if crossover else 0, 1024)
    upper = min(upper, 16_777_216)
    counts = [analysis.count_flops(cfg, length, batch) for length in plots.sweep_lengths(upper, points=SWEEP_POINTS)]
    curve = plots.kv_memory_curve_frame(cfg, plots.sweep_lengths(upper, points=SWEEP_POINTS), batch, dtype)
    points = plots.roofline_points(cfg, gpu, ROOFLINE_BATCHES, seq_len, dtype)
    figures = [
        Figure("params_sunburst", "Parameters by component", "Parameters",
               plots.params_sunburst(params)),
        Figure("flops_bar", "Forward FLOPs by component", "FLOPs", plots.flops_bar(flops)),
        Figure("flops_vs_seq_len", "Forward FLOPs per token against sequence length", "FLOPs",
               plots.flops_vs_seq_len(counts, crossover, seq_len)),
        Figure("kv_sharing", "Query heads and the KV heads they read", "KV cache",
               plots.kv_sharing_diagram(cfg.n_heads, cfg.n_kv_heads)),
        Figure("kv_memory_vs_context", "Weights + KV cache against context", "KV cache",
               plots.kv_memory_vs_context(curve, gpu)),
        Figure("roofline", f"Decode roofline on {gpu.name}", "Roofline",
               plots.roofline_figure(points, gpu)),
        Figure("decode_throughput", "Decode throughput bound", "Roofline",
               plots.decode_throughput(points)),
    ]
    return tables, figures


def _training_table(cfg: ModelConfig, seq_len: int, batch: int, dtype: str) -> pd.DataFrame:
    """Components (rows) × sharding scheme (columns), bytes per GPU."""
    columns = {}
    for sharding in analysis.SHARDINGS:
        n_gpus = 1 if sharding == "none" else ZERO_GPUS
        estimate = analysis.training_memory(cfg, seq_len, batch, dtype, sharding=sharding,
                                            n_gpus=n_gpus)
        label = "unsharded (1 GPU)" if sharding == "none" else f"{sharding} ({n_gpus} GPUs)"
        columns[label] = {**estimate.per_gpu_components, "total per GPU": estimate.per_gpu_bytes}
    frame = pd.DataFrame(columns)
    return frame.rename_axis("component").reset_index()


def _roofline_by_gpu(cfg: ModelConfig, seq_len: int, batch: int, dtype: str) -> pd.DataFrame:
    rows = []
    for name, gpu in hardware.GPUS.items():
        for phase in ("prefill", "decode"):
            r = analysis.roofline(cfg, gpu, batch, seq_len, dtype, phase)
            rows.append({"gpu": name, "phase": phase, "flops": r.flops,
                         "bytes_moved": r.bytes_moved,
                         "arithmetic_intensity": r.arithmetic_intensity,
                         "ridge_point": r.ridge_point, "bound": r.bound,
                         "time_per_step_ms": 1e3 * r.time_per_step_s,
                         "tokens_per_s": r.tokens_per_s})
    return pd.DataFrame(rows)


def _claims_part() -> tuple[tuple, list[Table]]:
    found = claims.seed_claims()
    frame = claims.claims_frame(found)
    frame.insert(0, "holds", ["✓" if c.verdict else "✗" for c in found])
    note = (f"{sum(c.verdict for c in found)} of {len(found)} hold. The seed tutorial "
            f"({claims.SEED_SOURCE}) recomputed; these concern fixed models, not this config.")
    return tuple(c.to_dict() for c in found), [Table("seed_claims", "The seed's claims, "
                                                     "recomputed", "Seed claims", frame, note)]


def _as_entry(kind: str, value: Any) -> ExperimentEntry:
    if kind not in EXPERIMENT_TYPES:
        raise ReportError(f"experiment kind={kind!r} must be one of {', '.join(EXPERIMENT_TYPES)}")
    entry = value if isinstance(value, ExperimentEntry) else ExperimentEntry(kind, value)
    if entry.kind != kind:
        raise ReportError(f"experiments[{kind!r}] holds a {entry.kind!r} entry")
    expected = EXPERIMENT_TYPES[kind]
    if not isinstance(entry.result, expected):
        raise ReportError(f"experiments[{kind!r}] must be a {expected.__name__}, "
                          f"got {type(entry.result).__name__}")
    return entry


def _experiment_parts(entry: ExperimentEntry) -> tuple[list[Table], list[Figure]]:
    kind, result, section = entry.kind, entry.result, EXPERIMENT_TITLES[entry.kind]
    ran_on = ""
    if entry.config is not None:
        c = entry.config
        ran_on = (f"Ran on d={c.d_model}, {c.n_layers} layers, {c.n_heads} heads / "
                  f"{c.n_kv_heads} KV, vocab {c.vocab_size}, {c.norm_position}-norm "
                  f"{c.norm_type}, {c.ffn_type} FFN {c.ffn_hidden}. ")
    ran_on += "; ".join(f"{k}={v}" for k, v in entry.settings.items())
    ep = experiment_plots
    if kind == "gradnorms":
        tables = [Table("gradnorms_summary", "Loss and whole-model gradient norms", section,
                        ep.gradnorm_summary(result), ran_on),
                  Table("gradnorms_per_layer", "Per-block gradient norms", section,
                        result.to_frame()),
                  Table("gradnorms_by_group", "Per-group gradient norms (one column per block)",
                        section, ep.group_table(result))]
        figures = [Figure("gradnorms_profile", "Gradient norms per block", section,
                          ep.gradnorm_profile(result))]
    elif kind == "depth_sweep":
        tables = [Table("depth_sweep_slopes", "Fitted log-log slopes vs Theorem 1", section,
                        ep.depth_sweep_table(result), ran_on),
                  Table("depth_sweep", "Last block's ‖∇W_down‖ by depth", section,
                        result.to_frame())]
        figures = [Figure("depth_sweep", "Depth sweep", section, ep.depth_sweep_figure(result))]
    elif kind in ("training", "ablation"):
        tables = [Table(f"{kind}_summary", "Runs", section, result.summary_frame(), ran_on),
                  Table(f"{kind}_steps", "Every step of every run", section, result.to_frame()),
                  Table(f"{kind}_layer_grad_norm", "Per-block gradient norm at every step",
                        section, ep.layer_grad_long(result)),
                  Table(f"{kind}_logits", "Logits after training, with and without the final "
                                           "norm", section, ep.run_logits_table(result))]
        figures = [Figure(f"{kind}_curves", "Loss and learning rate", section,
                          ep.training_curves(result)),
                   Figure(f"{kind}_heatmaps", "Per-block gradient norms (block × step)",
                          section, ep.training_heatmaps(result))]
    elif kind == "live_pass":
        tables = [Table("live_pass", "Measured vs predicted", section, ep.live_summary(result),
                        ran_on),
                  Table("live_pass_memory", "Memory after the warm-up step: measured vs "
                                            "predicted", section,
                        ep.live_memory_table(result, entry.config)),
                  Table("live_pass_logits", "Logits at the initial weights", section,
                        ep.logits_table(result.logits, result.logits_without_final_norm,
                                        result.ln_vocab))]
        figures = [Figure("live_pass_phases", "Step time by phase", section,
                          ep.live_phase_figure(result))]
    else:  # decode
        tables = [Table("decode", "Decode speed and cache bytes", section, result.to_frame(),
                        ran_on + (" " if ran_on else "") + "Cache bytes "
                        + ("match" if result.bytes_agree else "DO NOT match")
                        + " analysis.kv_cache_bytes_per_token × batch × tokens.")]
        figures = [Figure("decode", "Decode speed and cache bytes", section,
                          ep.decode_figure(result))]
    return tables, figures


def build_report(cfg: ModelConfig, seq_len: int, batch: int, notes=(),
                 experiments: Mapping[str, Any] | None = None, *, dtype: str = "bf16",
                 gpu: str = DEFAULT_GPU) -> Report:
    """Everything the lab knows about ``cfg`` at B × T (``dtype`` for weights and KV cache;
    ``gpu`` for the roofline tables), plus the given experiment results (kind → result object
    or ``ExperimentEntry``)."""
    if gpu not in hardware.GPUS:
        raise ReportError(f"gpu={gpu!r} must be one of {', '.join(hardware.GPUS)}")
    entries = [_as_entry(kind, value) for kind, value in (experiments or {}).items()]
    entries.sort(key=lambda e: list(EXPERIMENT_TYPES).index(e.kind))
    result = analysis.analyze(cfg, seq_len, batch, dtype)       # validates seq_len, batch, dtype
    try:
        hf, hf_note = cfg.to_hf_config(), None
    except ConfigError as exc:
        hf, hf_note = None, str(exc)

    tables = _config_tables(cfg, hf)
    analysis_tables, figures = _analysis_parts(cfg, seq_len, batch, dtype, hardware.GPUS[gpu])
    tables += analysis_tables
    comparison = claims.architecture_comparison(cfg, seq_len, batch, dtype)
    tables.append(Table("architecture_comparison", "The seed's 2017 → LLaMA table, each row "
                                                   "switched on this config", "Architecture comparison",
                        comparison.to_frame().drop(columns="ablation"),
                        f"Everything else equal; FLOPs: one forward over B={batch} × "
                        f"T={seq_len:,}; KV bytes at {dtype}."))
    claim_dicts, claim_tables = _claims_part()
    tables += claim_tables
    for entry in entries:
        more_tables, more_figures = _experiment_parts(entry)
        tables += more_tables
        figures += more_figures
    env = environment()
    tables.append(Table("environment", "Environment", "Environment", _frame(env, "item", "value")))
    return Report(
        title=f"LLaMA Lab report — {cfg.attention_kind}, {analysis.count_params(cfg).total:,} "
              f"parameters, B={batch}, T={seq_len:,}, {dtype}",
        config=cfg.to_dict(), hf_config=hf, hf_config_note=hf_note,
        workload={"seq_len": seq_len, "batch": batch, "dtype": dtype, "gpu": gpu},
        analysis=result, tables=tuple(tables), figures=tuple(figures), claims=claim_dicts,
        experiments={e.kind: _plain(e.to_dict()) for e in entries}, environment=env,
        notes=tuple(notes))


# ---- rendering ---------------------------------------------------------------------------------------
def _cell(value: Any) -> str:
    """Display text of one table cell: thousands separators, 4 significant digits."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, bool):
        return "✓" if value else "✗"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return f"{int(value):,}"
        return f"{value:.4g}"
    return str(value)


def _anchor(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text.lower()).strip("-")


CSS = """
body { font-family: -apple-system, "Segoe UI", Roboto, Helvetica, Arial, "Noto Sans CJK SC",
       "PingFang SC", "Microsoft YaHei", sans-serif;
       max-width: 1200px; margin: 2em auto; padding: 0 1em; color: #222; line-height: 1.45; }
h1 { font-size: 1.6em; border-bottom: 2px solid #ddd; padding-bottom: .3em; }
h2 { font-size: 1.3em; margin-top: 2em; border-bottom: 1px solid #eee; padding-bottom: .2em; }
h3 { font-size: 1.05em; margin-top: 1.5em; }
table { border-collapse: collapse; margin: .5em 0 1em; font-size: .85em; display: block;
        overflow-x: auto; max-width: 100%; }
th, td { border: 1px solid #ddd; padding: .25em .6em; vertical-align: top; }
th { background: #f4f6f8; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr:nth-child(even) td { background: #fafafa; }
p.note { color: #555; font-size: .9em; margin-top: -.3em; }
pre { background: #f6f8fa; padding: .8em; overflow-x: auto; font-size: .85em; }
nav ul { columns: 2; }
.figure { margin: 1em 0 2em; }
"""


def _rows_left_out(frame: pd.DataFrame) -> str:
    left_out = len(frame) - MAX_SHOWN_ROWS
    return (f"First {MAX_SHOWN_ROWS:,} of {len(frame):,} rows; all of them are in the JSON and "
            f"CSV downloads.") if left_out > 0 else ""


def _html_table(frame: pd.DataFrame) -> str:
    note = _rows_left_out(frame)
    frame = frame.head(MAX_SHOWN_ROWS)
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    rows = []
    for record in frame.itertuples(index=False):
        cells = []
        for value in record:
            numeric = isinstance(value, numbers.Number) and not isinstance(value, (bool, np.bool_))
            klass = ' class="num"' if numeric else ""
            cells.append(f"<td{klass}>{html.escape(_cell(value))}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    return table + (f'<p class="note">{note}</p>' if note else "")


def render_html(report: Report) -> str:
    from plotly.offline import get_plotlyjs

    parts = [f"<h1>{html.escape(report.title)}</h1>",
             f"<p>Generated {html.escape(report.environment['time_utc'])} by LLaMA Lab "
             f"{html.escape(str(report.environment['llama_lab']))}. Workload: "
             + ", ".join(f"{k} = {html.escape(str(v))}" for k, v in report.workload.items())
             + ". Every number is computed; FLOPs count 2 per multiply-add.</p>"]
    for note in report.notes:
        parts.append(f'<p class="note">Note: {html.escape(str(note))}</p>')
    parts.append("<nav><ul>" + "".join(
        f'<li><a href="#{_anchor(s)}">{html.escape(s)}</a></li>' for s in report.sections)
        + "</ul></nav>")
    for section in report.sections:
        parts.append(f'<h2 id="{_anchor(section)}">{html.escape(section)}</h2>')
        if section == "Configuration" and report.hf_config_note:
            parts.append(f'<p class="note">No Hugging Face config.json: '
                         f'{html.escape(report.hf_config_note)}</p>')
        for figure in (f for f in report.figures if f.section == section):
            div = figure.figure.to_html(full_html=False, include_plotlyjs=False,
                                        div_id=f"figure-{figure.name}",
                                        config={"displaylogo": False, "responsive": True})
            parts.append(f'<div class="figure">{div}</div>')
        for table in (t for t in report.tables if t.section == section):
            parts.append(f"<h3>{html.escape(table.title)}</h3>")
            if table.note:
                parts.append(f'<p class="note">{html.escape(table.note)}</p>')
            parts.append(_html_table(table.frame))
    body = "\n".join(parts)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(report.title)}</title>"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<style>{CSS}</style>"
            # plotly.js, inlined once: the file opens offline.
            f"<script type=\"text/javascript\">{get_plotlyjs()}</script>"
            f"</head><body>\n{body}\n</body></html>\n")


def render_json(report: Report) -> str:
    return json.dumps(report.to_dict(), indent=1, ensure_ascii=False, allow_nan=False)


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(frame: pd.DataFrame) -> str:
    header = "| " + " | ".join(_md_escape(str(c)) for c in frame.columns) + " |"
    rule = "|" + "|".join("---:" if pd.api.types.is_numeric_dtype(frame[c]) and
                          not pd.api.types.is_bool_dtype(frame[c]) else "---"
                          for c in frame.columns) + "|"
    rows = ["| " + " | ".join(_md_escape(_cell(v)) for v in record) + " |"
            for record in frame.head(MAX_SHOWN_ROWS).itertuples(index=False)]
    note = _rows_left_out(frame)
    return "\n".join([header, rule, *rows] + (["", note] if note else []))


def render_markdown(report: Report) -> str:
    lines = [f"# {report.title}", "",
             f"Generated {report.environment['time_utc']}. Workload: "
             + ", ".join(f"{k} = {v}" for k, v in report.workload.items()) + ".", ""]
    lines += [f"> Note: {note}" for note in report.notes]
    for section in report.sections:
        lines += ["", f"## {section}", ""]
        if section == "Configuration" and report.hf_config_note:
            lines += [f"No Hugging Face config.json: {report.hf_config_note}", ""]
        for figure in (f for f in report.figures if f.section == section):
            lines += [f"*Figure: {figure.title} (interactive in the HTML report).*", ""]
        for table in (t for t in report.tables if t.section == section):
            lines += [f"### {table.title}", ""]
            if table.note:
                lines += [table.note, ""]
            lines += [markdown_table(table.frame), ""]
    return "\n".join(lines) + "\n"


def render_csv(report: Report) -> bytes:
    """A zip archive: one ``<name>.csv`` per table (raw numbers, no formatting) and
    ``index.csv`` (file, section, title, note)."""
    buffer = io.BytesIO()
    index = []
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for table in report.tables:
            archive.writestr(f"{table.name}.csv", table.frame.to_csv(index=False))
            index.append({"file": f"{table.name}.csv", "section": table.section,
                          "title": table.title, "note": table.note})
        archive.writestr("index.csv", pd.DataFrame(index).to_csv(index=False))
    return buffer.getvalue()


def render(report: Report, fmt: str) -> str | bytes:
    """``html``, ``json`` and ``md`` give text; ``csv`` gives the zip's bytes."""
    renderers = {"html": render_html, "json": render_json, "md": render_markdown,
                 "csv": render_csv}
    if fmt not in renderers:
        raise ReportError(f"format={fmt!r} must be one of {', '.join(FORMATS)}")
    return renderers[fmt](report)
