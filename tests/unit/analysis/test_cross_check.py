"""fvcore's FlopCountAnalysis (with our SDPA handle) against the closed-form matmul FLOPs."""

import json

import pytest

from llama_lab.analysis import AnalysisError, count_flops
from llama_lab.analysis.cross_check import fvcore_check, sdpa_macs
from llama_lab.config import PRESETS, ModelConfig


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PRESETS))
def test_fvcore_agrees_with_closed_form_at_2048(name):
    # Every preset at T=2048: models beyond 2 layers are traced at 1 and 2 layers and
    # extrapolated (test_scaled_equals_full shows that is exact) to keep this file fast.
    cfg = PRESETS[name]
    if cfg.has_linear_attention:  # fvcore cannot trace Gated DeltaNet: said, by name
        with pytest.raises(AnalysisError, match="cannot follow the Gated DeltaNet blocks"):
            fvcore_check(cfg, 2048, method="scaled")
        return
    if cfg.has_indexer:  # nor DSA's top-k scatter: said, by name
        with pytest.raises(AnalysisError, match="cannot follow DeepSeek Sparse Attention's top-k"):
            fvcore_check(cfg, 2048, method="scaled")
        return
    check = fvcore_check(cfg, 2048, method="scaled")
    assert abs(check.relative_difference) < 0.01
    assert check.difference == 0  # both count the same matmuls exactly
    flops = count_flops(cfg, 2048)
    # (sinks and capped scores run as plain matmuls, as gpt-oss's experts do)
    if not (cfg.attention_sinks or cfg.attn_softcap):
        sdpa = check.fvcore_by_operator["scaled_dot_product_attention"] - check.masked_flops
        assert sdpa == flops.by_component["attention_scores"]
        # (Llama 4's experts, stored (E, in, out), run as x @ W: fvcore's matmul)
        matmuls = check.fvcore_by_operator["linear"] + check.fvcore_by_operator.get("matmul", 0)
        # (BERT's pooler runs outside forward: untraced)
        untraced = flops.by_component.get("pooler", 0)
        assert matmuls == flops.forward - flops.by_component["attention_scores"] - untraced
    assert "aten::scaled_dot_product_attention" not in check.unsupported_ops
    json.dumps(check.to_dict())


@pytest.mark.slow
@pytest.mark.parametrize("name", ["debug", "seed-demo", "transformer-2017", "tinyllama-1.1b"])
def test_scaled_equals_full(name):
    full = fvcore_check(PRESETS[name], 256, batch=2, method="full")
    scaled = fvcore_check(PRESETS[name], 256, batch=2, method="scaled")
    assert full.fvcore_by_operator == scaled.fvcore_by_operator
    assert full.unsupported_ops == scaled.unsupported_ops
    assert full.difference == 0 and full.traced_layers == [PRESETS[name].n_layers]


MIXED = dict(vocab_size=96, d_model=48, n_layers=5, n_heads=4, n_kv_heads=2, ffn_hidden=80)


@pytest.mark.parametrize(
    "fields",
    [
        # blocks of more than one kind: windowed (a window of T: eager counts all T×T) and
        # full, dense and sparse
        dict(
            MIXED,
            sliding_window=32,
            local_layers="1,3",
            n_experts=4,
            experts_per_token=2,
            moe_layers="from:2",
        ),
        # MLA (DeepSeek-V3's shape): dense blocks first, then sigmoid-routed experts
        dict(
            MIXED,
            n_kv_heads=4,
            head_dim=24,
            kv_lora_rank=16,
            q_lora_rank=12,
            qk_rope_head_dim=8,
            v_head_dim=12,
            rope_interleave=True,
            n_experts=4,
            experts_per_token=2,
            expert_ffn_hidden=16,
            n_shared_experts=1,
            moe_layers="from:1",
            moe_scoring="sigmoid",
        ),
    ],
)
def test_scaled_equals_full_when_blocks_differ_and_mla_padding_is_taken_out(fields):
    cfg = ModelConfig(**fields)
    T, B = 32, 2
    full = fvcore_check(cfg, T, batch=B, method="full")
    scaled = fvcore_check(cfg, T, batch=B, method="scaled")
    assert full.fvcore_by_operator == scaled.fvcore_by_operator
    assert full.difference == scaled.difference == 0
    # by hand: MLA pads v (12 wide) to the q/k width 24; QKᵀ is already 24 wide, AV gains 12
    pad = cfg.n_layers * 2 * B * cfg.n_heads * T * T * 12 if cfg.is_mla else 0
    assert full.masked_flops == pad
    assert len(scaled.traced_layers) == 2 + (len(set(zip(cfg.local_layer_flags, cfg.moe_layer_flags))) - 1)


def test_a_window_shorter_than_t_scores_every_pair_and_the_masked_ones_are_taken_out():
    cfg = ModelConfig(**dict(MIXED, sliding_window=8, local_layers="0,2,4", attention_sinks=True))
    T, B = 32, 2
    check = fvcore_check(cfg, T, batch=B, method="full")
    # by hand: three windowed layers, each query scored against T keys instead of its 8
    assert check.masked_flops == 3 * 2 * B * cfg.n_heads * T * (T - 8) * 2 * cfg.head_dim
    assert check.difference == 0


def test_skipped_ops_are_reported():
    check = fvcore_check(PRESETS["transformer-2017"], 64)
    # element-wise work fvcore has no rule for (or its own layer_norm rule) is listed apart
    assert {"aten::add", "aten::embedding"} <= set(check.unsupported_ops)
    assert "layer_norm" in check.fvcore_other_ops and "linear" not in check.unsupported_ops
    llama = fvcore_check(PRESETS["debug"], 64)
    assert {"aten::mul", "aten::silu", "aten::linalg_vector_norm", "aten::rsqrt_"} <= set(
        llama.unsupported_ops
    )


def test_sdpa_handle_ignores_kv_sharing():
    # GQA scores cost what MHA scores cost: every query head attends over all keys
    gqa = fvcore_check(PRESETS["seed-demo"], 128)
    mha = fvcore_check(PRESETS["seed-demo-mha"], 128)
    assert (
        gqa.fvcore_by_operator["scaled_dot_product_attention"]
        == mha.fvcore_by_operator["scaled_dot_product_attention"]
        == 4 * 128**2 * 512 * 4
    )


def test_sdpa_handle_shapes():
    class FakeValue:  # what fvcore.nn.jit_handles.get_shape reads
        def __init__(self, shape):
            import torch

            self._type = torch._C.TensorType.create_from_tensor(torch.empty(shape, device="meta"))

        def type(self):
            return self._type

        def isCompleteTensor(self):
            return True

    q, k, v = FakeValue((2, 8, 16, 64)), FakeValue((2, 2, 32, 64)), FakeValue((2, 2, 32, 64))
    assert sdpa_macs([q, k, v], []) == 2 * 8 * 16 * 32 * (64 + 64)


def test_refuses_unknown_method():
    with pytest.raises(AnalysisError, match="method"):
        fvcore_check(PRESETS["debug"], 8, method="approx")


@pytest.mark.parametrize("n_kv_heads", [4, 1])
def test_attention_scores_counted_by_fvcore_itself(monkeypatch, n_kv_heads):
    """Independent of our SDPA handle: run the plain-matmul reference attention (QKᵀ and AV as
    torch.matmul), which fvcore counts with its own matmul handle, and compare every FLOP."""
    import torch
    from fvcore.nn import FlopCountAnalysis

    from llama_lab import model as model_mod
    from llama_lab.model import attention

    monkeypatch.setattr(
        attention,
        "causal_attention",
        lambda q, k, v, n_rep, window=None, scale=None, chunk_start=None, mask=None: (
            model_mod.reference_attention(q, k, v, n_rep, window, scale=scale, chunk_start=chunk_start)[0]
        ),
    )
    cfg = PRESETS["debug"].replace(n_kv_heads=n_kv_heads)
    net = model_mod.build_model(cfg).eval()
    analysis = FlopCountAnalysis(net, torch.zeros(2, 48, dtype=torch.long))
    analysis.unsupported_ops_warnings(False).uncalled_modules_warnings(False)
    by_op = analysis.by_operator()
    ours = count_flops(cfg, 48, 2)
    # fvcore counts one per multiply-add; we count two
    assert 2 * by_op["matmul"] == ours.by_component["attention_scores"] == 4 * 2 * 48 * 48 * 64 * 2
    assert (
        2 * analysis.total() - 2 * sum(v for k, v in by_op.items() if k not in ("linear", "matmul"))
        == ours.forward
    )


def test_a_size_torch_cannot_build_is_an_analysis_error():
    from llama_lab.config import ModelConfig

    cfg = ModelConfig(
        d_model=131072,
        n_layers=4096,
        n_heads=1024,
        n_kv_heads=8,
        ffn_hidden=1048576,
        vocab_size=4194304,
        max_seq_len=16777216,
    )
    # B·H·T² = 65536 · 1024 · 2⁴⁸ scores: more elements than a tensor may hold, even on meta
    with pytest.raises(AnalysisError, match="fvcore cannot trace B=65536, T=16777216"):
        fvcore_check(cfg, 16777216, 65536, method="scaled")
