"""finetune_activation_bytes against the tensors our model saves for backward (saved-tensor
hooks), the base frozen: LoRA, QLoRA (NF4 base), DoRA, full, Pre-LN and Post-LN recipes."""

import pytest
import torch

from llama_lab.analysis import finetune_activation_bytes
from llama_lab.config import PRESETS, live_config
from llama_lab.model import build_model
from llama_lab.model.lora import attach_adapters, quantize_base_nf4
from llama_lab.train.measure import SavedTensorMeter

TARGETS = [("q_proj", "v_proj"), ("o_proj",), ("down_proj",), ("k_proj", "up_proj"), "all-linear"]


@pytest.mark.parametrize("targets", TARGETS, ids=["qv", "o", "down", "k-up", "all-linear"])
@pytest.mark.parametrize("method", ["lora", "qlora", "dora"])
@pytest.mark.parametrize("preset", ["seed-demo", "transformer-2017", "llama-3-8b"])
def test_saved_tensors_equal_the_count(preset, method, targets):
    cfg = live_config(PRESETS[preset], 2, 64, 32)
    model = build_model(cfg, seed=0)
    if method == "qlora":
        quantize_base_nf4(model)
    attach_adapters(model, 4, 8, targets, dora=method == "dora")
    x = torch.randint(0, cfg.vocab_size, (2, 33), generator=torch.Generator().manual_seed(0))
    with SavedTensorMeter(model) as meter:
        model.loss(x)
    predicted = finetune_activation_bytes(cfg, 32, 2, "fp32", method=method, rank=4, targets=targets)
    assert meter.bytes == predicted


def test_frozen_linear_keeps_no_input():
    """PyTorch's behaviour the count rests on: F.linear with a frozen weight saves the weight
    (for the input's gradient), not the input."""
    x = torch.randn(8, 16, requires_grad=True)
    w = torch.randn(4, 16)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        torch.nn.functional.linear(x, w)
    assert [t.untyped_storage().data_ptr() for t in saved] == [w.untyped_storage().data_ptr()]  # wᵀ, a view


def test_lora_keeps_less_than_full_and_dora_more_than_lora():
    cfg = live_config(PRESETS["seed-demo"], 4, 128, 64)
    lora, dora, full = (
        finetune_activation_bytes(cfg, 64, 4, method=m, rank=8, targets="all-linear")
        for m in ("lora", "dora", "full")
    )
    assert lora < full and dora > lora
