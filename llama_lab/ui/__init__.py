"""The Streamlit side of LLaMA Lab, and the only part of the package that imports Streamlit:
the sidebar config builder shared by every page (``sidebar``), its session state and URL
mirror (``state``), the list of pages (``pages``), cached wrappers around the package
(``cached``), live runs from a page (``runs``) and one result panel per experiment kind
(``panels``). Pages call ``setup_page`` (or ``sidebar_config``) first; both initialise the
session state themselves, so any page also runs alone (``streamlit.testing.v1.AppTest``).
"""
from ..analysis.quant import kv_scale_bytes
from ..analysis.summary import family_notes
from ..config import MAX_BATCH, detect_ffn_rule, ffn_from_rule, live_config
from ..config.grids import divisors
from ..figures.common import sweep_lengths
from ..train.budgets import (CPU_FLOP_BUDGET, check_cpu_budget, guard, live_workload,
                             runs_live_quickly)
from ..units import human_bytes, human_count, human_params
from ..runtime.devices import PAGE_DEVICES
from .cached import (ablation_runs, architecture, flop_count, flops_sweep, fvcore_check,
                     fvcore_or_error, kv_fit, kv_memory_curve, kv_report, param_count,
                     roofline_points, scores_crossover, seed_claims, show_table,
                     depth_measured, gradnorms_measured, warmup_measured)
from .panels.gradnorms import explain_norm_positions
from .pages import HOME_ICON, HOME_PAGE, HOME_TITLE, PAGES, AppPage
from .runs import (STALE_NOTE, exclusive_run, ffn_label, is_stale, keep_experiment,
                   measure_on_view, run_with_status, text_choice, text_source,
                   live_run_note, session_experiments, set_defaults, show_experiment)
from .sidebar import Download, config_downloads, config_error, setup_page, sidebar_config
from .state import (BUILDER_KEYS, CONFIG_FIELDS, DEFAULT_DTYPE, DEFAULT_PRESET, EXPERIMENT_KEYS,
                    KEY_ABLATION, KEY_BATCH, KEY_BUILDER, KEY_DECODE, KEY_DEPTH_SWEEP, KEY_DTYPE,
                    KEY_FFN_MULTIPLE_OF, KEY_FFN_MULTIPLIER, KEY_FFN_RULE, KEY_GRADNORMS,
                    KEY_KV_DTYPE, KEY_LIVE_PASS, KEY_PRESET, KEY_WEIGHT_DTYPE, KEY_SEQ_LEN,
                    KEY_TRAINING, KEY_UPLOAD, LINK_NOTE,
                    QUERY_BATCH, QUERY_DTYPE, QUERY_KEYS, QUERY_KV, QUERY_PRESET, QUERY_SEQ,
                    QUERY_WEIGHTS, AS_DTYPE, kv_dtype_names, stored_format, weight_dtype_names,
                    WIDGET_PREFIX, Selection, config_from_values,
                    dtype_bytes, dtype_names, error_field, field_key, kv_label,
                    query_for, values_for_config, values_from_query)
from ..units import escape_markdown
from .state import KEY_MODEL_NAME, MAX_NAME, QUERY_NAME, model_name
from .derivations import derived_metric, show_derivation
from .inference import flash_section, quantisation_section, speculative_section
from .inside import (attention_section, forward_trace, inside_choice, lens_section,
                     positions_section, stream_section)
from .parallel import (korthikanti_section, layout_section, search_section,
                       serving_section, shard_section)
from ..runtime.hardware import GPUS
from .gradient import default_warmup, session_warmup, small_run, training_tab, warmup_tab
from .widgets import (LIVE_SIZE_HEADING, Link, bound_note, bounded_number, choice_link, int_link,
                      keep_choice, keep_within, link_widgets, live_size_box, remember,
                      show_caption, show_error, show_info, show_warning)

__all__ = [name for name in dir() if not name.startswith("_")]
