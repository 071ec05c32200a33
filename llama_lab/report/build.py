"""The full report of one model: every analysis table and figure, the seed's claims, any live
experiment results (each kind's own tables and figures, from the experiment registry), and
the environment. ``build_report`` collects; ``formats`` only formats what was collected, so
every format holds the same numbers. The JSON keeps ``analysis.analyze`` verbatim under
``analysis`` next to every table as a list of records.
"""

from __future__ import annotations

import datetime as _dt
import math
import platform
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Mapping

import pandas as pd

from .. import analysis
from ..config import ConfigError, ModelConfig
from ..errors import ReportError
from ..experiments import KINDS, ExperimentEntry
from ..figures.common import Figure, Table
from ..runtime.devices import device_name, pick_device
from ..runtime.hardware import GPUS
from ..seed import SEED_SOURCE, architecture_comparison, checked_claims, claims_frame
from ..units import plural
from .analysis_part import (
    Precision,
    analysis_figures,
    analysis_tables,
    config_tables,
    frame_of,
    storage_tables,
)
from .finetune_part import FinetuneWorkload, default_workload, finetune_part
from .scaling_part import scaling_part


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


def environment() -> dict:
    versions: dict[str, str | None] = {}
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


def _claims_part(warmup: Any = None) -> tuple[tuple, list[Table]]:
    """The seed's claims as the Seed claims page counts them (``warmup``: the contrast of the
    report's experiments, if it has one)."""
    found = checked_claims(warmup)
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
        "parameters are fitted on the fit half only (python -m llama_lab validate). MFU columns: "
        f"{answer['mfu_convention']}."
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
    finetune: FinetuneWorkload | None = None,
) -> Report:
    """Everything the lab knows about ``cfg`` at B × T (``dtype``: what it computes in, the
    weights and the KV cache stored at it too — or ``Precision`` storing them apart; ``gpu`` for
    the roofline tables and the KV chart's range), plus the given experiment
    results (kind → result object or ``ExperimentEntry``). ``name`` (an uploaded model's, as
    given) heads the title; the renderers escape it like every other string. ``finetune``: the
    fine-tuning section's recipe, GPU, T and B (None: PEFT's default LoRA at B × T on ``gpu``)."""
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
        config_tables(cfg, hf)
        + analysis_tables(cfg, seq_len, batch, fmt, GPUS[gpu])
        + storage_tables(cfg, seq_len, batch, fmt)
    )
    figures = analysis_figures(cfg, seq_len, batch, fmt, GPUS[gpu])
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
    warmup = next((e.result for e in entries if e.kind == "warmup"), None)
    claim_dicts, claim_tables = _claims_part(warmup)
    tables += claim_tables + _validation_tables()
    if finetune is not None and finetune.gpu not in GPUS:
        raise ReportError(f"finetune.gpu={finetune.gpu!r} must be one of {', '.join(GPUS)}")
    ft_tables, ft_figures = finetune_part(cfg, finetune or default_workload(cfg, gpu, seq_len, batch))
    tables += ft_tables
    figures += ft_figures
    scaling_tables, scaling_figures = scaling_part()
    tables += scaling_tables
    figures += scaling_figures
    for entry in entries:
        more_tables, more_figures = _experiment_parts(entry)
        tables += more_tables
        figures += more_figures
    env = environment()
    tables.append(Table("environment", "Environment", "Environment", frame_of(env, "item", "value")))
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
