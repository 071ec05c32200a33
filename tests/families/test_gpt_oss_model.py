"""The live gpt-oss module against transformers' GptOssForCausalLM on tiny configs: attention
sinks (plain matmuls) on alternating window/full layers, the router with its bias, experts with
biases and the clamped SwiGLU in the checkpoint's interleaved layout. The config side (reading
and writing config.json, MXFP4): tests/families/test_gpt_oss_config.py; the families' shared checks:
tests/families/test_families.py."""

import warnings

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from llama_lab import analysis
from llama_lab.analysis import quant
from llama_lab.config import PRESETS, ModelConfig
from llama_lab.config.hf.quant import StoredQuant
from llama_lab.model import build_model
from llama_lab.model.attention import matmul_attention, reference_attention

transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore", module="transformers")

TINY = dict(
    vocab_size=128,
    hidden_size=64,
    intermediate_size=48,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    num_local_experts=4,
    num_experts_per_tok=2,
    sliding_window=8,
    max_position_embeddings=64,
    rope_parameters={"rope_type": "default", "rope_theta": 150000.0},
)


def ours_of(limit: float = 7.0, alpha: float = 1.702, window: int = 8) -> ModelConfig:
    return ModelConfig(
        vocab_size=128,
        d_model=64,
        n_layers=3,
        n_heads=4,
        n_kv_heads=2,
        head_dim=16,
        ffn_hidden=48,
        max_seq_len=64,
        qkv_bias=True,
        o_bias=True,
        mlp_bias=True,
        sliding_window=window,
        local_layers="0,2",  # transformers' default layer_types: sliding on even layers
        n_experts=4,
        experts_per_token=2,
        moe_style="gpt_oss",
        attention_sinks=True,
        swiglu_limit=limit,
        swiglu_alpha=alpha,
        rope_theta=150000.0,
        norm_eps=1e-5,
    )


def hf_model(device=None, **extra):
    config = transformers.AutoConfig.for_model("gpt_oss", **{**TINY, **extra})
    if device == "meta":
        with torch.device("meta"):
            return transformers.AutoModelForCausalLM.from_config(config)
    return transformers.AutoModelForCausalLM.from_config(
        config, attn_implementation="eager", experts_implementation="eager"
    ).eval()


@pytest.mark.parametrize("limit", [7.0, 0.3])  # 0.3: the clamps bite on most entries
def test_logits_and_cached_decoding_equal_transformers(limit):
    torch.manual_seed(0)
    hf = hf_model(swiglu_limit=limit)
    with torch.no_grad():
        for p in hf.parameters():
            p.normal_(0, 0.3)  # sinks, biases and router away from their init
    ours = build_model(ours_of(limit)).eval()
    ours.load_state_dict(hf.state_dict(), strict=True)
    ids = torch.randint(0, 128, (2, 24))
    with torch.no_grad():
        expected, logits = hf(ids).logits, ours(ids)
        cache = ours.new_cache(2, 24)
        steps = [ours(ids[:, :10], cache)] + [ours(ids[:, t : t + 1], cache) for t in range(10, 24)]
    torch.testing.assert_close(logits, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.cat(steps, dim=1), logits, rtol=1e-5, atol=1e-5)
    assert cache.nbytes() == analysis.kv_cache_bytes(ours.cfg, 24, 2, "fp32")


def test_parameters_equal_transformers_meta_module():
    hf, cfg = hf_model("meta"), ours_of()
    ours = build_model(cfg, device="meta")
    shapes = {k: v.shape for k, v in ours.state_dict().items()}
    assert {k: v.shape for k, v in hf.state_dict().items()} == shapes
    n = sum(p.numel() for p in hf.parameters())
    counts = analysis.count_params(cfg)
    assert counts.total == analysis.count_params_module(cfg).total == n
    # by hand: per layer H sinks, the router C·E + E, each expert 3·C·F + 2F + C
    C, F, E, k, H = 64, 48, 4, 2, 4
    expert = 3 * C * F + 2 * F + C
    assert counts.detail["attention_sinks"] == 3 * H
    assert (counts.detail["router"], counts.detail["router_bias"]) == (3 * C * E, 3 * E)
    experts = (counts.detail["experts"], counts.detail["expert_bias"])
    assert experts == (3 * E * 3 * C * F, 3 * E * (2 * F + C))
    assert counts.active == counts.total - 3 * (E - k) * expert


def test_forward_flops_equal_flop_counter_on_transformers_eager():
    # eager attention scores every T×T pair (the window masks after): compare at T = W
    hf, cfg = hf_model(), ours_of()
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        hf(torch.randint(0, 128, (2, 8)))
    assert counter.get_total_flops() == analysis.count_flops(cfg, 8, 2).forward
    # and our own module, whose sinks run as plain matmuls FlopCounterMode sees too
    ours = build_model(cfg).eval()
    with torch.no_grad(), FlopCounterMode(display=False) as mine:
        ours(torch.randint(0, 128, (2, 8)))
    assert mine.get_total_flops() == counter.get_total_flops()


def test_a_sink_at_minus_infinity_is_plain_attention_and_a_high_one_silences_the_head():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 4, 6, 8), torch.randn(2, 2, 6, 8), torch.randn(2, 2, 6, 8)
    plain, _ = reference_attention(q, k, v, n_rep=2, window=3)
    off = matmul_attention(q, k, v, 2, 3, sinks=torch.full((4,), float("-inf")))
    torch.testing.assert_close(off, plain)
    # a sink of logit s: the weights are the plain ones × Σe^score / (Σe^score + e^s)
    sinks = torch.tensor([0.0, 1.0, -2.0, 30.0])
    scores = (q @ k.repeat_interleave(2, 1).transpose(-2, -1)) / 8**0.5
    mask = torch.ones(6, 6, dtype=torch.bool).tril() & ~torch.ones(6, 6, dtype=torch.bool).tril(-3)
    mass = scores.masked_fill(~mask, float("-inf")).exp().sum(-1, keepdim=True)
    expected = plain * mass / (mass + sinks.exp().view(1, 4, 1, 1))
    torch.testing.assert_close(matmul_attention(q, k, v, 2, 3, sinks=sinks), expected)
    torch.testing.assert_close(reference_attention(q, k, v, 2, 3, sinks)[0], expected)
    assert matmul_attention(q, k, v, 2, sinks=sinks)[:, 3].abs().max() < 1e-6  # e^30 swamps it


@pytest.mark.parametrize(
    "name, table",
    [
        # the gpt-oss model card (arXiv 2508.10925), Table 1: MLP, attention, embed + unembed,
        # active (the unembedding counted, the embedding not), total, checkpoint size (GiB)
        ("gpt-oss-20b", (19.12e9, 0.64e9, 1.16e9, 3.61e9, 20.91e9, 12.8)),
        ("gpt-oss-120b", (114.71e9, 0.96e9, 1.16e9, 5.13e9, 116.83e9, 60.8)),
    ],
)
def test_the_published_table_of_both_sizes(name, table):
    """The presets (their published config.json files) against the model card."""
    mlp, attention, embed_unembed, active, total, gib = table
    cfg = PRESETS[name]
    counts = analysis.count_params(cfg)
    parts = counts.by_component
    assert round(parts["ffn"] / 1e9, 2) == mlp / 1e9
    assert round(parts["attention"] / 1e9, 2) == attention / 1e9
    assert round((parts["embedding"] + parts["lm_head"]) / 1e9, 2) == embed_unembed / 1e9
    assert round((counts.active - parts["embedding"]) / 1e9, 2) == active / 1e9
    assert round(counts.total / 1e9, 2) == total / 1e9
    # MXFP4 experts (4.25 bits a weight), everything else in bf16: the checkpoint's size
    stored = quant.stored_weights(StoredQuant("mxfp4", 4, 32, False, "bf16", ()))
    assert round(quant.weights_bytes(cfg, stored).total / 2**30, 1) == gib


def test_mxfp4_bytes_by_hand():
    cfg = ours_of()
    stored = quant.stored_weights(StoredQuant("mxfp4", 4, 32, False, "bf16", ()))
    got = quant.weights_bytes(cfg, stored)
    C, F, E, L = 64, 48, 4, 3
    # each expert's gate_up (2F × C) and down (C × F): half a byte a value, a byte per 32
    # inputs of a row (48 inputs: two scales, the second for a partial block)
    experts = L * E * (2 * F * (C // 2 + 2) + C * (F // 2 + 2))
    rest = 2 * (analysis.count_params(cfg).total - L * E * 3 * C * F)  # bf16, biases included
    assert got.total == experts + rest
