"""Projections of one input fused into one GEMM, checkpoints kept as transformers writes them.

Attention's q, k and v projections read the same x, and so do SwiGLU's gate and up: one
``FusedLinear`` holds their weights stacked along the output dimension ([q; k; v] is
(H·D + 2·G·D, C)) and runs one wide matrix multiply instead of three narrow ones (gpt-fast's
``wqkv``). Checkpoints do not change: the owning module's ``state_dict()`` shows the parts
under their own names (``q_proj.weight``, ``k_proj.weight``, ...: views of the fused tensor)
and ``load_state_dict`` fuses them back (``keep_part_keys``), so a transformers state dict
loads with ``strict=True`` and ours loads into transformers. ``state_dict(keep_vars=True)``,
which torch.jit and FSDP ask for to reach the Parameters themselves, gets the fused one.
``part_tensors`` names the parts of any module's parameters (or gradients) for the tables
that count them one by one.
"""

from __future__ import annotations

from typing import Iterator

import torch
import torch.nn as nn

KINDS = ("weight", "bias")


class FusedLinear(nn.Linear):
    """``parts``: (name, output rows) of each projection, in order; forward returns the
    concatenated outputs, ``split`` cuts them apart."""

    def __init__(self, in_features: int, parts: tuple[tuple[str, int], ...], bias: bool):
        super().__init__(in_features, sum(rows for _, rows in parts), bias=bias)
        self.parts = tuple(parts)

    @property
    def sizes(self) -> list[int]:
        return [rows for _, rows in self.parts]

    def split(self, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The parts' outputs (views) of ``y`` (..., Σ rows)."""
        return y.split(self.sizes, dim=-1)

    def pieces(self, tensor: torch.Tensor) -> dict[str, torch.Tensor]:
        """``tensor`` (the weight, the bias or either's gradient) cut into the parts: name →
        view, split along the output rows."""
        return {name: piece for (name, _), piece in zip(self.parts, tensor.split(self.sizes))}

    def extra_repr(self) -> str:
        return super().extra_repr() + ", parts=" + "+".join(f"{n}:{r}" for n, r in self.parts)


def keep_part_keys(owner: nn.Module, fused_name: str) -> None:
    """Make ``owner``'s state dict show its FusedLinear child ``fused_name`` as the parts'
    own keys, and fuse those keys back on load (a state dict with the fused key loads too)."""

    def split_on_save(module, state_dict, prefix, local_metadata) -> None:
        fused = getattr(module, fused_name)
        keys = [key for key in (f"{prefix}{fused_name}.{kind}" for kind in KINDS) if key in state_dict]
        if not keys or isinstance(state_dict[keys[0]], nn.Parameter):
            return  # ``state_dict(keep_vars=True)`` (torch.jit, FSDP): the real Parameters
        pieces = {key.rpartition(".")[2]: fused.pieces(state_dict[key]) for key in keys}
        parts = {
            f"{prefix}{name}.{kind}": pieces[kind][name]  # each part's weight, then bias
            for name, _ in fused.parts
            for kind in pieces
        }
        _replace_key(state_dict, keys[0], parts, drop=keys[1:])

    def fuse_on_load(state_dict, prefix, *args) -> None:
        fused = getattr(owner, fused_name)
        for kind in KINDS:
            keys = [f"{prefix}{name}.{kind}" for name, _ in fused.parts]
            if all(key in state_dict for key in keys):
                whole = torch.cat([state_dict[key] for key in keys])
                _replace_key(state_dict, keys[0], {f"{prefix}{fused_name}.{kind}": whole}, drop=keys[1:])

    owner.register_state_dict_post_hook(split_on_save)
    owner.register_load_state_dict_pre_hook(lambda module, *args: fuse_on_load(*args))


def _replace_key(state_dict: dict, key: str, replacement: dict, drop=()) -> None:
    """Put ``replacement``'s items where ``key`` stood (the order of the other keys kept) and
    remove ``drop``."""
    items = list(state_dict.items())
    state_dict.clear()
    for k, v in items:
        if k == key:
            state_dict.update(replacement)
        elif k not in drop:
            state_dict[k] = v


def part_tensors(module: nn.Module, grads: bool = False) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, tensor) of ``module``'s parameters — with ``grads``, of their gradients (None
    skipped) — a fused projection's cut into its parts under their own module names
    (``self_attn.q_proj.weight``, ...), every other one as ``named_parameters`` names it."""
    fused = {name: m for name, m in module.named_modules() if isinstance(m, FusedLinear)}
    for name, param in module.named_parameters():
        tensor = param.grad if grads else param
        if tensor is None:
            continue
        owner, _, kind = name.rpartition(".")
        if owner not in fused:
            yield name, tensor
            continue
        parent = owner.rpartition(".")[0]
        for part, piece in fused[owner].pieces(tensor).items():
            yield f"{parent}.{part}.{kind}" if parent else f"{part}.{kind}", piece
