"""What a run measures besides time: logits statistics, the bytes autograd saves for backward,
and the bytes the weights, gradients and optimizer state really hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

import torch

from ..model import CausalLM
from ..model.loss import chunk_rows
from ..runtime.precision import Precision
from ..units import plain_fields


@dataclass(frozen=True)
class LogitStats:
    std: float
    max_abs: float
    max_prob_mean: float  # mean over tokens of the softmax's largest probability
    entropy_mean: float  # nats; ln(V) = uniform, 0 = saturated softmax

    @classmethod
    def of(cls, logits: torch.Tensor) -> "LogitStats":
        V = logits.shape[-1]
        return cls.of_chunks(row_chunks(logits.detach().reshape(-1, V), V))

    @classmethod
    def of_chunks(cls, chunks: Iterable[torch.Tensor]) -> "LogitStats":
        """The statistics of the rows of every (rows, V) chunk together, one chunk's float32
        logits, log-probabilities and probabilities alive at a time (never 4 × B·T·V)."""
        n = total = squares = 0.0
        max_abs, max_prob, entropy, rows = 0.0, 0.0, 0.0, 0
        for chunk in chunks:
            x = chunk.detach().to(torch.promote_types(chunk.dtype, torch.float32))
            total += x.sum(dtype=torch.float64).item()
            squares += x.pow(2).sum(dtype=torch.float64).item()
            n += x.numel()
            max_abs = max(max_abs, x.abs().max().item())
            log_probs = x.log_softmax(-1)
            probs = log_probs.exp()
            max_prob += probs.max(-1).values.sum(dtype=torch.float64).item()
            entropy += -(probs * log_probs).sum(-1).sum(dtype=torch.float64).item()
            rows += x.shape[0]
        variance = max(0.0, (squares - total * total / n) / (n - 1)) if n > 1 else 0.0
        return cls(
            std=variance**0.5, max_abs=max_abs, max_prob_mean=max_prob / rows, entropy_mean=entropy / rows
        )

    def to_dict(self) -> dict:
        return plain_fields(self)


def row_chunks(rows: torch.Tensor, vocab: int) -> Iterator[torch.Tensor]:
    """``rows`` (N, ·) a chunk at a time, as many rows as the loss takes at once for a
    vocabulary of ``vocab`` (``model.loss.chunk_rows``: 64 MiB of float32 logits)."""
    step = chunk_rows(max(1, vocab))
    return (rows[start : start + step] for start in range(0, rows.shape[0], step))


@torch.no_grad()
def logit_stats(model: CausalLM, inputs: torch.Tensor, precision: Precision) -> tuple[LogitStats, LogitStats]:
    """(with the final norm, without it) on the same inputs; no graph is kept, and the LM head
    runs a chunk of rows at a time (never the B·T·V logits)."""

    def stats(hidden: torch.Tensor) -> LogitStats:
        hidden = hidden.reshape(-1, hidden.shape[-1])
        chunks = row_chunks(hidden, model.cfg.vocab_size)
        return LogitStats.of_chunks(model.cap(model.lm_head(h)) for h in chunks)

    with precision.autocast():
        return stats(model.model(inputs)), stats(model.model(inputs, final_norm=False))


_CAST_OR_VIEW = {
    "ToCopyBackward0",
    "TBackward0",
    "ViewBackward0",
    "TransposeBackward0",
    "PermuteBackward0",
    "ExpandBackward0",
    "UnsafeViewBackward0",
}


def parameter_behind(tensor: torch.Tensor, params: set[int] | None = None) -> bool:
    """True when ``tensor`` is a parameter — a leaf that requires grad, one of ``params`` (their
    ``id``) when given — or one seen through casts and views only (autocast's low-precision copy
    of a weight, a transposed or reshaped one, a view of FSDP2's all-gathered parameter), found
    by walking its autograd graph to the leaf's AccumulateGrad. ``SavedTensorMeter`` asks it of
    its model's parameters, ``train.shard``'s meter of any leaf (FSDP2 swaps its parameters
    while a block runs)."""
    fn = tensor.grad_fn
    if fn is None:
        return tensor.requires_grad and (params is None or id(tensor) in params)
    for _ in range(8):
        if type(fn).__name__ == "AccumulateGrad":
            # an AccumulateGrad node holds its leaf; torch's Node stub does not declare .variable
            return params is None or id(fn.variable) in params  # type: ignore[attr-defined]
        if type(fn).__name__ not in _CAST_OR_VIEW or not fn.next_functions:
            return False
        fn = fn.next_functions[0][0]
        if fn is None:
            return False
    return False


class SavedTensorMeter:
    """Bytes of the tensors autograd saves for backward, each storage counted once. Parameters
    (and views of them) are excluded; autocast's low-precision copies of the weights are counted
    apart (``weight_cast_bytes``): what remains is the activation memory."""

    def __init__(self, model: torch.nn.Module):
        params = list(model.parameters())
        self._param_storages = {p.untyped_storage().data_ptr() for p in params}
        self._param_ids = {id(p) for p in params}
        self._activations: dict[int, int] = {}
        self._weight_casts: dict[int, int] = {}
        self._alive: list[torch.Tensor] = []  # keeps each storage's address unique until exit

    def _pack(self, tensor: torch.Tensor) -> int:
        """Count ``tensor``'s storage; the graph keeps only its address. (Returning the tensor
        itself would tie an output saved by its own grad_fn into a reference cycle that only
        the cyclic garbage collector frees: the activations would outlive the measurement.)"""
        storage = tensor.untyped_storage()
        ptr = storage.data_ptr()
        if ptr in self._param_storages or ptr in self._activations or ptr in self._weight_casts:
            return ptr
        if parameter_behind(tensor, self._param_ids):
            self._weight_casts[ptr] = storage.nbytes()
        else:
            self._activations[ptr] = storage.nbytes()
        self._alive.append(tensor.detach())
        return ptr

    @staticmethod
    def _unpack(_ptr: int) -> torch.Tensor:
        raise RuntimeError("a SavedTensorMeter graph is for measuring only: it cannot run backward")

    @property
    def bytes(self) -> int:
        return sum(self._activations.values())

    @property
    def weight_cast_bytes(self) -> int:
        return sum(self._weight_casts.values())

    def __enter__(self):
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc):
        self._alive.clear()
        return self._hooks.__exit__(*exc)


def tensor_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes of the tensors' storages, each counted once (a tied or shared one once)."""
    storages = {}
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.device.type != "meta":
            storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return sum(storages.values())


def state_bytes(model: torch.nn.Module, optimizer: torch.optim.Optimizer | None) -> dict[str, int]:
    """Weights, gradients and optimizer state as the tensors hold them (tied weights once)."""
    params = list(model.parameters())
    optimizer_tensors = []
    if optimizer is not None:
        for state in optimizer.state.values():
            optimizer_tensors += [v for v in state.values() if isinstance(v, torch.Tensor)]
    return {
        "weights": tensor_bytes(params),
        "gradients": tensor_bytes(p.grad for p in params if p.grad is not None),
        "optimizer": tensor_bytes(optimizer_tensors),
    }


# ---- gradient norms -------------------------------------------------------------------------
def norm_tensor(tensors: Iterable[torch.Tensor], device: torch.device) -> torch.Tensor:
    """L2 norm of all entries of all tensors together, as a 0-dim tensor (no device sync)."""
    squares = [t.detach().float().pow(2).sum() for t in tensors]
    return torch.stack(squares).sum().sqrt() if squares else torch.zeros((), device=device)


def norm_of(tensors: Iterable[torch.Tensor]) -> float:
    return norm_tensor(tensors, torch.device("cpu")).item()


def layer_grad_norms(model: CausalLM) -> list[float]:
    """‖∇θ_l‖ over every parameter of block l (index 0 = nearest the input); one device sync."""
    device = model.lm_head.weight.device
    return torch.stack(
        [
            norm_tensor((p.grad for p in layer.parameters() if p.grad is not None), device)
            for layer in model.model.layers
        ]
    ).tolist()
