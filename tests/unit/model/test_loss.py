"""The chunked LM-head cross-entropy (issue 15): the loss and its gradients equal the plain
path's (logits, then F.cross_entropy) for every chunking, tied or untied heads, fp32 and under
bf16 autocast; CausalLM.loss equals transformers' labels=input_ids loss; and it never holds the
B·T·V logits for backward."""

import pytest
import torch
import torch.nn.functional as F

from llama_lab.config import PRESETS
from llama_lab.model import build_model
from llama_lab.model.loss import chunk_rows, linear_cross_entropy
from llama_lab.train.measure import SavedTensorMeter


def plain(hidden, weight, targets):
    logits = hidden @ weight.t()
    return F.cross_entropy(logits if logits.dtype == torch.float64 else logits.float(), targets)


@pytest.mark.parametrize("rows", [1, 7, 64, 1000])
def test_loss_and_gradients_equal_the_plain_path(rows):
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(37, 16, generator=g, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(50, 16, generator=g, dtype=torch.float64, requires_grad=True)
    targets = torch.randint(0, 50, (37,), generator=g)
    ours = linear_cross_entropy(hidden, weight, targets, rows)
    gh, gw = torch.autograd.grad(ours, (hidden, weight))
    ref = plain(hidden, weight, targets)
    rh, rw = torch.autograd.grad(ref, (hidden, weight))
    torch.testing.assert_close(ours, ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gh, rh, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(gw, rw, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("rows", [7, 1000])
def test_soft_capped_logits_loss_and_gradients_equal_the_plain_path(rows):
    # Gemma 2: cross-entropy of cap · tanh(z / cap)
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(37, 16, generator=g, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(50, 16, generator=g, dtype=torch.float64, requires_grad=True)
    targets = torch.randint(0, 50, (37,), generator=g)
    ours = linear_cross_entropy(hidden, weight, targets, rows, softcap=1.5)
    gh, gw = torch.autograd.grad(ours, (hidden, weight))
    ref = F.cross_entropy(torch.tanh(hidden @ weight.t() / 1.5) * 1.5, targets)
    rh, rw = torch.autograd.grad(ref, (hidden, weight))
    torch.testing.assert_close(ours, ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gh, rh, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(gw, rw, rtol=1e-10, atol=1e-12)


def test_a_scaled_loss_scales_its_gradients():
    hidden = torch.randn(9, 8, requires_grad=True)
    weight = torch.randn(11, 8, requires_grad=True)
    targets = torch.randint(0, 11, (9,))
    (3.0 * linear_cross_entropy(hidden, weight, targets, 4)).backward()
    h2, w2 = hidden.detach().clone().requires_grad_(), weight.detach().clone().requires_grad_()
    (3.0 * plain(h2, w2, targets)).backward()
    torch.testing.assert_close(hidden.grad, h2.grad)
    torch.testing.assert_close(weight.grad, w2.grad)


@pytest.mark.parametrize("tied", [False, True, "gemma2"])
def test_the_models_loss_equals_the_plain_one_with_its_gradients(tied):
    gemma = dict(
        norm_position="sandwich", norm_plus_one=True, ffn_type="geglu", attn_softcap=2.0, logit_softcap=3.0
    )
    cfg = PRESETS["debug"].replace(tie_embeddings=bool(tied), **(gemma if tied == "gemma2" else {}))
    model = build_model(cfg, seed=0)
    ids = torch.randint(0, cfg.vocab_size, (3, 20), generator=torch.Generator().manual_seed(1))
    ours = model.loss(ids)
    ours.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    logits = model(ids)[:, :-1]
    ref = F.cross_entropy(logits.reshape(-1, cfg.vocab_size).float(), ids[:, 1:].reshape(-1))
    ref.backward()
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-6)
    for name, p in model.named_parameters():
        torch.testing.assert_close(grads[name], p.grad, rtol=1e-4, atol=1e-7, msg=name)


def test_under_bf16_autocast_the_loss_follows_the_plain_path():
    cfg = PRESETS["debug"]
    model = build_model(cfg, seed=0)
    ids = torch.randint(0, cfg.vocab_size, (2, 16), generator=torch.Generator().manual_seed(2))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ours = model.loss(ids)
        logits = model(ids)[:, :-1]
    ref = F.cross_entropy(logits.reshape(-1, cfg.vocab_size).float(), ids[:, 1:].reshape(-1))
    assert ours.dtype == torch.float32
    torch.testing.assert_close(ours, ref, rtol=2e-2, atol=2e-2)


def test_the_loss_equals_transformers_labels_loss():
    transformers = pytest.importorskip("transformers")
    cfg = PRESETS["debug"]
    model = build_model(cfg, seed=0)
    hf = transformers.LlamaForCausalLM(transformers.LlamaConfig(**cfg.to_hf_config()))
    hf.load_state_dict(model.state_dict(), strict=True)
    ids = torch.randint(0, cfg.vocab_size, (2, 24), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        torch.testing.assert_close(model.loss(ids), hf(ids, labels=ids).loss, rtol=1e-5, atol=1e-5)


def test_backward_keeps_no_logits():
    """Saved for backward: the hidden states' and the head's gradients (N·C + V·C), never the
    N·V logits; with a vocabulary much larger than the rows that is far less."""
    N, C, V = 64, 16, 4096
    hidden = torch.randn(N, C, requires_grad=True)
    weight = torch.randn(V, C, requires_grad=True)
    targets = torch.randint(0, V, (N,))
    with SavedTensorMeter(torch.nn.Linear(1, 1)) as meter:  # no parameters of ours
        linear_cross_entropy(hidden, weight, targets, 16)
    assert meter.bytes == 4 * (N * C + V * C) < 4 * N * V
    assert chunk_rows(32000) == 524 and chunk_rows(128256) == 130 and chunk_rows(10**7) == 64


def test_a_target_far_below_the_rows_largest_logit_keeps_its_exact_loss():
    # z_target more than 104 below the row's largest logit: p(target) underflows to 0 in float32
    # and −log p would be inf; those rows' losses come from their logits again (logsumexp − z)
    g = torch.Generator().manual_seed(5)
    hidden = torch.randn(6, 8, generator=g)
    weight = torch.randn(40, 8, generator=g)
    targets = torch.randint(0, 40, (6,), generator=g)
    weight[targets[:3]] = -40.0 * hidden[:3].sign() / 8**0.5 * 4  # rows 0-2: far below
    hidden.requires_grad_(), weight.requires_grad_()
    ours = linear_cross_entropy(hidden, weight, targets, 4)
    gh, gw = torch.autograd.grad(ours, (hidden, weight))
    ref = plain(hidden, weight, targets)
    rh, rw = torch.autograd.grad(ref, (hidden, weight))
    logits = (hidden @ weight.t()).detach()
    gap = logits.max(1).values - logits.gather(1, targets[:, None]).squeeze(1)
    assert (gap[:3] > 104).all()  # exp(−104) is below float32's range
    assert torch.isfinite(ours)
    torch.testing.assert_close(ours, ref, rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(gh, rh, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(gw, rw, rtol=1e-5, atol=1e-6)
