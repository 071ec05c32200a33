"""One error family. Every refusal the lab makes for a person - an impossible config, a bad
argument, a run that would not fit, unusable data - is a ``LabError`` whose message names the
rule broken; the boundaries (the CLI, the pages) catch this one class. ``LabError`` is a
``ValueError``, so code that already catches ValueError keeps working.
"""

from __future__ import annotations


class LabError(ValueError):
    """A refusal for a person: the message names the field or argument, the value and the rule."""


class ConfigError(LabError):
    """An invalid configuration; the message names the field, the value and the rule.

    ``field`` is the offending field's (or argument's) name where one is to blame, and
    ``fields`` every field the rule ties together, ``field`` first (``d_model`` and ``n_heads``
    for "d_model is not divisible by n_heads"), so a form can mark the one its user edited.
    """

    def __init__(self, message: str, *, field: str | None = None, also: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.field = field
        self.fields: tuple[str, ...] = ((field,) if field else ()) + tuple(also)


class AnalysisError(ConfigError):
    """An invalid analysis argument (sequence length, batch, dtype, GPU, sharding)."""


class DataError(ConfigError):
    """Unusable data (not UTF-8, empty, too short, too large, ids beyond the vocabulary)."""


class ReportError(ConfigError):
    """A report that cannot be built or rendered; the message says why."""


class ExperimentError(LabError):
    """A run that cannot or should not start; the message says why, with the figures."""


class BusyError(LabError):
    """No job slot became free within the wait limit."""
