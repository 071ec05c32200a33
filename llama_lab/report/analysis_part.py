"""The report's analysis of the model itself, which ``build_report`` assembles with the seed's
claims, the validation, the live experiments and the environment: the config and its HF
config.json, the counts ``analysis`` makes at B × T, the storage formats, the rooflines, the KV
cache, the parallel layouts (on ``PARALLEL_GPUS`` GPUs or more) and their figures, in the
``Precision`` the report computes and stores at."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

import pandas as pd

from .. import analysis
from ..analysis import layouts
from ..analysis.common import training_dtype
from ..analysis.korthikanti import compare
from ..analysis.kv import tp_cache_note
from ..analysis.quant import WeightQuant
from ..analysis.scope import check_planned
from ..analysis.summary import architecture, family_notes
from ..config import ModelConfig
from ..errors import LabError
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
from ..figures.sparse import (
    PATTERN_T,
    mask_heatmap,
    mask_reasons,
    pattern_title,
    score_cost_figure,
    score_cost_lengths,
)
from ..runtime.hardware import GPU, GPUS
from ..units import plural

ZERO_GPUS = 8  # data-parallel width of the ZeRO / FSDP table


@dataclass(frozen=True)
class Precision:
    """What the report computes in (``dtype``) and stores the weights and the KV cache at."""

    dtype: str
    weights: WeightQuant | str  # a format's name, or an uploaded file's own WeightQuant
    kv: str

    @classmethod
    def of(cls, dtype: str, weights: WeightQuant | str | None = None, kv: str | None = None) -> "Precision":
        return cls(dtype, weights or dtype, kv or dtype)

    @property
    def training(self) -> str:
        return training_dtype(self.dtype)

    def __str__(self) -> str:
        if self.weights == self.kv == self.dtype:
            return self.dtype
        return f"{self.dtype}, weights {self.weights}, KV cache {self.kv}"


def frame_of(mapping: Mapping, key: str, value: str) -> pd.DataFrame:
    """A two-column table of a mapping's keys and values."""
    return pd.DataFrame({key: list(mapping), value: list(mapping.values())})


def _number_or(value: Any, text) -> Any:
    """A number (not a bool) as itself, so the report writes it with separators; anything
    else as ``text(value)``."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else text(value)


def config_tables(cfg: ModelConfig, hf: dict | None) -> list[Table]:
    """The config as LLaMA Lab holds it, what it derives, and its HF config.json."""
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


def storage_tables(cfg: ModelConfig, seq_len: int, batch: int, fmt: Precision) -> list[Table]:
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


def analysis_tables(cfg: ModelConfig, seq_len: int, batch: int, fmt: Precision, gpu: GPU) -> list[Table]:
    """The counts at B × T: parameters, FLOPs, memory, the KV cache, rooflines and layouts."""
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
            frame_of(architecture(cfg), "feature", "value"),
            " ".join(note.replace("**", "") for note in family_notes(cfg, params)),
        ),
        Table(
            "params_detail",
            "Parameters by tensor kind (all blocks)",
            "Parameters",
            frame_of(params.detail, "tensor", "params"),
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
            frame_of(flops.elementwise, "operation", "flops"),
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
            frame_of(kv.by_dtype, "dtype", "bytes_per_token"),
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
    (a power of two) on which the model fits; Korthikanti's terms beside ours. An
    encoder-decoder, an encoder or a multimodal model: one table saying why not
    (``require_decoder_only``, ``analysis.vision.text_decoder_only``)."""
    try:
        check_planned(cfg, "the Many GPUs section")
    except LabError as exc:
        return [
            Table(
                "parallel_layouts", "Many GPUs: refused", "Many GPUs", pd.DataFrame({"refused": [str(exc)]})
            )
        ]
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
            tp_cache_note(cfg, fmt.kv),
        ),
        Table(
            "parallel_layouts",
            f"Training layouts that fit {train} × {gpu.name} "
            f"(T={seq_len:,}, {fmt.training}), cheapest first (the first 20 of "
            f"{len(found)})",
            section,
            search_frame(found[:20], cfg, seq_len, gpu),
            layouts.search_assumptions(gpu),
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


def analysis_figures(cfg: ModelConfig, seq_len: int, batch: int, fmt: Precision, gpu: GPU) -> list[Figure]:
    """The analysis' figures, as the pages draw them."""
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
    ] + pattern_figures(cfg, seq_len)


def pattern_figures(cfg: ModelConfig, seq_len: int) -> list[Figure]:
    """A model with windowed blocks: their mask drawn and its score FLOPs against T, as the KV
    cache and Parameters & FLOPs pages draw them (none without a window)."""
    if not any(cfg.local_layer_flags):
        return []
    frame = analysis.score_flops_against_t(cfg, score_cost_lengths(cfg, seq_len))
    return [
        Figure(
            "attention_pattern",
            "Which keys each query sees",
            "KV cache",
            mask_heatmap(mask_reasons(cfg), pattern_title(cfg, PATTERN_T)),
        ),
        Figure(
            "score_flops_vs_t",
            "Score FLOPs against T: dense vs the pattern",
            "FLOPs",
            score_cost_figure(frame),
        ),
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
