"""The Streamlit side of LLaMA Lab, and the only part of the package that imports Streamlit:
the sidebar config builder shared by every page (``sidebar``), its session state and URL
mirror (``state``), the list of pages (``pages``), cached wrappers around the package
(``cached``), live runs from a page (``runs``), one result panel per experiment kind
(``panels``) and each page's sections (``home``, ``params``, ``kv``, ``gradient``, ``live``,
``comparison``, ``claims``, ``report``, ``inference``, ``inside``, ``parallel``): a page is
its outline — ``setup_page`` (or ``sidebar_config``) first, then one call per section — and
imports nothing but this package and Streamlit. Both setup calls initialise the session state
themselves, so any page also runs alone (``streamlit.testing.v1.AppTest``).
"""

from ..analysis.quant import kv_scale_bytes
from ..analysis.summary import family_notes
from ..config import MAX_BATCH, detect_ffn_rule, ffn_from_rule, live_config
from ..config.grids import divisors
from ..figures.common import sweep_lengths
from ..runtime.devices import PAGE_DEVICES
from ..runtime.hardware import GPUS
from ..seed import SEED_SOURCE
from ..train.budgets import CPU_FLOP_BUDGET, check_cpu_budget, guard, live_workload, runs_live_quickly
from ..units import escape_markdown, human_bytes, human_count, human_params
from .cached import (
    ablation_runs,
    architecture,
    depth_measured,
    flop_count,
    flops_sweep,
    fvcore_check,
    fvcore_or_error,
    gradnorms_measured,
    kv_fit,
    kv_memory_curve,
    kv_report,
    param_count,
    roofline_points,
    scores_crossover,
    seed_claims,
    show_table,
    warmup_measured,
)
from .config_files import Download, config_downloads
from .derivations import derived_metric, show_derivation, show_equation
from .pages import HOME_ICON, HOME_PAGE, HOME_TITLE, PAGES, AppPage
from .runs import (
    STALE_NOTE,
    exclusive_run,
    ffn_label,
    is_stale,
    keep_experiment,
    live_run_note,
    measure_on_view,
    run_with_status,
    session_experiments,
    set_defaults,
    show_experiment,
    text_choice,
    text_source,
)
from .sections.claims import recomputed as recomputed_claims
from .sections.claims import verdicts_section as claims_section
from .sections.claims import warmup_claim
from .sections.comparison import contrast_section
from .sections.comparison import formulas as comparison_formulas
from .sections.comparison import tables as comparison_tables
from .sections.gradient import (
    GradientSetup,
    depth_tab,
    explain_norm_positions,
    init_tab,
    training_tab,
    warmup_tab,
)
from .sections.gradient import setup as gradient_setup
from .sections.home import current_model, page_links
from .sections.inference import flash_section, quantisation_section, speculative_section
from .sections.inference import gpu_choice as inference_gpu
from .sections.inside import attention_section, forward_trace, lens_section, positions_section, stream_section
from .sections.inside import choice as inside_choice
from .sections.inside import note as inside_note
from .sections.kv import context_curve as kv_context_curve
from .sections.kv import fit_section as kv_fit_section
from .sections.kv import formulas as kv_formulas
from .sections.kv import gpu_choice as kv_gpu_choice
from .sections.kv import linear_attention_section, mla_section, roofline_section
from .sections.kv import sharing as kv_sharing
from .sections.live import decode_section, training_step_section
from .sections.live import formulas as live_formulas
from .sections.live import setup as live_setup
from .sections.parallel import (
    korthikanti_section,
    layout_section,
    search_section,
    serving_gpu,
    serving_section,
    shard_section,
)
from .sections.params import block_section, counting_conventions, flops_sweep_section, fvcore_section
from .sections.params import charts as params_charts
from .sections.params import formulas as params_formulas
from .sections.params import metrics as params_metrics
from .sections.report import built_report
from .sections.report import downloads as report_downloads
from .sections.report import formulas as report_formulas
from .sections.report import gpu_choice as report_gpu
from .sections.report import included_experiments as report_experiments
from .sections.report import summary as report_summary
from .sections.validation import answer as validation_answer
from .sections.validation import parameters_section as validation_parameters
from .sections.validation import rows_section as validation_rows
from .sections.validation import scatter_section as validation_scatter
from .sections.validation import summary_section as validation_summary
from .sidebar import config_error, setup_page, sidebar_config
from .state import (
    AS_DTYPE,
    BUILDER_KEYS,
    CONFIG_FIELDS,
    DEFAULT_DTYPE,
    DEFAULT_PRESET,
    EXPERIMENT_KEYS,
    KEY_ABLATION,
    KEY_BATCH,
    KEY_BUILDER,
    KEY_DECODE,
    KEY_DEPTH_SWEEP,
    KEY_DTYPE,
    KEY_FFN_MULTIPLE_OF,
    KEY_FFN_MULTIPLIER,
    KEY_FFN_RULE,
    KEY_GRADNORMS,
    KEY_KV_DTYPE,
    KEY_LIVE_PASS,
    KEY_MODEL_NAME,
    KEY_PRESET,
    KEY_PRESET_VIEW,
    KEY_SEQ_LEN,
    KEY_TRAINING,
    KEY_UPLOAD,
    KEY_WEIGHT_DTYPE,
    LINK_NOTE,
    MAX_NAME,
    QUERY_BATCH,
    QUERY_DTYPE,
    QUERY_KEYS,
    QUERY_KV,
    QUERY_NAME,
    QUERY_PRESET,
    QUERY_SEQ,
    QUERY_WEIGHTS,
    UPLOADED,
    WIDGET_PREFIX,
    Selection,
    config_from_values,
    dtype_bytes,
    dtype_names,
    error_field,
    field_key,
    kv_dtype_names,
    kv_label,
    model_name,
    query_for,
    stored_format,
    values_for_config,
    values_from_query,
    weight_dtype_names,
)
from .warmup import default_warmup, session_warmup
from .widgets import (
    LIVE_SIZE_HEADING,
    Link,
    bound_note,
    bounded_number,
    choice_link,
    int_link,
    keep_choice,
    keep_within,
    link_widgets,
    live_size_box,
    remember,
    show_caption,
    show_error,
    show_info,
    show_warning,
)

__all__ = [
    "ablation_runs",
    "AppPage",
    "architecture",
    "AS_DTYPE",
    "attention_section",
    "block_section",
    "bound_note",
    "bounded_number",
    "BUILDER_KEYS",
    "built_report",
    "check_cpu_budget",
    "choice_link",
    "claims_section",
    "comparison_tables",
    "comparison_formulas",
    "config_downloads",
    "config_error",
    "CONFIG_FIELDS",
    "config_from_values",
    "contrast_section",
    "counting_conventions",
    "CPU_FLOP_BUDGET",
    "current_model",
    "validation_answer",
    "validation_parameters",
    "validation_rows",
    "validation_scatter",
    "validation_summary",
    "decode_section",
    "DEFAULT_DTYPE",
    "DEFAULT_PRESET",
    "default_warmup",
    "depth_measured",
    "depth_tab",
    "derived_metric",
    "detect_ffn_rule",
    "divisors",
    "Download",
    "dtype_bytes",
    "dtype_names",
    "error_field",
    "escape_markdown",
    "exclusive_run",
    "EXPERIMENT_KEYS",
    "explain_norm_positions",
    "family_notes",
    "ffn_from_rule",
    "ffn_label",
    "field_key",
    "flash_section",
    "flop_count",
    "flops_sweep",
    "flops_sweep_section",
    "forward_trace",
    "fvcore_check",
    "fvcore_or_error",
    "fvcore_section",
    "GPUS",
    "gradient_setup",
    "GradientSetup",
    "gradnorms_measured",
    "guard",
    "HOME_ICON",
    "HOME_PAGE",
    "HOME_TITLE",
    "human_bytes",
    "human_count",
    "human_params",
    "inference_gpu",
    "init_tab",
    "inside_choice",
    "inside_note",
    "int_link",
    "is_stale",
    "keep_choice",
    "keep_experiment",
    "keep_within",
    "KEY_ABLATION",
    "KEY_BATCH",
    "KEY_BUILDER",
    "KEY_DECODE",
    "KEY_DEPTH_SWEEP",
    "KEY_DTYPE",
    "KEY_FFN_MULTIPLE_OF",
    "KEY_FFN_MULTIPLIER",
    "KEY_FFN_RULE",
    "KEY_GRADNORMS",
    "KEY_KV_DTYPE",
    "KEY_LIVE_PASS",
    "KEY_MODEL_NAME",
    "KEY_PRESET",
    "KEY_PRESET_VIEW",
    "UPLOADED",
    "KEY_SEQ_LEN",
    "KEY_TRAINING",
    "KEY_UPLOAD",
    "KEY_WEIGHT_DTYPE",
    "korthikanti_section",
    "kv_dtype_names",
    "kv_fit",
    "kv_fit_section",
    "kv_formulas",
    "kv_gpu_choice",
    "kv_context_curve",
    "kv_label",
    "kv_memory_curve",
    "kv_report",
    "kv_scale_bytes",
    "kv_sharing",
    "layout_section",
    "lens_section",
    "Link",
    "LINK_NOTE",
    "link_widgets",
    "live_config",
    "live_run_note",
    "live_setup",
    "live_formulas",
    "live_size_box",
    "LIVE_SIZE_HEADING",
    "live_workload",
    "MAX_BATCH",
    "MAX_NAME",
    "measure_on_view",
    "model_name",
    "PAGE_DEVICES",
    "page_links",
    "PAGES",
    "param_count",
    "params_charts",
    "params_formulas",
    "params_metrics",
    "positions_section",
    "quantisation_section",
    "QUERY_BATCH",
    "QUERY_DTYPE",
    "query_for",
    "QUERY_KEYS",
    "QUERY_KV",
    "QUERY_NAME",
    "QUERY_PRESET",
    "QUERY_SEQ",
    "QUERY_WEIGHTS",
    "recomputed_claims",
    "remember",
    "report_downloads",
    "report_experiments",
    "report_formulas",
    "report_gpu",
    "report_summary",
    "roofline_points",
    "roofline_section",
    "mla_section",
    "linear_attention_section",
    "run_with_status",
    "runs_live_quickly",
    "scores_crossover",
    "search_section",
    "seed_claims",
    "SEED_SOURCE",
    "Selection",
    "serving_gpu",
    "serving_section",
    "session_experiments",
    "session_warmup",
    "set_defaults",
    "setup_page",
    "shard_section",
    "show_caption",
    "show_derivation",
    "show_equation",
    "show_error",
    "show_experiment",
    "show_info",
    "show_table",
    "show_warning",
    "sidebar_config",
    "speculative_section",
    "STALE_NOTE",
    "stored_format",
    "stream_section",
    "sweep_lengths",
    "text_choice",
    "text_source",
    "training_step_section",
    "training_tab",
    "values_for_config",
    "values_from_query",
    "warmup_claim",
    "warmup_measured",
    "warmup_tab",
    "weight_dtype_names",
    "WIDGET_PREFIX",
]
