"""LoRA and DoRA adapters on the lab's linear layers, targeted and counted as PEFT does.

LoRA (Hu et al. 2021) adds ΔW = s · B A to a frozen W (out × in): A (r × in), B (out × r),
s = α / r (rsLoRA: α / √r). A starts kaiming-uniform (a = √5) and B at zero, so ΔW = 0 at the
start — PEFT's ``reset_lora_parameters`` (peft 0.21.2, peft/tuners/lora/layer.py). DoRA (Liu et
al. 2024) adds a magnitude m (one per output row) and computes

    y = m / ‖W + s·B A‖_row · (W x + s·B A x) + b

with the norm detached, as PEFT's ``DoraLinearLayer.forward`` (peft/tuners/lora/dora.py: the
norm is ``torch.linalg.norm(W + s·BA, dim=1)``, "treated as a constant", DoRA §4.3), m starting
at ‖W‖_row so that the first output equals the base's. PEFT writes the same result as
base + (m/‖·‖ − 1)·(W x) + m/‖·‖ · s·B A x.

The lab fuses q/k/v (and gate/up) into one ``FusedLinear``; an adapter on a part (``q_proj``)
adds to that part's rows of the output only, so the counts are PEFT's on transformers' separate
modules: r·(in + out) per targeted projection (DoRA: + out). Checkpoint keys are PEFT's
(``base_model.model.<module>.lora_A.weight``, ``….lora_magnitude_vector``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import cast

import torch
import torch.nn as nn

from .fused import FusedLinear
from .quant import NF4Linear

LINEAR_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
ALL_LINEAR = "all-linear"  # PEFT: every linear layer but the output head
PEFT_PREFIX = "base_model.model."


def lora_scaling(rank: int, alpha: float, rslora: bool = False) -> float:
    """s = α / r, or α / √r (rsLoRA, Kalajdzievski 2023)."""
    return alpha / math.sqrt(rank) if rslora else alpha / rank


class LoRA(nn.Module):
    """The adapter of one projection in → out: ``lora_A`` (r × in), ``lora_B`` (out × r) and,
    for DoRA, ``lora_magnitude_vector`` (out)."""

    lora_A: nn.Linear
    lora_B: nn.Linear
    lora_magnitude_vector: nn.Parameter | None

    def __init__(
        self,
        in_features: int,
        out_features: int,
        rank: int,
        scaling: float,
        weight: torch.Tensor | None,
        device: torch.device | None = None,
    ):
        super().__init__()
        self.lora_A = nn.Linear(in_features, rank, bias=False, device=device)
        self.lora_B = nn.Linear(rank, out_features, bias=False, device=device)
        nn.init.kaiming_uniform_(self.lora_A.weight, a=math.sqrt(5))
        nn.init.zeros_(self.lora_B.weight)
        self.scaling = scaling
        self.lora_magnitude_vector = (
            None if weight is None else nn.Parameter(torch.linalg.norm(weight.detach().float(), dim=1))
        )

    def delta_weight(self) -> torch.Tensor:
        return self.scaling * self.lora_B.weight @ self.lora_A.weight  # (out, in)

    def forward(self, x: torch.Tensor, base: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
        """The projection's output adapted; ``base`` = W x (no bias), ``weight`` = W (DoRA)."""
        adapted = base + self.scaling * self.lora_B(self.lora_A(x))
        if self.lora_magnitude_vector is None:
            return adapted
        m = self.lora_magnitude_vector
        assert weight is not None, "DoRA needs the base weight"
        with torch.no_grad():  # detached, DoRA §4.3
            norm = torch.linalg.norm(weight.to(m.dtype) + self.delta_weight().to(m.dtype), dim=1)
        return (m / norm).to(adapted.dtype) * adapted


class LoRALinear(nn.Module):
    """A frozen ``base_layer`` (nn.Linear, FusedLinear or NF4Linear) with adapters on some of
    its parts, by name (``adapters["q_proj"]``); ``split`` cuts the output as the base does."""

    base_layer: nn.Linear | NF4Linear

    def __init__(
        self,
        base_layer: nn.Linear | NF4Linear,
        parts: tuple[tuple[str, int], ...],
        targeted: tuple[str, ...],
        *,
        rank: int,
        scaling: float,
        dora: bool,
    ):
        super().__init__()
        self.base_layer, self.parts = base_layer, parts
        weight = base_weight(base_layer)
        weights = dict(zip([n for n, _ in parts], weight.split([r for _, r in parts])))
        self.adapters = nn.ModuleDict(
            {
                name: LoRA(
                    base_layer.in_features,
                    rows,
                    rank,
                    scaling,
                    weights[name] if dora else None,
                    weight.device,
                )
                for name, rows in parts
                if name in targeted
            }
        )

    def split(self, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return y.split([rows for _, rows in self.parts], dim=-1)

    def lora(self) -> dict[str, LoRA]:
        """The adapters by part name."""
        return {name: cast(LoRA, adapter) for name, adapter in self.adapters.items()}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = self.base_layer.bias
        y = self.base_layer(x)
        if bias is not None:
            y = y - bias  # the adapters (DoRA's scale) act on W x; the bias is added back
        adapters = self.lora()
        dora = any(a.lora_magnitude_vector is not None for a in adapters.values())
        sizes = [rows for _, rows in self.parts]
        weights = base_weight(self.base_layer).detach().split(sizes) if dora else [None] * len(sizes)
        outs = [
            adapters[name](x, part, w) if name in adapters else part
            for (name, _), part, w in zip(self.parts, self.split(y), weights)
        ]
        y = outs[0] if len(outs) == 1 else torch.cat(outs, dim=-1)
        return y if bias is None else y + bias


def base_weight(layer: nn.Linear | NF4Linear) -> torch.Tensor:
    """The (out, in) weight of a linear layer, an NF4 one dequantised to float32."""
    return layer.dequantized() if isinstance(layer, NF4Linear) else layer.weight


def _parts(name: str, layer: nn.Module) -> tuple[tuple[str, int], ...] | None:
    """(part, rows) of a linear layer the adapters can target, by transformers' module names;
    None for one they cannot (lm_head, routers, anything not named as a projection)."""
    if isinstance(layer, FusedLinear):
        return layer.parts
    if isinstance(layer, NF4Linear) and len(layer.sizes) > 1:
        return tuple(zip(_FUSED_NAMES[name], layer.sizes))
    if isinstance(layer, (nn.Linear, NF4Linear)) and name in LINEAR_TARGETS:
        return ((name, layer.out_features),)
    return None


_FUSED_NAMES = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}


def resolve_targets(model: nn.Module, targets: str | tuple[str, ...]) -> tuple[str, ...]:
    """The projection names ``targets`` selects in ``model``; ``all-linear`` = every one.
    A name the model does not have raises ValueError naming it."""
    present = [
        part
        for name, layer in model.named_modules()
        for part, _ in (_parts(name.rpartition(".")[2], layer) or ())
    ]
    if targets == ALL_LINEAR or targets == (ALL_LINEAR,):
        return tuple(dict.fromkeys(present))
    asked = (targets,) if isinstance(targets, str) else tuple(targets)
    missing = [t for t in asked if t not in present]
    if missing:
        raise ValueError(
            f"target module {missing[0]!r} is not a projection of this model "
            f"(it has {', '.join(dict.fromkeys(present))}, or all-linear)"
        )
    return asked


def attach_adapters(
    model: nn.Module,
    rank: int,
    alpha: float,
    targets: str | tuple[str, ...] = ("q_proj", "v_proj"),
    *,
    dora: bool = False,
    rslora: bool = False,
) -> tuple[str, ...]:
    """Freeze every parameter of ``model`` and wrap each targeted projection in a LoRALinear
    (in place); returns the projection names targeted. Trainable afterwards: the adapters."""
    if rank < 1:
        raise ValueError(f"rank={rank} must be at least 1")
    chosen = resolve_targets(model, targets)
    for p in model.parameters():
        p.requires_grad_(False)
    scaling = lora_scaling(rank, alpha, rslora)
    for owner_name, owner in list(model.named_modules()):
        for child_name, child in list(owner.named_children()):
            parts = _parts(child_name, child)
            if not parts or not any(part in chosen for part, _ in parts):
                continue
            widest = min(child.in_features, *(rows for _, rows in parts))
            if rank > widest:
                raise ValueError(f"rank={rank} is above the width of {owner_name}.{child_name} ({widest})")
            setattr(
                owner,
                child_name,
                LoRALinear(cast(nn.Linear, child), parts, chosen, rank=rank, scaling=scaling, dora=dora),
            )
    return chosen


def adapted_layers(model: nn.Module) -> dict[str, LoRALinear]:
    return {name: m for name, m in model.named_modules() if isinstance(m, LoRALinear)}


@torch.no_grad()
def merge_adapters(model: nn.Module) -> nn.Module:
    """Fold every adapter into its base weight and put the base layer back (in place): W ← W +
    s·BA, DoRA W ← m / ‖W + s·BA‖_row · (W + s·BA). An NF4 base becomes a plain nn.Linear
    holding the dequantised weight plus ΔW (float32)."""
    for name, wrapped in adapted_layers(model).items():
        base = wrapped.base_layer
        if isinstance(base, NF4Linear):
            has_bias = base.bias is not None
            plain = (
                FusedLinear(base.in_features, wrapped.parts, bias=has_bias)
                if len(wrapped.parts) > 1
                else nn.Linear(base.in_features, base.out_features, bias=has_bias)
            )
            plain.weight.copy_(base.dequantized())
            if base.bias is not None:
                plain.bias.copy_(base.bias)
            base = plain
        pieces = base.weight.split([rows for _, rows in wrapped.parts])
        for (part, _), w in zip(wrapped.parts, pieces):
            if part in wrapped.adapters:
                adapter = wrapped.lora()[part]
                merged = w + adapter.delta_weight().to(w.dtype)
                if adapter.lora_magnitude_vector is not None:
                    m = adapter.lora_magnitude_vector
                    merged = (m / torch.linalg.norm(merged.float(), dim=1)).to(w.dtype)[:, None] * merged
                w.copy_(merged)
        owner_name, _, child_name = name.rpartition(".")
        setattr(model.get_submodule(owner_name) if owner_name else model, child_name, base)
    return model


def adapter_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The adapters' tensors under PEFT's keys (``base_model.model.model.layers.0.self_attn.
    q_proj.lora_A.weight``, ``….lora_magnitude_vector``), wherever the lab fuses the part."""
    state = {}
    for name, wrapped in adapted_layers(model).items():
        owner = name.rpartition(".")[0]
        for part, adapter in wrapped.lora().items():
            prefix = f"{PEFT_PREFIX}{owner}.{part}." if owner else f"{PEFT_PREFIX}{part}."
            state[prefix + "lora_A.weight"] = adapter.lora_A.weight
            state[prefix + "lora_B.weight"] = adapter.lora_B.weight
            if adapter.lora_magnitude_vector is not None:
                state[prefix + "lora_magnitude_vector"] = adapter.lora_magnitude_vector
    return state


def save_adapter(model: nn.Module, path: str | Path) -> None:
    """The adapters alone, as safetensors (PEFT's ``adapter_model.safetensors`` keys)."""
    from safetensors.torch import save_file

    save_file({k: v.detach().contiguous() for k, v in adapter_state_dict(model).items()}, str(path))


@torch.no_grad()
def load_adapter(model: nn.Module, path: str | Path) -> None:
    """Load saved adapters into a model with the same adapters attached; every key must match."""
    from safetensors.torch import load_file

    loaded, own = load_file(str(path)), adapter_state_dict(model)
    if set(loaded) != set(own):
        extra = sorted(set(loaded) ^ set(own))
        raise ValueError(f"the adapter file does not match the attached adapters (key {extra[0]!r})")
    for key, tensor in own.items():
        tensor.copy_(loaded[key])


def quantize_base_nf4(model: nn.Module, skip: tuple[str, ...] = ("lm_head",)) -> int:
    """QLoRA's base: every nn.Linear of ``model`` but ``skip`` replaced by a frozen NF4Linear;
    the number of layers replaced. Call before ``attach_adapters``."""
    replaced = 0
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            full = f"{name}.{child_name}" if name else child_name
            if isinstance(child, nn.Linear) and not full.endswith(skip):
                setattr(module, child_name, NF4Linear(child))
                replaced += 1
    return replaced


def trainable_parameters(model: nn.Module) -> int:
    """Σ numel of the parameters that require a gradient (PEFT's ``get_nb_trainable_parameters``)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


__all__ = [
    "ALL_LINEAR",
    "LINEAR_TARGETS",
    "LoRA",
    "LoRALinear",
    "adapter_state_dict",
    "attach_adapters",
    "base_weight",
    "load_adapter",
    "lora_scaling",
    "merge_adapters",
    "quantize_base_nf4",
    "resolve_targets",
    "save_adapter",
    "trainable_parameters",
]
