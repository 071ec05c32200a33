"""Kept gradient buffers for the CPU: the two largest gradients of a LLaMA-style model, the
embedding's and the LM head's (V × C each: 65 MB on seed-demo), are written by our own autograd
Functions (``TokenEmbedding``, ``model.loss``) into one buffer per parameter that lives as long
as the parameter, as DDP's gradient buckets and Megatron's ``main_grad`` do. Under glibc's
defaults a fresh tensor that large is a fresh ``mmap``: every step faulted its 16,000 pages in
again, about a tenth of seed-demo's loss forward + backward
(benchmarks/bench_vs_transformers.py). CUDA's caching allocator reuses its blocks, so there
these are plain allocations.

The gradient handed to autograd is a view of the buffer (autograd takes it as ``.grad``
without a copy). The buffer is reused only once nothing else refers to its memory: after
``zero_grad()`` (``set_to_none``) or ``p.grad = None``. While ``.grad`` still holds it
(accumulating over micro-batches, ``zero_grad(set_to_none=False)``) a new buffer is made, so a
gradient is never overwritten while someone can see it.
"""

from __future__ import annotations

import threading
import weakref

import torch
import torch.nn as nn
import torch.nn.functional as F

POOL = 2  # buffers kept per parameter: a tied embedding/head gets both its gradients
_KEPT: dict[int, tuple[weakref.ref, list[torch.Tensor]]] = {}  # id(parameter) → (ref, buffers)
_LOCK = threading.Lock()
_USE_COUNT = getattr(torch._C, "_storage_Use_Count", None)


def _in_use(buffer: torch.Tensor) -> bool:
    """True when a tensor other than ``buffer`` refers to its memory (the Python storage
    object made here holds one reference, ``buffer`` one)."""
    return _USE_COUNT is None or _USE_COUNT(buffer.untyped_storage()._cdata) > 2


def _is_plain(param: torch.Tensor) -> bool:
    return type(param) in (torch.Tensor, nn.Parameter) and param.device.type == "cpu"


def gradient_buffer(param: torch.Tensor, zero: bool = False) -> torch.Tensor:
    """A tensor of ``param``'s shape and dtype for its gradient (zeroed if ``zero``): on the
    CPU, for a leaf, a view of one of the parameter's kept buffers that nothing else refers
    to (a new kept buffer while there are fewer than POOL); otherwise a new tensor."""
    if not (_is_plain(param) and param.is_leaf):
        return torch.zeros_like(param) if zero else torch.empty_like(param)
    key = id(param)
    with _LOCK:
        entry = _KEPT.get(key)
        if entry is None or entry[0]() is not param:
            entry = _KEPT[key] = (weakref.ref(param, lambda ref, key=key: _forget(key, ref)), [])
        buffers = entry[1]
        buffers[:] = [b for b in buffers if b.shape == param.shape and b.dtype == param.dtype]
        buffer = next((b for b in buffers if not _in_use(b)), None)
        if buffer is None:
            buffer = torch.empty(param.shape, dtype=param.dtype)
            if len(buffers) < POOL:
                buffers.append(buffer)
        view = buffer.view(buffer.shape)  # claimed: the view makes it in use
    return view.zero_() if zero else view


def _forget(key: int, ref: weakref.ref) -> None:
    with _LOCK:
        entry = _KEPT.get(key)
        if entry is not None and entry[0] is ref:
            del _KEPT[key]


def kept_gradient_bytes() -> int:
    """Bytes held in kept gradient buffers (all parameters, all threads)."""
    with _LOCK:
        return sum(b.numel() * b.element_size() for _, buffers in _KEPT.values() for b in buffers)


class _Lookup(torch.autograd.Function):
    """``F.embedding`` whose weight gradient goes into the weight's kept buffer."""

    @staticmethod
    def forward(ctx, ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(ids)
        ctx.weight = weight
        return F.embedding(ids, weight)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        (ids,) = ctx.saved_tensors
        weight = ctx.weight
        grad = gradient_buffer(weight, zero=True)
        grad.index_add_(0, ids.reshape(-1), grad_output.reshape(-1, weight.shape[1]).to(grad.dtype))
        return None, grad


class TokenEmbedding(nn.Embedding):
    """``nn.Embedding`` (same parameter, same state-dict key) whose weight gradient goes into
    a kept buffer on the CPU (``gradient_buffer``); elsewhere, for a distributed (DTensor)
    weight and under torch.compile, the plain ``F.embedding``."""

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        weight = self.weight
        if (
            torch.is_grad_enabled()
            and weight.requires_grad
            and _is_plain(weight)
            and not torch.compiler.is_compiling()
            and self.padding_idx is None
            and self.max_norm is None
            and not self.sparse
            and not self.scale_grad_by_freq
        ):
            return _Lookup.apply(ids, weight)
        return super().forward(ids)
