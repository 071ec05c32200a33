"""LoRA / DoRA adapters (model.lora) against PEFT on transformers' module, merging, saving, and
the NF4 quantiser (model.quant) against bitsandbytes."""

import math

import pytest
import torch

from llama_lab.config import PRESETS
from llama_lab.model import build_model
from llama_lab.model.lora import (
    adapted_layers,
    adapter_state_dict,
    attach_adapters,
    load_adapter,
    merge_adapters,
    quantize_base_nf4,
    save_adapter,
    trainable_parameters,
)
from llama_lab.model.quant import (
    NF4_ABSMAX_BLOCK,
    NF4_BLOCK,
    NF4_CODE,
    dequantize_nf4,
    nf4_absmax,
    nf4_bytes,
    quantize_nf4,
)

TARGETS = [("q_proj", "v_proj"), ("k_proj", "o_proj", "down_proj"), "all-linear"]


def tokens(cfg, B=2, T=12):
    return torch.randint(0, cfg.vocab_size, (B, T), generator=torch.Generator().manual_seed(0))


def _randomise_b(model):
    """B = 0 at the start makes every adapter a no-op: give them values so the tests see them."""
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for wrapped in adapted_layers(model).values():
            for adapter in wrapped.lora().values():
                adapter.lora_B.weight.copy_(0.05 * torch.randn(adapter.lora_B.weight.shape, generator=gen))


def _peft_pair(dora: bool, targets, rank=4, alpha=8.0, rslora=False):
    """Ours and transformers + PEFT with the same base and adapter weights."""
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    cfg = PRESETS["debug"].replace(norm_eps=1e-5)
    ours = build_model(cfg, seed=1).eval()
    hf = transformers.LlamaForCausalLM(transformers.LlamaConfig(**cfg.to_hf_config())).eval()
    hf.load_state_dict(ours.state_dict(), strict=True)
    config = peft.LoraConfig(
        r=rank,
        lora_alpha=alpha,
        target_modules=targets if isinstance(targets, str) else list(targets),
        use_dora=dora,
        use_rslora=rslora,
        lora_dropout=0.0,
    )
    theirs = peft.get_peft_model(hf, config)
    attach_adapters(ours, rank, alpha, targets, dora=dora, rslora=rslora)
    _randomise_b(ours)
    state = adapter_state_dict(ours)
    peft.set_peft_model_state_dict(theirs, {k: v.detach().clone() for k, v in state.items()})
    return ours, theirs, cfg


@pytest.mark.parametrize("targets", TARGETS, ids=["qv", "k-o-down", "all-linear"])
@pytest.mark.parametrize("dora", [False, True], ids=["lora", "dora"])
def test_counts_and_logits_equal_peft(dora, targets):
    ours, theirs, cfg = _peft_pair(dora, targets)
    trainable, _total = theirs.get_nb_trainable_parameters()
    assert trainable_parameters(ours) == trainable
    # PEFT's own state dict has our keys (and no others): the adapter file loads either way
    from peft import get_peft_model_state_dict

    assert set(get_peft_model_state_dict(theirs)) == set(adapter_state_dict(ours))
    x = tokens(cfg)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), theirs(x).logits, rtol=1e-4, atol=1e-5)


def test_rslora_scaling_equals_peft():
    ours, theirs, cfg = _peft_pair(False, ("q_proj", "v_proj"), rank=16, alpha=4.0, rslora=True)
    x = tokens(cfg)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), theirs(x).logits, rtol=1e-4, atol=1e-5)


def test_counts_are_r_times_in_plus_out_per_part():
    cfg = PRESETS["debug"]
    model = build_model(cfg)
    attach_adapters(model, 8, 16, ("q_proj", "v_proj"))
    C, kv = cfg.d_model, cfg.n_kv_heads * cfg.head_dim
    assert trainable_parameters(model) == cfg.n_layers * 8 * ((C + C) + (C + kv))


@pytest.mark.parametrize("method", ["lora", "dora", "qlora"])
def test_merged_logits_equal_base_plus_adapter(method, tmp_path):
    cfg = PRESETS["debug"]
    model = build_model(cfg, seed=1).eval()
    if method == "qlora":
        quantize_base_nf4(model)
    attach_adapters(model, 4, 8, "all-linear", dora=method == "dora")
    _randomise_b(model)
    x = tokens(cfg)
    with torch.no_grad():
        adapted = model(x)
    save_adapter(model, tmp_path / "adapter.safetensors")
    # a fresh copy with the saved adapter loaded gives the same logits
    again = build_model(cfg, seed=1).eval()
    if method == "qlora":
        quantize_base_nf4(again)
    attach_adapters(again, 4, 8, "all-linear", dora=method == "dora")
    load_adapter(again, tmp_path / "adapter.safetensors")
    merge_adapters(model)
    assert not adapted_layers(model)
    with torch.no_grad():
        torch.testing.assert_close(again(x), adapted, rtol=0, atol=0)
        torch.testing.assert_close(model(x), adapted, rtol=1e-4, atol=1e-5)
    if method != "qlora":  # the merged model is the plain model again: its checkpoint keys too
        assert set(model.state_dict()) == set(build_model(cfg).state_dict())


def test_refusals():
    cfg = PRESETS["debug"]
    with pytest.raises(ValueError, match="rank=0"):
        attach_adapters(build_model(cfg), 0, 8)
    with pytest.raises(ValueError, match="'c_attn'"):
        attach_adapters(build_model(cfg), 4, 8, ("q_proj", "c_attn"))
    with pytest.raises(ValueError, match="above the width"):
        attach_adapters(build_model(cfg), cfg.d_model + 1, 8)


def test_frozen_base_gets_no_gradient():
    cfg = PRESETS["debug"]
    model = build_model(cfg)
    attach_adapters(model, 4, 8, ("q_proj", "v_proj"), dora=True)
    model.loss(tokens(cfg)).backward()
    grads = {n for n, p in model.named_parameters() if p.grad is not None}
    assert grads == {n for n, p in model.named_parameters() if p.requires_grad}
    assert all(".adapters." in n for n in grads)


# ---- NF4 --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "shape", [(64, 256), (96, 200), (3, 50)], ids=["whole", "rows-span-blocks", "short-last"]
)
def test_nf4_equals_bitsandbytes(shape):
    F = pytest.importorskip("bitsandbytes.functional")
    w = 0.05 * torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    packed, state = F.quantize_4bit(w, blocksize=NF4_BLOCK, compress_statistics=True, quant_type="nf4")
    ours = quantize_nf4(w)
    assert torch.equal(state.code, torch.tensor(NF4_CODE))
    flat = packed.reshape(-1)  # bitsandbytes: the first index of a pair in the high nibble
    theirs = torch.stack((flat >> 4, flat & 15), -1).reshape(-1)[: w.numel()]
    mine = torch.stack((ours.codes & 15, ours.codes >> 4), -1).reshape(-1)[: w.numel()]
    assert torch.equal(theirs, mine)
    assert torch.equal(state.absmax, ours.absmax_codes)
    assert torch.equal(F.dequantize_4bit(packed, state), dequantize_nf4(ours))


@pytest.mark.parametrize("shape", [(256, 512), (33, 70)])
def test_nf4_round_trip_and_bytes(shape):
    w = 0.02 * torch.randn(*shape, generator=torch.Generator().manual_seed(1))
    q = quantize_nf4(w)
    n = w.numel()
    blocks = math.ceil(n / NF4_BLOCK)
    # ½ byte per value, a uint8 absmax per block of 64, a float32 per 256 absmaxes, the offset
    assert (
        q.nbytes == nf4_bytes(n) == math.ceil(n / 2) + blocks + 4 * math.ceil(blocks / NF4_ABSMAX_BLOCK) + 4
    )
    error = (dequantize_nf4(q) - w).abs().reshape(-1)
    # |w − c·a'| ≤ a·(widest NF4 gap)/2 + |a − a'|: the rounding to the nearest of the 16 values
    # (the widest gap: −1 to −0.6962) and the 8-bit absmax a' in place of a
    gap = max(b - a for a, b in zip(NF4_CODE, NF4_CODE[1:]))
    absmax = (
        torch.nn.functional.pad(w.reshape(-1), (0, blocks * NF4_BLOCK - n)).reshape(blocks, -1).abs().amax(-1)
    )
    absmax_error = (nf4_absmax(q) - absmax).abs()
    assert (absmax_error <= 0.02 * absmax).all()
    per_value = (absmax * gap / 2 + absmax_error).repeat_interleave(NF4_BLOCK)[:n]
    assert (error <= per_value * (1 + 1e-5)).all()
    assert error.mean() < 0.1 * w.abs().mean()
