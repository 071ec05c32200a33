"""Fine-tuning counts (``analysis.finetune``): the published PEFT figure, the bytes by part as
the sources give them, the peak's phases, the refusals, and the fit searches."""

import math

import pytest

from llama_lab.analysis.finetune import (
    ALL_LINEAR,
    FinetuneSpec,
    frozen_weight_bytes,
    nf4_bytes,
    optimizer_state_bytes,
    target_modules,
    trainable_params,
)
from llama_lab.analysis.finetune_step import (
    finetune_flops,
    finetune_memory,
    fits,
    max_batch_that_fits,
    max_seq_len_that_fits,
)
from llama_lab.analysis.quant import weights_bytes
from llama_lab.config import PRESETS
from llama_lab.config.hf.quant import StoredQuant
from llama_lab.errors import AnalysisError

LLAMA_3B = PRESETS["llama-3.2-3b"]


def test_peft_published_llama_3_2_3b_rank_32_on_q_v():
    """PEFT's MetaMathQA benchmark: Llama-3.2-3B, LoRA r=32 on q_proj, v_proj: 9,175,040."""
    assert trainable_params(LLAMA_3B, FinetuneSpec(rank=32)) == 9_175_040
    # rsLoRA and QLoRA count the same; DoRA adds one magnitude per output of each target
    assert trainable_params(LLAMA_3B, FinetuneSpec(rank=32, rslora=True)) == 9_175_040
    assert trainable_params(LLAMA_3B, FinetuneSpec("qlora", rank=32)) == 9_175_040
    q_v_outputs = LLAMA_3B.n_layers * (LLAMA_3B.d_model + LLAMA_3B.n_kv_heads * LLAMA_3B.head_dim)
    assert trainable_params(LLAMA_3B, FinetuneSpec("dora", rank=32)) == 9_175_040 + q_v_outputs


def test_full_counts_every_parameter_tied_once():
    from llama_lab.analysis import count_params

    assert trainable_params(LLAMA_3B, FinetuneSpec("full")) == count_params(LLAMA_3B).total


def test_nf4_double_quant_bytes_by_hand():
    """4096 × 4096: n/2 codes, n/64 uint8 absmax, ⌈n/64/256⌉ float32, 16 float32 code, offset."""
    n = 4096 * 4096
    assert nf4_bytes(n) == n // 2 + n // 64 + 4 * math.ceil(n / 64 / 256) + 64 + 4


def test_qlora_base_is_nf4_blocks_and_16_bit_rest():
    spec = FinetuneSpec("qlora")
    linear = sum(m.params for m in target_modules(LLAMA_3B, ALL_LINEAR))
    rest = weights_bytes(LLAMA_3B, "bf16").total - 2 * linear
    got = frozen_weight_bytes(LLAMA_3B, spec)
    assert rest < got < rest + 0.53 * linear  # 4 bits + ~0.127 bit of statistics a weight


def test_8bit_adamw_states_per_tensor():
    big, small = 8 * 4096, 1000
    assert optimizer_state_bytes([(big, 1)], "adamw") == 8 * big
    assert optimizer_state_bytes([(big, 1)], "adamw8bit") == 2 * (big + 4 * big // 256)
    assert optimizer_state_bytes([(small, 3)], "paged_adamw8bit") == 3 * 8 * small  # < 4096: fp32


def test_lora_peak_is_in_backward_full_may_be_at_the_step():
    # the N·V logits saved: the peak as backward starts; chunked: in the last block's FFN
    lora = finetune_memory(LLAMA_3B, FinetuneSpec(), 512, 1)
    assert lora.peak_bytes == lora.phases["backward_start"] == sum(lora.by_part.values())
    chunked = finetune_memory(LLAMA_3B, FinetuneSpec(loss="chunked"), 512, 1)
    assert chunked.peak_bytes == chunked.phases["backward_peak"] == sum(chunked.by_part.values())
    assert chunked.by_part["logits_and_loss"] == 0 < chunked.by_part["backward_temporaries"]
    assert lora.by_part["trainable_weights"] == 4 * lora.trainable_params  # PEFT's float32 adapters
    full = finetune_memory(LLAMA_3B, FinetuneSpec("full"), 8, 1)
    assert full.phases["optimizer_step"] > full.phases["backward_start"]
    assert full.by_part["activations"] == 0 and full.peak_bytes == full.phases["optimizer_step"]


def test_checkpointing_and_8bit_states_lower_the_peak():
    base = finetune_memory(LLAMA_3B, FinetuneSpec(), 4096, 2).peak_bytes
    assert finetune_memory(LLAMA_3B, FinetuneSpec(grad_checkpointing=True), 4096, 2).peak_bytes < base
    assert finetune_memory(LLAMA_3B, FinetuneSpec("qlora"), 4096, 2).peak_bytes < base
    full = finetune_memory(LLAMA_3B, FinetuneSpec("full"), 64, 1).peak_bytes
    assert finetune_memory(LLAMA_3B, FinetuneSpec("full", optimizer="adamw8bit"), 64, 1).peak_bytes < full


def test_the_fit_searches_agree_with_fits():
    spec = FinetuneSpec()
    T = max_seq_len_that_fits(LLAMA_3B, spec, "A100 80GB", batch=1)
    assert T is not None and T < LLAMA_3B.max_seq_len
    assert fits(finetune_memory(LLAMA_3B, spec, T, 1), "A100 80GB")
    assert not fits(finetune_memory(LLAMA_3B, spec, T + 1, 1), "A100 80GB")
    B = max_batch_that_fits(LLAMA_3B, spec, "A100 80GB", seq_len=1024)
    assert B is not None and fits(finetune_memory(LLAMA_3B, spec, 1024, B), "A100 80GB")
    assert not fits(finetune_memory(LLAMA_3B, spec, 1024, B + 1), "A100 80GB")
    assert max_seq_len_that_fits(PRESETS["llama-3.1-405b"], FinetuneSpec("full"), "RTX 4090") is None


def test_adapter_flops_skip_frozen_weight_gradients():
    lora = finetune_flops(LLAMA_3B, FinetuneSpec(), 512, 1)
    full = finetune_flops(LLAMA_3B, FinetuneSpec("full"), 512, 1)
    assert lora.scores == full.scores  # attention's backward has no weights to skip
    assert 2 / 3 < lora.matmuls / full.matmuls < 0.68  # forward + input gradients + small adapters
    qlora = finetune_flops(LLAMA_3B, FinetuneSpec("qlora"), 512, 1)
    assert qlora.dequant_bytes > 0 and lora.dequant_bytes == 0


@pytest.mark.parametrize(
    "spec, match",
    [
        (dict(method="prefix"), "method='prefix' must be one of"),
        (dict(optimizer="sgd"), "optimizer='sgd' must be one of"),
        (dict(rank=0), "rank=0 must be between 1"),
        (dict(targets="everything"), "must be 'all-linear'"),
    ],
)
def test_bad_specs_are_refused_naming_the_rule(spec, match):
    with pytest.raises(AnalysisError, match=match):
        FinetuneSpec(**spec)


def test_refusals_that_need_the_model():
    with pytest.raises(AnalysisError, match="rank=4096 is above the narrowest targeted layer's width"):
        finetune_memory(LLAMA_3B, FinetuneSpec(rank=4096), 64, 1)
    with pytest.raises(AnalysisError, match="'w1' is not a linear layer of this model; it has: down_proj"):
        trainable_params(LLAMA_3B, FinetuneSpec(targets=("w1",)))
    with pytest.raises(AnalysisError, match="above the model's max_seq_len"):
        finetune_memory(LLAMA_3B, FinetuneSpec(), LLAMA_3B.max_seq_len + 1, 1)
    stored = StoredQuant("bitsandbytes", 4, 64, False, "bf16", (), quant_type="nf4", double_quant=True)
    with pytest.raises(AnalysisError, match="already stored as bitsandbytes nf4"):
        finetune_memory(LLAMA_3B, FinetuneSpec("qlora"), 64, 1, stored)
    over_stored = finetune_memory(LLAMA_3B, FinetuneSpec("lora"), 64, 1, stored)
    assert (
        over_stored.by_part["frozen_weights"]
        < finetune_memory(LLAMA_3B, FinetuneSpec(), 64, 1).by_part["frozen_weights"]
    )


def test_a_run_measured_out_of_memory_is_predicted_not_to_fit_and_one_that_ran_to_fit():
    """meta-pytorch/torchtune#856 (2024-04-24): Llama 3 8B, torchtune's default single-device
    LoRA recipe (rank 8 on q_proj, v_proj; bf16 throughout; activation checkpointing), one RTX
    4090: "Testing on a single RTX 4090 with 8k context length" ran out of memory, "Tested w 2k
    and worked fine". torchtune's model upcasts its logits to float32 for the loss."""
    from llama_lab.validation.predict import find_gpu, predict_finetune

    spec = FinetuneSpec(
        "lora", 8, 16, ("q_proj", "v_proj"), grad_checkpointing=True, loss="upcast", pure_16bit=True
    )
    gpu, cfg = find_gpu("rtx 4090"), PRESETS["llama-3-8b"]
    assert predict_finetune(cfg, gpu, spec, 2048, 1)["fits"]
    assert not predict_finetune(cfg, gpu, spec, 8192, 1)["fits"]
