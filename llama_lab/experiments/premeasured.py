"""Results shipped with the package: the default measurements the pages show at once, labelled
as pre-measured, instead of a run of seconds to minutes on first view.

``tools/premeasure.py`` runs each default (``DEFAULTS``: the Gradient norms page's three settings
at their default sizes, their depth sweeps, the warmup contrast of the seed claim, and the
Inside the model page's trained small copies) and writes what it measured into
``premeasured_data/``: per kind a JSON file of entries, each with the config and settings it ran
under (the key a page looks it up by), the machine and versions it ran on, its time, and the
result (dataclasses written field by field); the trained copies' weights beside them as
safetensors. A page shows an entry only for exactly its config and settings.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import importlib
import json
import math
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import torch

from .. import __version__
from ..config import ModelConfig
from ..errors import ExperimentError
from ..runtime.devices import cpu_kernels

DATA_DIR = Path(__file__).with_name("premeasured_data")
FORMAT = 1  # bump when the layout of the files changes


_DEFAULTS = ModelConfig().to_dict()


def _canonical(value: Any) -> Any:
    """``value`` as plain JSON (tuples as lists, configs as the fields that depart from the
    defaults: a field added later, at its default, keeps every key), for keys and settings."""
    if isinstance(value, ModelConfig):
        return {
            name: v for name, v in value.to_dict().items() if name not in _DEFAULTS or v != _DEFAULTS[name]
        }
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    return value


def entry_key(kind: str, config: ModelConfig | None, settings: Mapping[str, Any]) -> str:
    """The key of a measurement: a hash of its kind, config and settings as canonical JSON."""
    text = json.dumps([kind, _canonical(config), _canonical(settings)], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def encode(value: Any) -> Any:
    """A result as JSON: a dataclass as its class's path and its fields, floats that JSON cannot
    hold (nan, ±inf) as strings under ``__float__``."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cls = type(value)
        fields = {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init}
        return {"__class__": f"{cls.__module__}:{cls.__qualname__}", **fields}
    if isinstance(value, Mapping):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return {"__float__": repr(value)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise ExperimentError(f"a pre-measured result cannot hold a {type(value).__name__}")


def decode(value: Any) -> Any:
    """The inverse of ``encode`` (classes only from this package)."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "__float__" in value:
        return float(value["__float__"])
    if "__class__" not in value:
        return {k: decode(v) for k, v in value.items()}
    module, _, name = value["__class__"].partition(":")
    if not module.startswith("llama_lab."):
        raise ExperimentError(f"a pre-measured result names {module!r}, not a llama_lab class")
    cls = getattr(importlib.import_module(module), name)
    return cls(**{k: decode(v) for k, v in value.items() if k != "__class__"})


def provenance(device: torch.device, seconds: float, flops: float) -> dict:
    """Where and how a measurement ran: the machine, the versions, the date and its time."""
    return {
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores"
        + (f", {torch.cuda.get_device_name(device)}" if device.type == "cuda" else ""),
        "device": device.type,
        # what picks the CPU's kernels: a long run reproduces to the bit only on the same ones
        **({"cpu": cpu_kernels()} if device.type == "cpu" else {}),
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "llama_lab": __version__,
        "date": datetime.date.today().isoformat(),
        "seconds": round(seconds, 2),
        "flops": flops,
    }


@dataclass(frozen=True)
class Premeasured:
    """A shipped measurement: its result and where it ran (``provenance``)."""

    kind: str
    config: ModelConfig | None  # None: a measurement that does not depend on the sidebar's model
    settings: dict
    result: Any
    provenance: dict
    weights: str | None = None  # a safetensors file in DATA_DIR (the trained copies)

    @property
    def where(self) -> str:
        """Where, when and with what it ran, and how long it took."""
        p = self.provenance
        return (
            f"by tools/premeasure.py on {p['date']} ({p['machine']}, {p['device']}, "
            f"torch {p['torch']}, Python {p['python']}; {p['seconds']:.0f} s there)"
        )

    @property
    def label(self) -> str:
        return "pre-measured " + self.where


def _path(kind: str) -> Path:
    return DATA_DIR / f"{kind}.json"


def _read(kind: str) -> dict[str, dict]:
    """key → raw entry of ``kind``'s file (none when it is not shipped)."""
    path = _path(kind)
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    if data.get("format") != FORMAT or "entries" not in data:  # (the scaling ladder's own file)
        return {}
    return {entry["key"]: entry for entry in data["entries"]}


_CACHE: dict[str, dict[str, dict]] = {}


def _entries(kind: str) -> dict[str, dict]:
    """``_read(kind)``, parsed once per process (``record`` drops the copy it replaces)."""
    if kind not in _CACHE:
        _CACHE[kind] = _read(kind)
    return _CACHE[kind]


def lookup(kind: str, config: ModelConfig | None, settings: Mapping[str, Any]) -> Premeasured | None:
    """The shipped measurement of ``kind`` for exactly ``config`` and ``settings``, or None."""
    raw = _entries(kind).get(entry_key(kind, config, settings))
    if raw is None:
        return None
    return Premeasured(
        kind,
        config,
        dict(settings),
        decode(raw["result"]),
        raw["provenance"],
        raw.get("weights"),
    )


def record(
    kind: str,
    config: ModelConfig | None,
    settings: Mapping[str, Any],
    result: Any,
    meta: dict,
    weights: Mapping[str, torch.Tensor] | None = None,
) -> None:
    """Write (or replace) the entry of ``kind`` for ``config`` and ``settings``."""
    from safetensors.torch import save_file

    DATA_DIR.mkdir(exist_ok=True)
    key = entry_key(kind, config, settings)
    entries = _read(kind)
    entry = {
        "key": key,
        "config": config.to_dict() if config is not None else None,
        "settings": _canonical(settings),
        "provenance": meta,
        "result": encode(result),
    }
    if weights is not None:
        entry["weights"] = f"{kind}-{key}.safetensors"
        save_file({k: v.detach().contiguous().cpu() for k, v in weights.items()}, DATA_DIR / entry["weights"])
    entries[key] = entry
    body = {"format": FORMAT, "entries": sorted(entries.values(), key=lambda e: e["key"])}
    _path(kind).write_text(json.dumps(body, indent=1, sort_keys=True) + "\n")
    _CACHE.pop(kind, None)


def load_weights(entry: Premeasured) -> dict[str, torch.Tensor]:
    """The state dict shipped with ``entry``."""
    from safetensors.torch import load_file

    if entry.weights is None:
        raise ExperimentError(f"the pre-measured {entry.kind} entry ships no weights")
    return load_file(DATA_DIR / entry.weights)


def shipped_rate() -> float | None:
    """FLOP/s the shipped CPU measurements reached (their FLOPs over their seconds, all kinds
    together): what a button's expected time on a CPU is worked out from."""
    flops = seconds = 0.0
    for path in DATA_DIR.glob("*.json"):
        for entry in _entries(path.stem).values():
            p = entry["provenance"]
            if p.get("device") == "cpu" and p.get("flops"):
                flops, seconds = flops + p["flops"], seconds + p["seconds"]
    return flops / seconds if seconds else None


def timed(work: Callable[..., Any], *args: Any) -> tuple[Any, float]:
    """``work(*args)`` and the seconds it took."""
    start = time.perf_counter()
    result = work(*args)
    return result, time.perf_counter() - start
