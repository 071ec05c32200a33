"""The full report of one model: every analysis table and figure, the seed's claims, any live
experiment results (each kind's own tables and figures, from the experiment registry), and
the environment. ``build_report`` collects; ``formats`` only formats what was collected, so
every format holds the same numbers. The JSON keeps ``analysis.analyze`` verbatim under
``analysis`` next to every table as a list of records.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import platform
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Mapping

import pandas as pd

from .. import analysis
from ..analysis import layouts
from ..analysis.common import training_dtype
from ..analysis.korthikanti import compare
from ..analysis.summary import architecture, family_notes
from ..config import ConfigError, ModelConfig
from ..errors import ReportError
from ..experiments import KINDS, ExperimentEntry
from ..figures.common import Figure, Table, sweep_lengths
from ..figures.kv import (
    kv_context_lengths,
    kv_dtype_frame,
    kv_fit_frame,
    kv_memory_curve_frame,
    kv_memory_vs_context,
    kv_sharing_diagram,
    weights_by_format,
)
from ..figures.parallel import korthikanti_frames, search_frame, serving_frame
from ..figures.params import block_table, flops_bar, flops_sweep_upper, flops_vs_seq_len, params_sunburst
from ..figures.rooflines import ROOFLINE_BATCHES, decode_throughput, roofline_figure, roofline_points
from ..runtime.devices import device_name, pick_device
from ..runtime.hardware import GPU, GPUS
from ..seed import SEED_SOURCE, architecture_comparison, claims_frame, seed_claims
from ..units import plural

ZERO_GPUS = 8  # data-parallel width of the ZeRO / FSDP table


@dataclass(frozen=True)
class Precision:
    """What the report computes in (``dtype``) and stores the weights and the KV cache at."""

    dtype: str
    weights: str
    kv: str

    @classmethod
    def of(cls, dtype: str, weights: str | None = None, kv: str | None = None) -> "Precision":
        return cls(dtype, weights or dtype, kv or dtype)

    @property
    def training(self) -> str:
        return training_dtype(self.dtype)

    def __str__(self) -> str:
        if self.weights == self.kv == self.dtype:
            return self.dtype
        return f"{self.dtype}, weights {self.weights}, KV cache {self.kv}"


@dataclass(frozen=True, eq=False)
class Report:
    title: str
    config: dict
    hf_config: dict | None
    hf_config_note: str | None  # why there is no HF config.json
    workload: dict  # seq_len, batch, dtype, gpu
    analysis: dict  # analysis.analyze(...) verbatim
    tables: tuple  # Table, in display order
    figures: tuple  # Figure, in display order
    claims: tuple  # Claim.to_dict() of every seed claim
    experiments: dict  # kind → ExperimentEntry.to_dict()
    environment: dict
    notes: tuple
    name: str = ""  # the model's name (an upload's), if any

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
        return _plain(
            {
                "title": self.title,
                "name": self.name,
                "config": self.config,
                "hf_config": self.hf_config,
                "hf_config_note": self.hf_config_note,
                "workload": self.workload,
                "analysis": self.analysis,
                "tables": {
                    t.name: {
                        "title": t.title,
                        "section": t.section,
                        "note": t.note,
                        "columns": [str(c) for c in t.frame.columns],
                        "rows": t.frame.to_dict(orient="records"),
                    }
                    for t in self.tables
                },
                "figures": [{"name": f.name, "title": f.title, "section": f.section} for f in self.figures],
                "claims": list(self.claims),
                "experiments": self.experiments,
                "environment": self.environment,
                "notes": list(self.notes),
            }
        )


def _plain(value: Any) -> Any:
    """JSON-ready copy: numpy scalars to Python, NaN/inf to None, tuples to lists."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # numpy scalar
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if value is pd.NA or value is pd.NaT:
        return None
    return str(value)


def _frame(mapping: Mapping, key: str, value: str) -> pd.DataFrame:
    return pd.DataFrame({key: list(mapping), value: list(mapping.values())})


def environment() -> dict:
    versions = {}
    for package in ("torch", "streamlit", "plotly", "pandas", "numpy"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    from .. import __version__

    device = pick_device("auto")
    return {
        "llama_lab": __version__,
        "python": platform.python_version(),
        **versions,
        "platform": platform.platform(),
        "device": str(device),
        "device_name": device_name(device),
        "time_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def _number_or(value: Any, text) -> Any:
    """A number (not a bool) as itself, so the report writes it with separators; anything
    else as ``text(value)``."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else text(value)


def _config_tables(cfg: ModelConfig, hf: dict | None) -> list[Table]:
    ours = cfg.to_dict()
    derived = {
        "head_dim": cfg.head_dim,
        "n_rep (query heads per KV head)": cfg.n_rep,
        "attention_kind": cfg.attention_kind,
        "is_llama_style": cfg.is_llama_style,
    }
    frame = pd.DataFrame(
        {
            "field": [*ours, *derived],
            "value": [
                v if isinstance(v, bool) else _number_or(v, str) for v in (*ours.values(), *derived.values())
            ],
        },
        dtype=object,
    )
    tables = [Table("config", "ModelConfig (and derived values)", "Configuration", frame)]
    if hf is not None:  # the file's own spelling (JSON), numbers with separators
        tables.append(
            Table(
                "hf_config",
                "Hugging Face config.json (LlamaConfig keys)",
                "Configuration",
                pd.DataFrame(
                    {"key": list(hf), "value": [_number_or(v, json.dumps) for v in hf.values()]}, dtype=object
                ),
            )
        )
    return tables


def _storage_tables(cfg: ModelConfig, seq_len: int, batch: int, fmt: Precision) -> list[Table]:
    """The cache's dtype axis, the weights in every format, attention's kept bytes."""
    at = f"B={batch}, T={seq_len:,}"
    return [
        Table(
            "kv_cache_dtype_axis",
            f"KV dtype × MHA/GQA/MQA on {analysis.DEFAULT_GPU} (weights at {fmt.weights}, B={batch})",
            "KV cache",
            kv_dtype_frame(cfg, GPUS[analysis.DEFAULT_GPU], batch, fmt.weights),
            "int8 and int4 caches keep an fp16 scale per token and KV head",
        ),
        Table(
            "weights_by_format",
            "The weights in every stored format (scales included)",
            "Memory",
            weights_by_format(cfg),
            "int4 in groups of 128 inputs, int8 per output "
            "row, fp8 per tensor; embeddings, lm_head, norms and the router stay in bf16",
        ),
        Table(
            "attention_memory",
            f"What attention keeps for backward, naive vs fused ({at})",
            "Memory",
            pd.DataFrame(
                [analysis.attention_memory(cfg, seq_len, batch, fmt.training, analysis.DEFAULT_GPU).to_dict()]
            ),
            "Dao et al. 2022: naive keeps the T×T probabilities, fused only the output and "
            "the log-sum-exp; HBM traffic of Algorithm 1 with the GPU's shared memory",
        ),
    ]


def _analysis_tables(cfg: ModelConfig, seq_len: int, batch: int, fmt: Precision, gpu: GPU) -> list[Table]:
    params = analysis.count_params(cfg)
    flops = analysis.count_flops(cfg, seq_len, batch)
    kv = analysis.kv_cache(cfg, seq_len, batch, fmt.kv)
    compute = fmt.training
    inference = analysis.inference_memory(cfg, seq_len, batch, fmt.dtype, fmt.weights, fmt.kv)
    at = f"B={batch}, T={seq_len:,}"

    return [
        Table(
            "params_by_component",
            "Parameters by component",
            "Parameters",
            params.to_frame(),
            "A tied lm_head counts 0; the components sum to the total "
            f"({params.total:,}; active per token {params.active:,}; non-embedding "
            f"{params.non_embedding:,}; per block {params.per_layer:,}).",
        ),
        Table(
            "architecture",
            "What sets the family apart",
            "Parameters",
            _frame(architecture(cfg), "feature", "value"),
            " ".join(note.replace("**", "") for note in family_notes(cfg, params)),
        ),
        Table(
            "params_detail",
            "Parameters by tensor kind (all blocks)",
            "Parameters",
            _frame(params.detail, "tensor", "params"),
        ),
        Table(
            "params_per_block",
            "One decoder block: parameters and its component's FLOPs",
            "Parameters",
            block_table(cfg, flops),
        ),
        Table(
            "flops_by_component",
            f"Forward FLOPs by component ({at})",
            "FLOPs",
            flops.to_frame(),
            "2 FLOPs per multiply-add; attention scores over the full T×T. "
            f"Forward {flops.forward:,}; training step (3×) "
            f"{flops.training_step:,}; causal scores only "
            f"{flops.attention_scores_causal:,}.",
        ),
        Table(
            "flops_elementwise",
            "Element-wise FLOPs (not in the forward total)",
            "FLOPs",
            _frame(flops.elementwise, "operation", "flops"),
        ),
        Table(
            "flops_conventions",
            "Counting conventions",
            "FLOPs",
            pd.DataFrame({"convention": flops.conventions}),
        ),
        Table(
            "kv_cache_attention",
            f"KV cache: MHA vs GQA vs MQA ({at}, {fmt.kv})",
            "KV cache",
            kv.to_frame(),
            kv.note,
        ),
        Table(
            "kv_cache_by_dtype",
            "KV cache bytes per token by dtype",
            "KV cache",
            _frame(kv.by_dtype, "dtype", "bytes_per_token"),
        ),
        Table(
            "gpu_fit",
            f"What fits each GPU (weights + KV cache, {at}, {fmt})",
            "KV cache",
            pd.concat(
                [
                    kv_fit_frame(cfg, g, seq_len, batch, fmt.weights, fmt.kv).assign(gpu=name)
                    for name, g in GPUS.items()
                ],
                ignore_index=True,
            )[
                [
                    "gpu",
                    "attention",
                    "n_kv_heads",
                    "kv_bytes_per_token",
                    "kv_cache_bytes",
                    "weight_bytes",
                    "max_context_at_batch",
                    "max_batch_at_seq_len",
                    "is_current",
                ]
            ],
        ),
        Table(
            "memory_inference",
            f"Inference memory ({at}, {fmt})",
            "Memory",
            inference.to_frame(),
            "; ".join(inference.notes),
        ),
        Table(
            "memory_training",
            f"Training memory per GPU, AdamW, {compute} "
            f"({'mixed precision' if compute != 'fp32' else 'fp32'}), "
            f"{plural(batch, 'sequence')} of {seq_len:,} per GPU",
            "Memory",
            _training_table(cfg, seq_len, batch, compute),
            f"ZeRO stages and FSDP across {ZERO_GPUS} GPUs (Rajbhandari et al. 2020); "
            "activations are never sharded.",
        ),
        Table(
            "roofline_workload",
            f"Roofline of this workload on every GPU ({at}, {fmt})",
            "Roofline",
            _roofline_by_gpu(cfg, seq_len, batch, fmt),
        ),
        Table(
            "roofline_decode",
            f"Decode roofline on {gpu.name}: MHA / GQA / MQA over batch × context ({fmt})",
            "Roofline",
            analysis.roofline_table(cfg, gpu, dtype=fmt.dtype, weights=fmt.weights, kv_dtype=fmt.kv),
            gpu.source,
        ),
        Table(
            "gpus", "GPUs (data-sheet peaks)", "Roofline", pd.DataFrame([g.to_dict() for g in GPUS.values()])
        ),
    ] + _parallel_tables(cfg, seq_len, batch, fmt, gpu)


PARALLEL_GPUS = 8  # the report's least GPU count for serving and training


def _parallel_tables(cfg: ModelConfig, seq_len: int, batch: int, fmt: Precision, gpu: GPU) -> list[Table]:
    """Serving split TP × PP and the training layouts that fit, each on 8 GPUs or the fewest
    (a power of two) on which the model fits; Korthikanti's terms beside ours."""
    serve = max(
        PARALLEL_GPUS, layouts.fewest_gpus(cfg, gpu, seq_len, fmt.training, True, batch, fmt.weights) or 0
    )
    # training: twice the GPUs the states alone need — a search at one count, not the
    # fewest-GPU search's several
    train = layouts.gpus_for_states(cfg, gpu, least=PARALLEL_GPUS)
    fits = layouts.serving_fits(cfg, gpu.name, serve, batch, seq_len, fmt.weights, fmt.kv)
    found = layouts.search_layouts(cfg, train, gpu.name, seq_len, None, fmt.training)
    tp = next(t for t in (8, 4, 2, 1) if cfg.n_heads % t == 0)
    terms, ours, variants = korthikanti_frames(compare(cfg, seq_len, 1, tp))
    section = "Many GPUs"
    return [
        Table(
            "parallel_serving",
            f"Serving on {serve} × {gpu.name}: every TP × PP split (B={batch}, T={seq_len:,}, {fmt})",
            section,
            serving_frame(fits),
        ),
        Table(
            "parallel_layouts",
            f"Training layouts that fit {train} × {gpu.name} "
            f"(T={seq_len:,}, {fmt.training}), cheapest first (the first 20 of "
            f"{len(found)})",
            section,
            search_frame(found[:20], cfg, seq_len, gpu),
            layouts.search_assumptions(),
        ),
        Table(
            "korthikanti_terms",
            "Korthikanti et al. 2022: one GPT layer's activations, "
            f"term by term (s={seq_len:,}, b=1, h={cfg.d_model:,}, a={cfg.n_heads})",
            section,
            terms,
        ),
        Table("korthikanti_ours", "Our implementation of their GPT recipe and of this model", section, ours),
        Table(
            "korthikanti_variants",
            f"Table 2's variants at t={tp}: theirs and this model's",
            section,
            variants,
        ),
    ]


def _analysis_figures(cfg: ModelConfig, seq_len: int, batch: int, fmt: Precision, gpu: GPU) -> list[Figure]:
    params = analysis.count_params(cfg)
    flops = analysis.count_flops(cfg, seq_len, batch)
    crossover = analysis.scores_overtake_ffn_at(cfg)
    # the pages' ranges, from the same functions: FLOPs over flops_sweep_upper, the KV cache
    # over kv_context_lengths (what fits this GPU decides how far it goes)
    counts = [
        analysis.count_flops(cfg, length, batch)
        for length in sweep_lengths(flops_sweep_upper(cfg, seq_len, crossover))
    ]
    fit = kv_fit_frame(cfg, gpu, seq_len, batch, fmt.weights, fmt.kv)
    curve = kv_memory_curve_frame(cfg, kv_context_lengths(cfg, fit, seq_len), batch, fmt.weights, fmt.kv)
    points = roofline_points(cfg, gpu, ROOFLINE_BATCHES, seq_len, fmt.dtype, fmt.weights, fmt.kv)
    return [
        Figure("params_sunburst", "Parameters by component", "Parameters", params_sunburst(params)),
        Figure("flops_bar", "Forward FLOPs by component", "FLOPs", flops_bar(flops)),
        Figure(
            "flops_vs_seq_len",
            "Forward FLOPs per token against sequence length",
            "FLOPs",
            flops_vs_seq_len(counts, crossover, seq_len),
        ),
        Figure(
            "kv_sharing",
            "Query heads and the KV heads they read",
            "KV cache",
            kv_sharing_diagram(cfg.n_heads, cfg.n_kv_heads),
        ),
        Figure(
            "kv_memory_vs_context",
            "Weights + KV cache against context",
            "KV cache",
            kv_memory_vs_context(curve, gpu),
        ),
        Figure("roofline", f"Decode roofline on {gpu.name}", "Roofline", roofline_figure(points, gpu)),
        Figure("decode_throughput", "Decode throughput bound", "Roofline", decode_throughput(points)),
    ]


def _training_table(cfg: ModelConfig, seq_len: int, batch: int, dtype: str) -> pd.DataFrame:
    """Components (rows) × sharding scheme (columns), bytes per GPU."""
    columns = {}
    for sharding in analysis.SHARDINGS:
        n_gpus = 1 if sharding == "none" else ZERO_GPUS
        estimate = analysis.training_memory(cfg, seq_len, batch, dtype, sharding=sharding, n_gpus=n_gpus)
        label = "unsharded (1 GPU)" if sharding == "none" else f"{sharding} ({n_gpus} GPUs)"
        columns[label] = {**estimate.per_gpu_components, "total per GPU": estimate.per_gpu_bytes}
    frame = pd.DataFrame(columns)
    return frame.rename_axis("component").reset_index()


def _roofline_by_gpu(cfg: ModelConfig, seq_len: int, batch: int, fmt: Precision) -> pd.DataFrame:
    rows = []
    for name, gpu in GPUS.items():
        for phase in ("prefill", "decode"):
            r = analysis.roofline(cfg, gpu, batch, seq_len, fmt.dtype, phase, fmt.weights, fmt.kv)
            rows.append(
                {
                    "gpu": name,
                    "phase": phase,
                    "flops": r.flops,
                    "bytes_moved": r.bytes_moved,
                    "arithmetic_intensity": r.arithmetic_intensity,
                    "ridge_point": r.ridge_point,
                    "bound": r.bound,
                    "time_per_step_ms": 1e3 * r.time_per_step_s,
                    "tokens_per_s": r.tokens_per_s,
                }
            )
    return pd.DataFrame(rows)


def _claims_part() -> tuple[tuple, list[Table]]:
    found = seed_claims()
    frame = claims_frame(found)
    frame.insert(0, "holds", ["✓" if c.verdict else "✗" for c in found])
    note = (
        f"{sum(c.verdict for c in found)} of {len(found)} hold. The seed tutorial "
        f"({SEED_SOURCE}) recomputed; these concern fixed models, not this config."
    )
    return tuple(c.to_dict() for c in found), [
        Table("seed_claims", "The seed's claims, recomputed", "Seed claims", frame, note)
    ]


def _validation_tables() -> list[Table]:
    """The time predictions against public measurements (``validate``): the summary and the rows."""
    from ..figures.validation import rows_frame, summary_frame
    from ..validation import validate

    answer = validate()
    section = "Validation"
    note = (
        "Roofline bound and calibrated estimate of each public measurement; the efficiency "
        "parameters are fitted on the fit half only (python -m llama_lab validate)."
    )
    rows = rows_frame(answer["rows"])
    rows.insert(2, "source", rows["id"].map({r["id"]: r["source"] for r in answer["rows"]}))
    return [
        Table(
            "validation_summary", "Held-out errors per kind", section, summary_frame(answer["summary"]), note
        ),
        Table("validation_rows", "Every measurement against its prediction", section, rows),
    ]


def _as_entry(kind: str, value: Any) -> ExperimentEntry:
    if kind not in KINDS:
        raise ReportError(f"experiment kind={kind!r} must be one of {', '.join(KINDS)}")
    entry = value if isinstance(value, ExperimentEntry) else ExperimentEntry(kind, value)
    if entry.kind != kind:
        raise ReportError(f"experiments[{kind!r}] holds a {entry.kind!r} entry")
    expected = KINDS[kind].result_type
    if not isinstance(entry.result, expected):
        raise ReportError(
            f"experiments[{kind!r}] must be a {expected.__name__}, got {type(entry.result).__name__}"
        )
    return entry


def _ran_on(entry: ExperimentEntry) -> str:
    """What the experiment ran on and with: the first table's note."""
    ran_on = ""
    if entry.config is not None:
        c = entry.config
        ran_on = (
            f"Ran on d={c.d_model}, {plural(c.n_layers, 'layer')}, {plural(c.n_heads, 'head')} / "
            f"{c.n_kv_heads} KV, vocab {c.vocab_size}, {c.norm_position}-norm "
            f"{c.norm_type}, {c.ffn_type} FFN {c.ffn_hidden}. "
        )
    return ran_on + "; ".join(f"{k}={v}" for k, v in entry.settings.items())


def _experiment_parts(entry: ExperimentEntry) -> tuple[list[Table], list[Figure]]:
    """The kind's own tables and figures (``ExperimentKind``), the first table noting what the
    run used."""
    kind = KINDS[entry.kind]
    tables = kind.tables(entry.result, kind.title, entry.config)
    first = tables[0]
    note = " ".join(part for part in (_ran_on(entry), first.note) if part)
    tables[0] = Table(first.name, first.title, first.section, first.frame, note)
    return tables, kind.figures(entry.result, kind.title)


def build_report(
    cfg: ModelConfig,
    seq_len: int,
    batch: int,
    notes=(),
    experiments: Mapping[str, Any] | None = None,
    *,
    dtype: "str | Precision" = "bf16",
    gpu: str = analysis.DEFAULT_GPU,
    name: str = "",
) -> Report:
    """Everything the lab knows about ``cfg`` at B × T (``dtype``: what it computes in, the
    weights and the KV cache stored at it too — or ``Precision`` storing them apart; ``gpu`` for
    the roofline tables and the KV chart's range), plus the given experiment
    results (kind → result object or ``ExperimentEntry``). ``name`` (an uploaded model's, as
    given) heads the title; the renderers escape it like every other string."""
    if gpu not in GPUS:
        raise ReportError(f"gpu={gpu!r} must be one of {', '.join(GPUS)}")
    entries = [_as_entry(kind, value) for kind, value in (experiments or {}).items()]
    entries.sort(key=lambda e: list(KINDS).index(e.kind))
    fmt = dtype if isinstance(dtype, Precision) else Precision.of(dtype)
    # validates seq_len, batch and the formats
    result = analysis.analyze(cfg, seq_len, batch, fmt.dtype, fmt.weights, fmt.kv)
    try:
        hf, hf_note = cfg.to_hf_config(), None
    except ConfigError as exc:
        hf, hf_note = None, str(exc)

    tables = (
        _config_tables(cfg, hf)
        + _analysis_tables(cfg, seq_len, batch, fmt, GPUS[gpu])
        + _storage_tables(cfg, seq_len, batch, fmt)
    )
    figures = _analysis_figures(cfg, seq_len, batch, fmt, GPUS[gpu])
    comparison = architecture_comparison(cfg, seq_len, batch, fmt.kv)
    tables.append(
        Table(
            "architecture_comparison",
            "The seed's 2017 → LLaMA table, each row switched on this config",
            "Architecture comparison",
            comparison.to_frame().drop(columns="ablation"),
            f"Everything else equal; FLOPs: one forward over B={batch} × "
            f"T={seq_len:,}; KV bytes at {fmt.kv}.",
        )
    )
    claim_dicts, claim_tables = _claims_part()
    tables += claim_tables + _validation_tables()
    for entry in entries:
        more_tables, more_figures = _experiment_parts(entry)
        tables += more_tables
        figures += more_figures
    env = environment()
    tables.append(Table("environment", "Environment", "Environment", _frame(env, "item", "value")))
    return Report(
        title=f"LLaMA Lab report — {name + ': ' if name else ''}{cfg.attention_kind}, "
        f"{analysis.count_params(cfg).total:,} parameters, B={batch}, T={seq_len:,}, "
        f"{fmt}",
        config=cfg.to_dict(),
        hf_config=hf,
        hf_config_note=hf_note,
        workload={
            "seq_len": seq_len,
            "batch": batch,
            "dtype": fmt.dtype,
            "weight_dtype": fmt.weights,
            "kv_dtype": fmt.kv,
            "gpu": gpu,
        },
        analysis=result,
        tables=tuple(tables),
        figures=tuple(figures),
        claims=claim_dicts,
        experiments={e.kind: _plain(e.to_dict()) for e in entries},
        environment=env,
        notes=tuple(notes),
        name=str(name),
    )
