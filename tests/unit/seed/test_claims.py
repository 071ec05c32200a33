"""Every seed claim's verdict and figure against a hand derivation written out here, and the
section-七 comparison table."""

import math

import pytest
import torch

from llama_lab.config import PRESETS, ModelConfig, live_config, small_training_config
from llama_lab.model import build_model
from llama_lab.seed import architecture_comparison
from llama_lab.seed import claims as seed_claims_mod

# ---- hand derivations (no llama_lab code) -------------------------------------------------------
V, C, L, H, G, F, D = 32000, 512, 4, 8, 2, 1365, 64  # the seed's demo model
DEMO_BLOCK = (C * C + 2 * C * G * D + C * C) + 3 * C * F + 2 * C  # attention + SwiGLU + 2 norms
DEMO_TOTAL = L * DEMO_BLOCK + C + 2 * V * C  # + final norm + embedding + head
MHA_TOTAL = DEMO_TOTAL + L * 2 * C * (H - G) * D  # K and V back to 8 heads
D7 = 4096  # LLaMA-7B
LLAMA_7B_PUBLISHED = 6_738_415_616  # model card


@pytest.fixture(scope="module")
def by_id():
    return {claim.id: claim for claim in seed_claims_mod.seed_claims()}


def test_hand_derivations_reproduce_the_seeds_printout():
    assert DEMO_TOTAL == 43_780_608 and MHA_TOTAL == 45_353_472
    assert MHA_TOTAL - DEMO_TOTAL == 1_572_864


def test_claim_ids_are_unique_and_every_field_is_filled(by_id):
    listed = seed_claims_mod.seed_claims()
    assert len(by_id) == len(listed) >= 20
    for claim in listed:
        assert claim.quote and claim.claim_en and claim.computed and claim.explanation
        assert claim.section and isinstance(claim.verdict, bool)
        assert set(claim.to_dict()) == {
            "id",
            "quote",
            "claim_en",
            "computed",
            "verdict",
            "explanation",
            "section",
        }


def test_demo_parameter_claims(by_id):
    assert by_id["demo-params"].verdict and f"{DEMO_TOTAL:,}" in by_id["demo-params"].computed
    twin = by_id["demo-mha-twin"]
    assert twin.verdict and f"MHA {MHA_TOTAL:,}" in twin.computed and "saved 1,572,864" in twin.computed
    body = DEMO_TOTAL - 2 * V * C  # 11,012,608
    assert not by_id["demo-body"].verdict and f"{body:,}" in by_id["demo-body"].computed
    embeddings = 2 * V * C  # 32,768,000 ≈ 32.8M
    assert by_id["demo-embeddings"].verdict and f"{embeddings:,}" in by_id["demo-embeddings"].computed
    share_total = (MHA_TOTAL - DEMO_TOTAL) / MHA_TOTAL  # 3.47 %
    share_blocks = (MHA_TOTAL - DEMO_TOTAL) / (MHA_TOTAL - 2 * V * C)  # 12.50 %
    gqa = by_id["gqa-share"]
    assert not gqa.verdict
    assert f"{share_total:.2%}" in gqa.computed and f"{share_blocks:.2%}" in gqa.computed
    assert round(share_blocks, 3) == 0.125


def test_initial_loss_is_run_and_matches_the_random_logit_estimate(by_id):
    claim = by_id["initial-loss"]
    loss = float(claim.computed.split()[1])
    # Final RMSNorm gives unit-RMS hidden states; lm_head weights N(0, 0.02²): logits have
    # variance C·0.02² = 0.2048, and random logits add about half of it to ln V.
    expected = math.log(V) + C * 0.02**2 / 2  # 10.476
    assert abs(loss - expected) < 0.05
    assert claim.verdict and abs(loss - 10.50) <= 0.1 and loss > math.log(V)
    assert f"{math.log(V):.4f}" == "10.3735"


def test_initial_loss_is_deterministic_and_uses_the_seed_demo():
    loss, variance = seed_claims_mod.initial_loss()
    assert (loss, variance) == seed_claims_mod.initial_loss.__wrapped__()
    assert 0.15 < variance < 0.26  # ≈ 0.2048


def test_llama_ffn_width_claims(by_id):
    assert not by_id["llama7b-intermediate"].verdict
    assert "11,008" in by_id["llama7b-intermediate"].computed  # released config.json
    assert not by_id["llama7b-ratio"].verdict and "2.6875" in by_id["llama7b-ratio"].computed
    relu_4d = 2 * D7 * 4 * D7  # two d×4d matrices = 8d²
    assert relu_4d == 8 * D7**2 == 134_217_728
    assert not by_id["ffn-4d-params"].verdict and f"{relu_4d:,}" in by_id["ffn-4d-params"].computed
    swiglu = 3 * D7 * 10923  # round(8/3·4096) = 10923
    assert by_id["swiglu-8-3"].verdict and f"{swiglu:,}" in by_id["swiglu-8-3"].computed
    at_8192, at_11008 = 3 * D7 * 8192, 3 * D7 * 11008  # 100.7M, 135.3M
    claim = by_id["llama-ffn-100m"]
    assert claim.verdict and f"{at_8192:,}" in claim.computed and f"{at_11008:,}" in claim.computed
    at_4d = 3 * D7 * 4 * D7  # 12d²
    assert by_id["swiglu-at-4d"].verdict and f"{at_4d:,}" in by_id["swiglu-at-4d"].computed
    below = by_id["llama-below-2017"]
    assert not below.verdict and f"{(at_11008 / relu_4d - 1):+.2%}" in below.computed


def test_norm_claims(by_id):
    assert by_id["norm-params"].verdict and "LayerNorm 8,192, RMSNorm 4,096" in by_id["norm-params"].computed
    per_layer = 2 * D7  # two norms, one β each
    total = 32 * per_layer + D7  # + the final norm = 266,240
    claim = by_id["rmsnorm-savings"]
    assert not claim.verdict
    assert f"{per_layer:,} per layer, {total:,} in all" in claim.computed
    assert f"{total / LLAMA_7B_PUBLISHED:.4%}" in claim.computed  # 0.0040 %, not 0.02 %


def test_attention_and_kv_claims(by_id):
    assert not by_id["llama2-mqa"].verdict
    assert "llama-2-70b: GQA (64 q / 8 kv)" in by_id["llama2-mqa"].computed
    assert "llama-2-7b: MHA (32 q / 32 kv)" in by_id["llama2-mqa"].computed
    gqa, mha = 2 * 80 * 8 * 128 * 2, 2 * 80 * 64 * 128 * 2  # bytes/token, bf16
    claim = by_id["llama2-70b-kv"]
    assert not claim.verdict and f"{gqa:,}" in claim.computed and f"{mha:,}" in claim.computed
    assert "8× smaller" in claim.computed
    saved_per_token = 2 * L * (H - G) * D * 2  # 6,144 bytes
    claim = by_id["kv-saving-linear"]
    assert claim.verdict
    assert f"{64 * saved_per_token:,} bytes saved at T=64" in claim.computed
    assert f"{128 * saved_per_token:,} at T=128" in claim.computed
    assert by_id["llama2-context"].verdict


def test_bias_and_init_claims(by_id):
    # 2017 recipe at the demo size: q, k, v, o biases 4·512 and FFN 2048 + 512, per block;
    # LayerNorm β: 2 norms × 4 blocks × 512 (no final norm in Post-LN)
    linear = L * (4 * C + 4 * C + C)
    betas = 2 * L * C
    claim = by_id["bias-2017"]
    assert not claim.verdict and f"{linear:,} linear-layer biases + {betas:,}" in claim.computed
    xavier_7b = math.sqrt(2 / (2 * D7))  # 0.015625 < 0.02
    assert by_id["init-vs-xavier"].verdict and f"{xavier_7b:.4f}" in by_id["init-vs-xavier"].computed


def test_xavier_std_formula_matches_torch():
    weight = torch.empty(256, 1024)
    torch.nn.init.xavier_uniform_(weight, generator=torch.Generator().manual_seed(0))
    assert seed_claims_mod.xavier_uniform_std(1024, 256) == pytest.approx(weight.std().item(), rel=0.01)


# ---- the comparison table -----------------------------------------------------------------------
def test_comparison_rows_on_the_demo_match_hand_counts():
    result = architecture_comparison(PRESETS["seed-demo"], 128, 1, "bf16")
    rows = {row.aspect: row for row in result.rows}
    assert len(rows) == 12
    assert rows["norm type"].params_2017 - rows["norm type"].params_llama == (2 * L + 1) * C
    assert rows["norm position"].params_llama - rows["norm position"].params_2017 == C  # final norm
    attention = rows["attention"]
    assert attention.params_2017 == MHA_TOTAL and attention.params_llama == DEMO_TOTAL
    assert (attention.kv_bytes_per_token_2017, attention.kv_bytes_per_token_llama) == (8192, 2048)
    ffn = rows["FFN"]  # same width, one matrix fewer
    assert ffn.params_llama - ffn.params_2017 == L * C * F
    width = rows["FFN width"]  # 2·512·2048 vs 3·512·1365
    assert width.params_2017 - width.params_llama == L * (2 * C * 4 * C - 3 * C * F)
    bias = rows["bias"]  # q,k,v,o + gate,up,down biases
    assert bias.params_2017 - bias.params_llama == L * (C + 2 * G * D + C + 2 * F + C)
    assert rows["structure"].params_2017 is None and rows["LR schedule"].ablation == "recipe"
    assert result.to_frame().shape[0] == 12 and result.to_dict()["rows"][0]["aspect"] == "structure"


def test_comparison_reports_options_impossible_on_the_config():
    cfg = PRESETS["seed-demo"].replace(d_model=72, pos_encoding="sinusoidal", ffn_hidden=192)
    rows = {row.aspect: row for row in architecture_comparison(cfg, 32).rows}
    assert rows["positions"].lab.startswith("not comparable on this config: head_dim=9")
    assert rows["positions"].params_llama is None


def test_small_training_config_keeps_the_recipe_and_the_head_ratio():
    small = small_training_config(PRESETS["transformer-2017"])
    assert (small.d_model, small.n_layers, small.vocab_size) == (64, 4, 256)
    assert (
        small.norm_position,
        small.norm_type,
        small.pos_encoding,
        small.ffn_type,
        small.bias,
        small.init,
    ) == ("post", "layernorm", "sinusoidal", "relu", True, "xavier")
    assert small.ffn_hidden == 4 * 64 and small.n_kv_heads == small.n_heads
    demo = small_training_config(PRESETS["seed-demo"])
    # 8 query / 2 KV heads: the copy keeps 4 queries per KV head with 2 KV heads
    assert (demo.n_heads, demo.n_kv_heads, demo.attention_kind) == (8, 2, "GQA")
    for name in ("llama-2-70b", "llama-3-8b", "qwen3-30b-a3b", "tinyllama-1.1b"):
        cfg, copy = PRESETS[name], small_training_config(PRESETS[name])
        assert copy.n_heads // copy.n_kv_heads == cfg.n_heads // cfg.n_kv_heads, name
        assert copy.attention_kind == "GQA" and copy.head_dim % 2 == 0, name
    # 405B's 16 queries per KV head: 32 heads of 2 fill d = 64 exactly
    big = small_training_config(PRESETS["llama-3.1-405b"])
    assert (big.n_heads, big.n_kv_heads, big.head_dim) == (32, 2, 2)
    # 14 query / 2 KV heads (Qwen2.5-0.5B): 7 per KV head kept, in 14 heads of 4 (56 of d = 64)
    odd = small_training_config(PRESETS["seed-demo"].replace(d_model=896, n_heads=14, n_kv_heads=2))
    assert (odd.n_heads, odd.n_kv_heads, odd.head_dim) == (14, 2, 4)
    # 32 queries per KV head: kept too, in 64 heads of 2 (spanning 128, more than d = 64)
    wide_r = small_training_config(PRESETS["seed-demo"].replace(d_model=2048, n_heads=64, n_kv_heads=2))
    assert (wide_r.n_heads, wide_r.n_kv_heads, wide_r.head_dim) == (64, 2, 2)
    assert demo.ffn_hidden == int(8 * 64 / 3)
    assert small_training_config(PRESETS["llama-2-7b"]).attention_kind == "MHA"
    assert small_training_config(PRESETS["seed-demo"].replace(n_kv_heads=1)).n_kv_heads == 1
    wide = small_training_config(PRESETS["seed-demo"], d_model=128)
    assert (wide.d_model, wide.ffn_hidden) == (128, int(8 * 128 / 3))


# (n_heads, n_kv_heads): MHA (1 query per KV head), GQA with 2, 4, 7 (Qwen2.5-0.5B's 14/2), 8
# (LLaMA-2-70B's 64/8) and 32, MQA with 8 and with Falcon-7B's 71 query heads
HEAD_SHAPES = [(8, 8), (8, 4), (8, 2), (14, 2), (64, 8), (64, 2), (8, 1), (71, 1)]


@pytest.mark.parametrize(("n_heads", "n_kv_heads"), HEAD_SHAPES)
@pytest.mark.parametrize("d_model", [32, 64, 128])
def test_the_live_copy_keeps_the_queries_per_kv_head_exactly(n_heads, n_kv_heads, d_model):
    cfg = PRESETS["seed-demo"].replace(d_model=64 * n_heads, n_heads=n_heads, n_kv_heads=n_kv_heads)
    copy = live_config(cfg, 2, d_model, 16)  # built: the config validates
    assert copy.attention_kind == cfg.attention_kind and copy.d_model == d_model
    if cfg.attention_kind == "MHA":
        assert (copy.n_heads, copy.n_kv_heads) == (4, 4)
    else:  # r queries per KV head over 2 KV heads (GQA) or 1 (MQA)
        assert copy.n_heads // copy.n_kv_heads == n_heads // n_kv_heads
        assert copy.n_heads % copy.n_kv_heads == 0 and copy.n_kv_heads == min(n_kv_heads, 2)
    # heads as wide as d allows, even for RoPE's pairs, at least 2
    assert copy.head_dim % 2 == 0 and copy.head_dim == max(2, d_model // copy.n_heads // 2 * 2)
    if d_model % copy.n_heads == 0 and (d_model // copy.n_heads) % 2 == 0:
        assert copy.head_dim * copy.n_heads == d_model  # the heads fill d exactly
    tokens = torch.randint(0, copy.vocab_size, (2, 16))
    assert build_model(copy)(tokens).shape == (2, 16, copy.vocab_size)


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_presets_small_copies_validate_and_keep_its_head_ratio(name):
    cfg = PRESETS[name]
    for copy in (small_training_config(cfg), live_config(cfg, 2, 128, 256), live_config(cfg, 1, 32, 16)):
        assert ModelConfig.from_dict(copy.to_dict()) == copy  # validates afresh
        assert copy.attention_kind == cfg.attention_kind
        if cfg.attention_kind in ("GQA", "MQA"):
            assert copy.n_heads // copy.n_kv_heads == cfg.n_heads // cfg.n_kv_heads
        # the same RoPE scaling; LongRoPE's factors one per rotated pair, the ends kept
        assert (copy.rope_scaling is None) == (cfg.rope_scaling is None)
        assert copy.rope_scaling_local == cfg.rope_scaling_local
        if cfg.rope_scaling is not None and cfg.rope_scaling.long_factor:
            long, theirs = copy.rope_scaling.long_factor, cfg.rope_scaling.long_factor
            assert len(long) == copy.rope_dim // 2 and (long[0], long[-1]) == (theirs[0], theirs[-1])
