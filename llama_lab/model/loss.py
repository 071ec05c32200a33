"""Next-token cross-entropy through the LM head without the logits wall: the rows go through
lm_head a chunk at a time, and each chunk's gradients (with respect to the hidden states and
to the head's weight) are computed while its logits exist, so no B·T·V tensor is ever held
(the fused linear cross-entropy of Liger and torchtune). Same FLOPs as the plain path — one
GEMM forward, two for the gradients — with the gradient GEMMs moved into the forward; exact
to the plain path up to float rounding (tests/unit/model/test_loss.py).

What it keeps for backward: the gradient of the hidden states (N × C, the hidden states'
dtype) and of the weight (V × C, the weight's dtype) — not the N × V logits and
log-probabilities of ``F.cross_entropy``.

The 1/N of the mean is applied to the N × C hidden states and gradient, not to the N × V
probabilities. A soft cap on the logits (Gemma 2: z → cap · tanh(z / cap)) is applied per chunk,
its derivative 1 − tanh² folded into the chunk's gradient.
"""

from __future__ import annotations

import torch

LOGIT_CHUNK_BYTES = 64 * 2**20  # the float32 logits of one chunk: at most this many bytes
MIN_CHUNK_ROWS = 64  # ... but never fewer rows than this (GEMM efficiency)


def chunk_rows(vocab_size: int) -> int:
    """Rows of one chunk: LOGIT_CHUNK_BYTES of float32 logits, at least MIN_CHUNK_ROWS."""
    return max(MIN_CHUNK_ROWS, LOGIT_CHUNK_BYTES // (4 * vocab_size))


def _capped(logits: torch.Tensor, softcap: float) -> torch.Tensor:
    """cap · tanh(z / cap), in place (or z itself when softcap is 0)."""
    return logits.div_(softcap).tanh_().mul_(softcap) if softcap else logits


def _row_losses(
    probs: torch.Tensor,
    target_logits: torch.Tensor,
    targets: torch.Tensor,
    hidden: torch.Tensor,
    weight: torch.Tensor,
    softcap: float,
) -> torch.Tensor:
    """−log p(target) per row (n, 1), from the softmax: one pass over the logits fewer than
    log-softmax and then exp. Where p(target) is too small to keep its digits (a logit far
    below the row's largest), that row's loss is the exact logsumexp − z_target of its logits
    computed again."""
    p = probs.gather(1, targets[:, None])
    losses = -p.log()
    small = p < torch.finfo(p.dtype).tiny * 2**24
    if small.any():
        rows = small.squeeze(1).nonzero().squeeze(1)
        again = _capped((hidden[rows] @ weight.t()).to(probs.dtype), softcap)
        losses[rows] = torch.logsumexp(again, dim=-1, keepdim=True) - target_logits[rows]
    return losses


@torch.no_grad()
def _chunked(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    rows: int,
    grad_h: bool,
    grad_w: bool,
    softcap: float = 0.0,
):
    """The mean loss and, as asked, its gradients with respect to hidden and weight."""
    N, V = hidden.shape[0], weight.shape[0]
    float_dtype = torch.promote_types(hidden.dtype, torch.float32)  # float64 stays float64
    grad_hidden = torch.empty_like(hidden) if grad_h else None
    grad_weight = None  # the first chunk's product, then accumulated
    total = torch.zeros((), dtype=float_dtype, device=hidden.device)
    weight_nt = weight
    if grad_h and weight.device.type == "cpu" and weight.dtype in (torch.float16, torch.bfloat16):
        # the CPU's 16-bit GEMM is ~25× slower with a row-major (V, C) right operand and the
        # long V as the inner dimension than with a transposed view of a (C, V) copy
        weight_nt = weight.t().contiguous().t()
    buffer = torch.empty(min(rows, N), V, dtype=float_dtype, device=hidden.device)  # one chunk's logits
    for start in range(0, N, rows):
        h, t = hidden[start : start + rows], targets[start : start + rows]
        logits = buffer[: h.shape[0]]  # (n, V)
        if hidden.dtype == float_dtype:
            torch.mm(h, weight.t(), out=logits)
        else:
            logits.copy_(h @ weight.t())  # float32, as F.cross_entropy(.float())
        capped = _capped(logits, softcap)  # cap · tanh(z / cap), in place
        slope = 1 - (capped / softcap).square() if softcap and (grad_h or grad_w) else None
        target_logits = capped.gather(1, t[:, None])  # (n, 1)
        probs = torch.softmax(capped, dim=-1, out=logits)  # in place, one kernel
        total += _row_losses(probs, target_logits, t, h, weight, softcap).sum()
        if not (grad_h or grad_w):
            continue
        # d(mean CE)/d logits = (softmax − one-hot) / N (× 1 − tanh² under a cap), then back
        # through the matmul (the 1/N applied to the narrow side: the N × C rows and gradient)
        probs[torch.arange(t.shape[0], device=t.device), t] -= 1.0
        if slope is not None:
            probs.mul_(slope)
        probs = probs.to(hidden.dtype)
        if grad_hidden is not None:
            torch.matmul(probs, weight_nt, out=grad_hidden[start : start + rows]).div_(N)
        if grad_w:
            h = h / N
            if grad_weight is None:
                grad_weight = probs.t() @ h  # (V, C)
            else:
                grad_weight.addmm_(probs.t(), h)
    return total / N, grad_hidden, grad_weight


class _LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx, hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, rows: int, softcap: float
    ) -> torch.Tensor:
        loss, grad_hidden, grad_weight = _chunked(
            hidden, weight, targets, rows, ctx.needs_input_grad[0], ctx.needs_input_grad[1], softcap
        )
        ctx.save_for_backward(grad_hidden, grad_weight)
        return loss

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        grad_hidden, grad_weight = ctx.saved_tensors
        if torch.equal(grad_output, torch.ones_like(grad_output)):  # loss.backward(): as is
            return grad_hidden, grad_weight, None, None, None
        return (
            None if grad_hidden is None else grad_hidden * grad_output.to(grad_hidden.dtype),
            None if grad_weight is None else grad_weight * grad_output.to(grad_weight.dtype),
            None,
            None,
            None,
        )


def linear_cross_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    rows: int | None = None,
    softcap: float = 0.0,
) -> torch.Tensor:
    """Mean cross-entropy of ``hidden @ weight.T`` (hidden (N, C), weight (V, C)) against
    ``targets`` (N,), in chunks of ``rows`` rows (default ``chunk_rows(V)``), the logits in
    float32 (float64 stays float64), soft-capped when ``softcap`` > 0. Under autocast the
    matmuls run in its dtype, as ``nn.Linear`` would."""
    if torch.is_autocast_enabled(hidden.device.type):
        dtype = torch.get_autocast_dtype(hidden.device.type)
        hidden, weight = hidden.to(dtype), weight.to(dtype)
    elif weight.dtype != hidden.dtype:
        hidden = hidden.to(weight.dtype)
    targets, rows = targets.reshape(-1), rows or chunk_rows(weight.shape[0])
    if not torch.is_grad_enabled() or not (hidden.requires_grad or weight.requires_grad):
        return _chunked(hidden, weight, targets, rows, False, False, softcap)[0]
    return _LinearCrossEntropy.apply(hidden, weight, targets, rows, softcap)
