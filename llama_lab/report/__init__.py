"""The report: everything the lab knows about one model, plus this session's experiment
results, collected once (``build``) and rendered as HTML, JSON, Markdown or a zip of CSVs
(``formats``)."""

from ..errors import ReportError
from ..experiments import ExperimentEntry, experiment_state_key
from .build import FinetuneWorkload, Precision, Report, build_report, environment
from .formats import FORMATS, LONG_TABLE_ROWS, MAX_SHOWN_ROWS, markdown_table, render

__all__ = [
    "FORMATS",
    "LONG_TABLE_ROWS",
    "MAX_SHOWN_ROWS",
    "ExperimentEntry",
    "FinetuneWorkload",
    "Precision",
    "Report",
    "ReportError",
    "build_report",
    "environment",
    "experiment_state_key",
    "markdown_table",
    "render",
]
