"""The registry of experiment kinds. A kind is declared once, in its own module, as an
``ExperimentKind``: its title (the report's section), its result type, the function that runs
it, the tables and figures the report and the pages show, and the UI panel that draws it
(``llama_lab.ui.panels.<panel>``). The report, the panels and the session-state keys all read
from ``KINDS``; adding a kind is one new module in this package (plus its page widgets).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..config import ModelConfig
from ..errors import ExperimentError
from ..figures.common import Figure, Table

STATE_PREFIX = "llama_lab.experiment."  # session-state keys of the app's results


@dataclass(frozen=True, eq=False)
class ExperimentKind:
    name: str  # "gradnorms": the JSON and state key
    title: str  # the report's section title
    result_type: type  # what ``run`` returns
    run: Callable[..., Any]
    tables: Callable[..., list[Table]]  # (result, section, config) → tables
    figures: Callable[..., list[Figure]]  # (result, section) → figures
    panel: str  # llama_lab.ui.panels.<panel>.show
    order: int  # where the report shows it

    @property
    def state_key(self) -> str:
        """The session-state key under which the app keeps this session's entry of the kind."""
        return STATE_PREFIX + self.name


KINDS: dict[str, ExperimentKind] = {}


def register(kind: ExperimentKind) -> ExperimentKind:
    if kind.name in KINDS:
        raise ExperimentError(f"experiment kind {kind.name!r} is declared twice")
    KINDS[kind.name] = kind
    ordered = sorted(KINDS.values(), key=lambda k: k.order)
    KINDS.clear()
    KINDS.update((k.name, k) for k in ordered)
    return kind


def get_kind(name: str) -> ExperimentKind:
    try:
        return KINDS[name]
    except KeyError:
        raise ExperimentError(f"experiment kind={name!r} must be one of {', '.join(KINDS)}") from None


def experiment_state_key(name: str) -> str:
    return get_kind(name).state_key


@dataclass(frozen=True, eq=False)
class ExperimentEntry:
    """One experiment result with the config it ran on and the settings it was run with."""

    kind: str
    result: Any  # a KINDS[kind].result_type instance
    config: ModelConfig | None = None
    settings: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "config": self.config.to_dict() if self.config else None,
            "settings": dict(self.settings),
            "result": self.result.to_dict(),
        }
