"""Issue 15: what the CPU training step keeps between steps instead of faulting in afresh — the
loss's logits buffer and the embedding's and LM head's gradient buffers — gives the same
numbers as fresh tensors, is reused only when nobody can see it any more, and goes with its
thread or parameter; the one-pass RMSNorm equals the composite one in value and gradients
and saves only its input and rstd."""

import gc
import threading

import pytest
import torch
import torch.nn.functional as F

from llama_lab.config import PRESETS
from llama_lab.model import RMSNorm, build_model
from llama_lab.model.grad_buffers import TokenEmbedding, gradient_buffer, kept_gradient_bytes
from llama_lab.model.loss import logits_buffer, release_logits_buffers
from llama_lab.train.measure import SavedTensorMeter


def plain_grads(model, ids):
    """Gradients through the plain path: full logits, F.cross_entropy, nn.Embedding's backward."""
    clone = build_model(model.cfg, seed=0)
    clone.load_state_dict(model.state_dict())
    body = clone.model
    body.embed_tokens.forward = lambda x: F.embedding(x, body.embed_tokens.weight)
    logits = clone(ids)[:, :-1]
    F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1)).backward()
    return {name: p.grad for name, p in clone.named_parameters()}


def ids_for(cfg, seed=0, shape=(3, 17)):
    return torch.randint(0, cfg.vocab_size, shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("tied", [False, True])
def test_kept_gradients_are_reused_and_equal_fresh_ones(tied):
    cfg = PRESETS["debug"].replace(tie_embeddings=tied)
    model = build_model(cfg, seed=0)
    head, embed = model.lm_head.weight, model.model.embed_tokens.weight
    pointers = []
    for step in range(3):
        ids = ids_for(cfg, step)
        model.zero_grad(set_to_none=True)
        model.loss(ids).backward()
        pointers.append((head.grad.data_ptr(), embed.grad.data_ptr()))
        ref = plain_grads(model, ids)
        for name, p in model.named_parameters():
            torch.testing.assert_close(p.grad, ref[name], rtol=1e-4, atol=1e-7, msg=name)
    if not tied:
        assert pointers[0] == pointers[1] == pointers[2]  # the same memory every step
        assert kept_gradient_bytes() >= 2 * cfg.vocab_size * cfg.d_model * 4


def test_a_gradient_still_held_is_never_overwritten():
    cfg = PRESETS["debug"]
    model = build_model(cfg, seed=0)
    head, embed = model.lm_head.weight, model.model.embed_tokens.weight
    model.loss(ids_for(cfg, 0)).backward()
    held = head.grad, embed.grad  # the user keeps them, then clears .grad
    copies = [g.clone() for g in held]
    model.zero_grad(set_to_none=True)
    model.loss(ids_for(cfg, 1)).backward()
    for g, c in zip(held, copies):
        assert torch.equal(g, c)
    assert head.grad.data_ptr() != held[0].data_ptr()


def test_accumulating_over_micro_batches_sums_the_gradients():
    cfg = PRESETS["debug"]
    model = build_model(cfg, seed=0)
    ids = ids_for(cfg, 3)
    model.loss(ids).backward()
    once = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.loss(ids).backward()  # no zeroing: autograd adds into .grad
    model.loss(ids).backward()
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad, 3 * once[name], rtol=1e-5, atol=1e-7, msg=name)
    model.zero_grad(set_to_none=False)  # zeroed in place, then accumulated again
    model.loss(ids).backward()
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad, once[name], rtol=1e-5, atol=1e-7, msg=name)


def test_buffers_go_with_their_parameter():
    before = kept_gradient_bytes()
    weight = torch.nn.Parameter(torch.randn(1000, 64))
    gradient_buffer(weight)
    assert kept_gradient_bytes() == before + 1000 * 64 * 4
    del weight
    gc.collect()
    assert kept_gradient_bytes() == before


def test_non_leaf_and_meta_weights_get_plain_tensors():
    weight = torch.nn.Parameter(torch.randn(8, 4))
    before = kept_gradient_bytes()
    assert gradient_buffer(weight * 2, zero=True).abs().sum() == 0  # not a leaf: new zeros
    meta = torch.nn.Parameter(torch.empty(8, 4, device="meta"))
    assert gradient_buffer(meta).is_meta
    assert kept_gradient_bytes() == before


def test_token_embedding_is_nn_embedding_in_every_mode():
    emb = TokenEmbedding(50, 8)
    ids = torch.randint(0, 50, (4, 9))
    ref = F.embedding(ids, emb.weight)
    with torch.no_grad():
        assert torch.equal(emb(ids), ref)
    out = emb(ids)
    assert torch.equal(out, ref)
    out.sum().backward()
    counts = torch.bincount(ids.reshape(-1), minlength=50).float()
    torch.testing.assert_close(emb.weight.grad, counts[:, None].expand(50, 8))
    assert isinstance(emb, torch.nn.Embedding) and list(emb.state_dict()) == ["weight"]


def test_the_logits_buffer_is_kept_per_thread_and_grows():
    release_logits_buffers()
    a = logits_buffer(4, 10, torch.float32, torch.device("cpu"))
    b = logits_buffer(3, 10, torch.float32, torch.device("cpu"))
    assert a.data_ptr() == b.data_ptr() and b.shape == (3, 10)
    c = logits_buffer(8, 10, torch.float32, torch.device("cpu"))  # larger: a new one
    assert c.shape == (8, 10) and c.numel() == 80
    other = []
    thread = threading.Thread(
        target=lambda: other.append(logits_buffer(8, 10, torch.float32, torch.device("cpu")).data_ptr())
    )
    thread.start()
    thread.join()
    assert other[0] != c.data_ptr()  # its own buffer
    release_logits_buffers()


def composite_rms(norm, x):
    dtype = x.dtype
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + norm.eps)
    return norm.weight * xf.to(dtype)


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)])
@pytest.mark.parametrize("shape", [(3, 5, 16), (2, 4, 3, 8)])  # blocks; QK-norm's heads
def test_one_pass_rmsnorm_equals_the_composite_and_saves_input_and_rstd(dtype, tol, shape):
    norm = RMSNorm(shape[-1], 1e-6).to(dtype)
    with torch.no_grad():
        norm.weight.normal_()
    x = torch.randn(shape, dtype=dtype, requires_grad=True)
    dy = torch.randn(shape, dtype=dtype)
    with SavedTensorMeter(norm) as meter:
        norm(x)
    saved = meter.bytes
    y = norm(x)
    grads = torch.autograd.grad(y, (x, norm.weight), dy)
    y_ref = composite_rms(norm, x)
    ref = torch.autograd.grad(y_ref, (x, norm.weight), dy)
    torch.testing.assert_close(y, y_ref, rtol=tol, atol=tol)
    for g, r in zip(grads, ref):
        torch.testing.assert_close(g, r, rtol=tol, atol=tol * r.abs().max().item())
    rows = x.numel() // shape[-1]
    assert saved == x.numel() * x.element_size() + 4 * rows  # x and float32 rstd
    with torch.no_grad():
        torch.testing.assert_close(norm(x), y_ref, rtol=tol, atol=tol)
