"""Cached wrappers around the package (``st.cache_data`` keyed on the frozen config and plain
arguments; never a global read inside), and the one way pages show a table.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from typing import Any, Callable, Mapping

import pandas as pd
import streamlit as st

from .. import analysis, experiments, seed
from ..analysis import cross_check
from ..analysis.finetune import FinetuneSpec
from ..analysis.model_kinds import kinds_table
from ..analysis.quant import WeightQuant
from ..analysis.vision import image_summary
from ..config import ModelConfig
from ..config.hf.quant import StoredQuant
from ..errors import LabError
from ..figures import finetune as figures_finetune
from ..figures import kv, rooflines, sparse
from ..figures.common import column_label, display_frame, table_styler
from ..runtime.hardware import GPU
from ..train.loop import TrainSettings
from ..validation.predict import predict_finetune

MAX_STYLED_CELLS = 100_000  # larger tables are shown unstyled (pandas' Styler limit, speed)


def show_table(frame: pd.DataFrame | Mapping[str, Any], **kwargs: Any) -> None:
    """st.dataframe without the index, reading as the report's tables: every cell as
    ``format_cell`` writes it (separators, 4 significant digits, '—'), every header through
    ``column_label``, while the data stay numbers a reader can sort (``table_styler``; counts
    beyond int64 reach Arrow as floats, their text stays exact). A ``column_config`` of the
    page wins: its format over ours, its label over ``column_label``."""
    frame = pd.DataFrame(frame)
    config = dict(kwargs.pop("column_config", None) or {})
    for name in frame.columns:
        if name not in config:
            if isinstance(name, str) and column_label(name) != name:
                config[name] = column_label(name)
        elif isinstance(config[name], dict) and not config[name].get("label"):
            config[name] = {**config[name], "label": column_label(name)}
    cells = frame.shape[0] * frame.shape[1]
    unique = frame.columns.is_unique
    shown = table_styler(frame) if unique and cells <= MAX_STYLED_CELLS else display_frame(frame)
    st.dataframe(shown, hide_index=True, column_config=config or None, **kwargs)


@st.cache_data(max_entries=256, show_spinner=False)
def param_count(cfg: ModelConfig) -> analysis.ParamCount:
    return analysis.count_params(cfg)


@st.cache_data(max_entries=256, show_spinner=False)
def flop_count(cfg: ModelConfig, seq_len: int, batch: int) -> analysis.FlopCount:
    return analysis.count_flops(cfg, seq_len, batch)


@st.cache_data(max_entries=64, show_spinner=False)
def flops_sweep(cfg: ModelConfig, seq_lens: tuple[int, ...], batch: int) -> list:
    return [analysis.count_flops(cfg, seq_len, batch) for seq_len in seq_lens]


@st.cache_data(max_entries=64, show_spinner=False)
def image_cost(cfg: ModelConfig, kv_dtype: str = "bf16") -> dict:
    """What one image costs a multimodal config (analysis.vision.image_summary)."""
    return image_summary(cfg, 1, analysis.kv_cache_bytes_per_token(cfg, kv_dtype))


@st.cache_data(max_entries=256, show_spinner=False)
def scores_crossover(cfg: ModelConfig) -> int | None:
    return analysis.scores_overtake_ffn_at(cfg)


@st.cache_data(max_entries=64, show_spinner=False)
def mask_codes(cfg: ModelConfig, T: int):
    return sparse.mask_reasons(cfg, T)


@st.cache_data(max_entries=64, show_spinner=False)
def score_cost(cfg: ModelConfig, lengths: tuple[int, ...]) -> pd.DataFrame:
    return analysis.score_flops_against_t(cfg, lengths)


@st.cache_data(max_entries=256, show_spinner=False)
def kv_report(cfg: ModelConfig, seq_len: int, batch: int, dtype: str) -> analysis.KVCacheReport:
    return analysis.kv_cache(cfg, seq_len, batch, dtype)


@st.cache_data(max_entries=128, show_spinner=False)
def kv_fit(
    cfg: ModelConfig, gpu: GPU, seq_len: int, batch: int, weights: WeightQuant | str, kv_dtype: str
) -> pd.DataFrame:
    return kv.kv_fit_frame(cfg, gpu, seq_len, batch, weights, kv_dtype)


@st.cache_data(max_entries=64, show_spinner=False)
def mla_forms(
    cfg: ModelConfig,
    gpu: GPU,
    batch: int,
    context_len: int,
    dtype: str,
    weights: WeightQuant | str,
    kv_dtype: str,
) -> pd.DataFrame:
    return kv.mla_forms_frame(cfg, gpu, batch, context_len, dtype, weights, kv_dtype)


@st.cache_data(max_entries=64, show_spinner=False)
def decode_costs(cfg: ModelConfig, context_lens: tuple[int, ...], kv_dtype: str) -> pd.DataFrame:
    return analysis.rooflines.decode_cost_frame(cfg, context_lens, kv_dtype)


@st.cache_data(max_entries=128, show_spinner=False)
def kv_memory_curve(
    cfg: ModelConfig, context_lens: tuple[int, ...], batch: int, weights: WeightQuant | str, kv_dtype: str
) -> pd.DataFrame:
    return kv.kv_memory_curve_frame(cfg, context_lens, batch, weights, kv_dtype)


@st.cache_data(max_entries=128, show_spinner=False)
def roofline_points(
    cfg: ModelConfig,
    gpu: GPU,
    batches: tuple[int, ...],
    context_len: int,
    dtype: str,
    weights: WeightQuant | str,
    kv_dtype: str,
) -> pd.DataFrame:
    return rooflines.roofline_points(cfg, gpu, batches, context_len, dtype, weights, kv_dtype)


@st.cache_data(max_entries=64, show_spinner=False)
def fvcore_check(cfg: ModelConfig, seq_len: int, batch: int) -> cross_check.FvcoreCheck:
    return cross_check.fvcore_check(cfg, seq_len, batch, method="scaled")


def fvcore_or_error(cfg: ModelConfig, seq_len: int, batch: int) -> cross_check.FvcoreCheck | None:
    """``fvcore_check`` under a spinner; a size torch cannot trace — even on the meta device a
    tensor may not hold 2⁶³ elements, and B·H·T² scores reach that first — is shown with
    st.error (flop_check says why) and gives None."""
    try:
        with st.spinner("Tracing with torch.jit …"):
            return fvcore_check(cfg, seq_len, batch)
    except LabError as exc:
        st.error(str(exc))
        return None


@st.cache_data(max_entries=1, show_spinner=False)
def seed_claims() -> list:
    return seed.seed_claims()


@st.cache_data(max_entries=128, show_spinner=False)
def architecture(cfg: ModelConfig, seq_len: int, batch: int, dtype: str) -> seed.ArchitectureComparison:
    return seed.architecture_comparison(cfg, seq_len, batch, dtype)


@st.cache_data(max_entries=16, show_spinner=False)
def model_kinds(names: tuple[str, ...], seq_len: int, dtype: str) -> pd.DataFrame:
    return kinds_table(names, seq_len, dtype)


class Measured:
    """A function's process-wide LRU cache (``measured``): called as the function, and asked
    whether it ``holds`` a call's value, to ``forget`` one or to ``clear``."""

    def __init__(self, fn: Callable[..., Any], max_entries: int):
        self._fn, self._max_entries = fn, max_entries
        self._cache: OrderedDict[tuple, Any] = OrderedDict()
        self._lock = threading.Lock()
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, _progress: Callable | None = None) -> Any:
        with self._lock:
            if args in self._cache:
                self._cache.move_to_end(args)
                return self._cache[args]
        value = self._fn(*args, _progress=_progress)
        with self._lock:
            self._cache[args] = value
            while len(self._cache) > self._max_entries:
                self._cache.popitem(last=False)
        return value

    def holds(self, *args: Any) -> bool:
        """Whether a call with ``args`` would be answered from the cache."""
        with self._lock:
            return args in self._cache

    def forget(self, *args: Any) -> None:
        """Drop the value for ``args`` (the next call measures again)."""
        with self._lock:
            self._cache.pop(args, None)

    def clear(self) -> None:
        self._cache.clear()


def measured(max_entries: int) -> Callable[[Callable[..., Any]], Measured]:
    """A process-wide LRU cache of live measurements, shared by every session, keyed on the
    (hashable: frozen configs, tuples) arguments but never on ``_progress``. Not st.cache_data:
    that records the progress bar's updates made inside the function and cannot replay them on
    a hit (the bar belongs to the run that drew it). Two sessions missing at once both measure;
    the second result replaces the first, equal to it."""
    return lambda fn: Measured(fn, max_entries)


@measured(max_entries=16)
def ablation_runs(
    kind: str,
    train_cfg: ModelConfig,
    steps: int,
    lr: float,
    warmup_steps: int,
    seq_len: int,
    batch: int,
    _progress: Callable[[float, str], None] | None = None,
) -> experiments.RunComparison:
    """Short training runs of one contrast of the seed's table (same data, seed and batches).
    ``_progress`` is not part of the cache key."""
    settings = TrainSettings(
        steps=steps, lr=lr, warmup_steps=warmup_steps, seq_len=seq_len, batch=batch, device="cpu"
    )
    specs = experiments.ablation_specs(kind, train_cfg, lr, warmup_steps)
    return experiments.compare_runs(specs, settings, progress=_progress)


def _text(source: str):
    """The measurement's data: the built-in text, or None for random token ids."""
    from ..train.data import load_builtin

    return load_builtin() if source == "builtin" else None


@measured(max_entries=32)
def gradnorms_measured(
    cfg: ModelConfig,
    seq_len: int,
    batch: int,
    seeds: tuple[int, ...],
    source: str,
    device: str,
    _progress: Callable[[float, str], None] | None = None,
) -> experiments.GradNormSeeds:
    """Post-LN vs Pre-LN at initialisation over ``seeds`` (cached per config and settings, for
    every session)."""
    return experiments.gradnorms_over_seeds(cfg, seq_len, batch, seeds, _text(source), device, _progress)


@measured(max_entries=32)
def depth_measured(
    cfg: ModelConfig,
    depths: tuple[int, ...],
    seq_len: int,
    batch: int,
    seeds: tuple[int, ...],
    source: str,
    device: str,
    _progress: Callable[[float, str], None] | None = None,
) -> experiments.DepthSweep:
    return experiments.depth_sweep(cfg, depths, seq_len, batch, seeds, _text(source), device, _progress)


@measured(max_entries=16)
def warmup_measured(
    cfg: ModelConfig,
    steps: int,
    lr: float,
    warmup_steps: int,
    seeds: tuple[int, ...],
    shape: tuple[int, int],
    device: str,
    _progress: Callable[[float, str], None] | None = None,
):
    """The warmup contrast on the built-in text at ``shape`` = (T, B), cached like
    ``gradnorms_measured``."""
    seq_len, batch = shape
    settings = TrainSettings(
        steps=steps, lr=lr, warmup_steps=warmup_steps, seq_len=seq_len, batch=batch, device=device
    )
    return experiments.warmup_contrast(cfg, settings, seeds, _text("builtin"), progress=_progress)


@st.cache_data(max_entries=64, show_spinner=False)
def finetune_prediction(
    cfg: ModelConfig, gpu: GPU, spec: FinetuneSpec, seq_len: int, batch: int, stored: StoredQuant | None
) -> dict:
    """``predict_finetune``: the counts, the peak by part with its interval, tokens/s."""
    return predict_finetune(cfg, gpu, spec, seq_len, batch, stored)


@st.cache_data(max_entries=64, show_spinner=False)
def finetune_curve(
    cfg: ModelConfig,
    spec: FinetuneSpec,
    lengths: tuple[int, ...],
    batch: int,
    stored: StoredQuant | None,
    factor: float,
) -> pd.DataFrame:
    """``finetune_memory`` at each of the curve's lengths, its peak × ``factor``."""
    return figures_finetune.curve_frame(cfg, spec, lengths, batch, stored, factor)
