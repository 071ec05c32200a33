"""The live MLA + DeepSeekMoE module against transformers' DeepseekV3/V2ForCausalLM on tiny
random configs (fp32): state dicts load strictly both ways; logits, the latent cache's contents
and bytes, cached decoding (a prefill, a chunk into a non-empty cache, one-token steps), greedy
tokens and gradients equal theirs; the absorbed form equals the expanded one; interleaved RoPE
is V2's complex product up to one permutation; the routers choose transformers' experts with
transformers' weights. The config side: tests/families/test_deepseek.py; the families' shared checks:
tests/families/test_families.py."""

import warnings

import pytest
import torch

from llama_lab.config import PRESETS, ModelConfig
from llama_lab.model import KVCache, apply_rope_interleaved, build_model, rope_cos_sin, rope_inv_freq

transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore", module="transformers")
# the classes' modules imported here, at collection (about 2 s), not inside the first test
from transformers.models.deepseek_v2 import modeling_deepseek_v2  # noqa: E402
from transformers.models.deepseek_v3 import modeling_deepseek_v3  # noqa: E402, F401

VOCAB = 256
TINY = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    intermediate_size=96,
    moe_intermediate_size=32,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=4,
    max_position_embeddings=64,
    kv_lora_rank=32,
    q_lora_rank=16,
    qk_rope_head_dim=8,
    qk_nope_head_dim=16,
    v_head_dim=12,  # a value head narrower than a q/k head (24)
    n_routed_experts=8,
    num_experts_per_tok=2,
    n_group=4,
    topk_group=2,
    first_k_dense_replace=1,
    n_shared_experts=1,
)
CASES = {
    # q LoRA, groups ranked by their two best biased sigmoid scores, renormalised, × 2.5
    "v3": dict(model_type="deepseek_v3", routed_scaling_factor=2.5),
    # plain q_proj, one group, no renormalisation, rotate-half RoPE, every block sparse
    "v3-plain": dict(
        model_type="deepseek_v3",
        q_lora_rank=None,
        n_group=1,
        topk_group=1,
        norm_topk_prob=False,
        rope_interleave=False,
        first_k_dense_replace=0,
    ),
    # softmax, group-limited greedy (a group ranked by its best score), two dense blocks
    "v2": dict(model_type="deepseek_v2", topk_method="group_limited_greedy", first_k_dense_replace=2),
    # V2-Lite's shape: plain q_proj, greedy top-k, two shared experts, a routed scale
    "v2-greedy": dict(
        model_type="deepseek_v2",
        q_lora_rank=None,
        topk_method="greedy",
        n_shared_experts=2,
        routed_scaling_factor=1.5,
    ),
}


def config_of(case: str) -> ModelConfig:
    return ModelConfig.from_hf_config({**TINY, **CASES[case]})


def hf_model(cfg: ModelConfig):
    config = transformers.AutoConfig.for_model(**cfg.to_hf_config())
    return transformers.AutoModelForCausalLM.from_config(
        config, attn_implementation="eager", experts_implementation="eager"
    ).eval()


def randomise(model: torch.nn.Module, seed: int = 1) -> None:
    """Every weight away from its init: gains 1 + N(0, 0.1), matrices N(0, 0.1), the routing
    bias N(0, 0.1) (large enough to change some choices)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p in model.named_parameters():
            noise = 0.1 * torch.randn(p.shape, generator=g)
            p.copy_(1 + noise if p.ndim == 1 else noise)
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.copy_(0.1 * torch.randn(b.shape, generator=g))


_PAIRS: dict[str, tuple] = {}


def pair(case: str):
    """(cfg, transformers' model randomised, ours loaded from it), built once per case."""
    if case not in _PAIRS:
        cfg = config_of(case)
        hf = hf_model(cfg)
        randomise(hf)
        ours = build_model(cfg).eval()
        ours.load_state_dict(hf.state_dict(), strict=True)
        _PAIRS[case] = cfg, hf, ours
    return _PAIRS[case]


def tokens(B: int, T: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, VOCAB, (B, T), generator=torch.Generator().manual_seed(seed))


def hf_cache_bytes(cache) -> int:
    """Bytes of the tensors transformers' DynamicCache holds: every layer's keys and values."""
    return sum(layer.keys.nbytes + layer.values.nbytes for layer in cache.layers)


@pytest.mark.parametrize("case", sorted(CASES))
def test_state_dicts_load_strictly_both_ways(case):
    cfg, hf, ours = pair(case)
    mine = build_model(cfg, seed=7).eval()  # our own init, loaded into a fresh transformers model
    theirs = hf_model(cfg)
    theirs.load_state_dict(mine.state_dict(), strict=True)
    ids = tokens(2, 10)
    with torch.no_grad():
        torch.testing.assert_close(theirs(ids).logits, mine(ids), rtol=1e-5, atol=1e-5)
    # the routing bias is a float32 buffer on the router in both, never a parameter
    bias = [n for n, _ in ours.named_buffers() if n.endswith("e_score_correction_bias")]
    assert bias == [n for n, _ in hf.named_buffers() if n.endswith("e_score_correction_bias")]
    assert (len(bias) > 0) == (cfg.moe_scoring == "sigmoid")
    assert not any(n.endswith("e_score_correction_bias") for n, _ in ours.named_parameters())
    assert all(ours.get_buffer(n).dtype == torch.float32 for n in bias)
    assert all(torch.count_nonzero(mine.get_buffer(n)) == 0 for n in bias)  # initialised to 0


@pytest.mark.parametrize("case", sorted(CASES))
def test_logits_equal_transformers(case):
    _, hf, ours = pair(case)
    ids = tokens(2, 16)
    with torch.no_grad():
        torch.testing.assert_close(ours(ids), hf(ids).logits, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_cache_holds_transformers_latent_and_rope_key(case):
    """After the same tokens our two buffers per layer hold what transformers' cache holds (the
    normalised latent c and the rotated RoPE key), in as many bytes. Under DeepSeek-V2 our key
    is its complex product's pairs laid out evens, then odds (transformers' V3 layout)."""
    cfg, hf, ours = pair(case)
    ids = tokens(2, 7)
    theirs = transformers.DynamicCache(config=hf.config)
    cache = ours.new_cache(2, 20)
    with torch.no_grad():
        hf(ids, cache=theirs, use_cache=True)
        ours(ids, cache)
    evens_then_odds = torch.cat((torch.arange(0, 8, 2), torch.arange(1, 8, 2)))
    v2 = hf.config.model_type == "deepseek_v2"
    for i, layer in enumerate(theirs.layers):
        latent, rope_key = getattr(cache, f"k{i}"), getattr(cache, f"v{i}")
        assert latent.shape == (2, 1, 20, cfg.kv_lora_rank)
        assert rope_key.shape == (2, 1, 20, cfg.qk_rope_head_dim)
        expected_key = layer.values[..., evens_then_odds] if v2 else layer.values
        torch.testing.assert_close(latent[:, :, :7], layer.keys, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(rope_key[:, :, :7], expected_key, rtol=1e-5, atol=1e-5)
    assert cache.nbytes() == hf_cache_bytes(theirs) == 2 * 7 * 3 * (32 + 8) * 4
    assert cache.allocated_bytes() == 2 * 20 * 3 * (32 + 8) * 4


@pytest.mark.parametrize("case", sorted(CASES))
def test_cached_decoding_equals_the_uncached_forward_and_transformers_cache(case):
    """A prefill of 5, a chunk of 4 into the non-empty cache (a speculative verify), then one
    token at a time: the absorbed form over the latent gives the expanded forward's logits, and
    transformers' own cached logits; the cache's bytes track transformers' after each call."""
    _, hf, ours = pair(case)
    ids = tokens(2, 14, seed=3)
    chunks = [(0, 5), (5, 9)] + [(t, t + 1) for t in range(9, 14)]
    cache, theirs = ours.new_cache(2, 14), transformers.DynamicCache(config=hf.config)
    ours_steps, hf_steps = [], []
    with torch.no_grad():
        full = ours(ids)
        for a, b in chunks:
            ours_steps.append(ours(ids[:, a:b], cache))
            hf_steps.append(hf(ids[:, a:b], cache=theirs, use_cache=True).logits)
            assert cache.length == b and cache.nbytes() == hf_cache_bytes(theirs)
    stepped = torch.cat(ours_steps, dim=1)
    torch.testing.assert_close(stepped, full, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(stepped, torch.cat(hf_steps, dim=1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", sorted(CASES))
def test_greedy_tokens_equal_transformers_generate(case):
    _, hf, ours = pair(case)
    ids = tokens(2, 6, seed=5)
    with torch.no_grad():
        expected = hf.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=10,
            do_sample=False,
            eos_token_id=None,  # never stop early
            pad_token_id=0,
        )
        assert torch.equal(ours.generate(ids, 10), expected)


@pytest.mark.parametrize("case", ["v3", "v2"])
def test_gradients_equal_transformers(case):
    _, hf, ours = pair(case)
    ids = tokens(2, 12, seed=9)
    hf.zero_grad(), ours.zero_grad()
    ours.loss(ids).backward()
    hf(ids, labels=ids).loss.backward()
    theirs = dict(hf.named_parameters())
    for name in (
        "model.layers.0.self_attn.kv_b_proj.weight",
        "model.layers.1.self_attn.kv_a_proj_with_mqa.weight",
        "model.layers.1.self_attn.kv_a_layernorm.weight",
        "model.layers.2.mlp.gate.weight",
        "model.layers.2.mlp.experts.gate_up_proj",
        "model.layers.2.mlp.shared_experts.down_proj.weight",
    ):
        ours_grad = ours.get_parameter(name).grad
        torch.testing.assert_close(ours_grad, theirs[name].grad, rtol=1e-4, atol=1e-5)
    hf.zero_grad(), ours.zero_grad()


def test_the_absorbed_form_equals_the_expanded_form_per_layer():
    """One LatentAttention: the whole sequence expanded (no cache) against the absorbed form
    over a cache filled by a prefill, a chunk and single tokens."""
    cfg, _, ours = pair("v3")
    attn, T = ours.model.layers[0].self_attn, 11
    x = torch.randn(2, T, cfg.d_model, generator=torch.Generator().manual_seed(0))
    cos, sin = (t[:T] for t in ours.model.position_tables.get(T, x.device))
    cache = KVCache(cfg, 2, T)
    with torch.no_grad():
        expanded = attn(x, (cos, sin), None)
        parts = []
        for a, b in [(0, 4), (4, 8), (8, 9), (9, 10), (10, 11)]:
            parts.append(attn(x[:, a:b], (cos[a:b], sin[a:b]), cache))
            cache.length = b  # (the decoder body advances it after its last layer)
    torch.testing.assert_close(torch.cat(parts, dim=1), expanded, rtol=1e-5, atol=1e-5)


def test_interleaved_rope_is_deepseek_v2s_complex_product_permuted():
    apply_rotary_emb = modeling_deepseek_v2.apply_rotary_emb
    D, T = 8, 6
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 2, T, D, generator=g), torch.randn(1, 1, T, D, generator=g)
    positions = torch.arange(T)
    cos, sin = rope_cos_sin(positions, rope_inv_freq(D, 10000.0))
    angles = torch.outer(positions.float(), rope_inv_freq(D, 10000.0))
    q_v2, k_v2 = apply_rotary_emb(q, k, torch.polar(torch.ones_like(angles), angles)[None])
    q_ours, k_ours = apply_rope_interleaved(q, cos, sin), apply_rope_interleaved(k, cos, sin)
    evens_then_odds = torch.cat((torch.arange(0, D, 2), torch.arange(1, D, 2)))
    torch.testing.assert_close(q_ours, q_v2[..., evens_then_odds], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(k_ours, k_v2[..., evens_then_odds], rtol=1e-6, atol=1e-6)
    # so the scores are the same
    torch.testing.assert_close(q_ours @ k_ours.transpose(-1, -2), q_v2 @ k_v2.transpose(-1, -2))


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_router_picks_transformers_experts_with_its_weights(case):
    """Many tokens through one sparse block's router: the same experts (as sets: transformers'
    top-k is unsorted) and the same weights, scaled and (V3) renormalised."""
    cfg, hf, ours = pair(case)
    layer = cfg.moe_layer_flags.index(True)
    x = torch.randn(256, cfg.d_model, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        _, hf_weights, hf_experts = hf.model.layers[layer].mlp.gate(x)
        weights, experts = ours.model.layers[layer].mlp.route(x)
    hf_order, order = hf_experts.argsort(dim=-1), experts.argsort(dim=-1)
    assert torch.equal(experts.gather(1, order), hf_experts.gather(1, hf_order))
    torch.testing.assert_close(weights.gather(1, order), hf_weights.gather(1, hf_order))
    if cfg.moe_renormalize:
        torch.testing.assert_close(weights.sum(-1), torch.full((256,), cfg.routed_scaling))


def test_group_limited_routing_by_hand():
    """E = 8 in 4 groups of 2, the best 2 groups kept, top-2. Sigmoid (V3): a group ranks by the
    sum of its two biased scores; the weights are the unbiased scores, renormalised, × 2.5.
    Softmax (V2): a group ranks by its best score; no renormalisation."""
    v3 = config_of("v3")
    moe = build_model(v3).model.layers[1].mlp
    logits = torch.tensor([[2.0, -3.0, 0.5, 0.4, 1.0, 1.0, -1.0, 3.0]])
    with torch.no_grad():
        moe.gate.weight.copy_(torch.eye(8, v3.d_model))
        moe.gate.e_score_correction_bias.copy_(torch.tensor([0.0, 0, 0, 0, 0, 0, 0, -2.0]))
    x = torch.zeros(1, v3.d_model)
    x[0, :8] = logits
    weights, experts = moe.route(x)
    s = logits.sigmoid()[0]
    # biased group sums: {0,1}: .88+.05 = .93, {2,3}: 1.22, {4,5}: 1.46, {6,7}: .27+(.95-2) < 0
    # → groups {4,5} and {2,3}; the top-2 of s[2:6] are experts 4 and 5
    assert sorted(experts[0].tolist()) == [4, 5]
    torch.testing.assert_close(weights[0], 2.5 * s[[4, 5]] / s[[4, 5]].sum())

    v2 = config_of("v2")
    moe = build_model(v2).model.layers[2].mlp
    with torch.no_grad():
        moe.gate.weight.copy_(torch.eye(8, v2.d_model))
    p = logits.softmax(-1)[0]
    weights, experts = moe.route(x)
    # group maxima: {0,1}: p0, {2,3}: p2, {4,5}: p4, {6,7}: p7 → groups {6,7} and {0,1}
    assert sorted(experts[0].tolist()) == [0, 7]
    torch.testing.assert_close(weights[0].sort().values, p[[0, 7]].sort().values)


def test_cache_bytes_for_buffers_of_different_widths_by_hand():
    mla, plain = config_of("v3").replace(max_seq_len=64), PRESETS["debug"]
    cache = KVCache(mla, 3, 10)
    assert (cache.k0.shape, cache.v0.shape) == ((3, 1, 10, 32), (3, 1, 10, 8))
    cache.length = 4
    assert cache.nbytes() == 3 * 4 * 3 * (32 + 8) * 4  # B · tokens · layers · (R + Dr) · fp32
    assert cache.allocated_bytes() == 3 * 10 * 3 * (32 + 8) * 4
    cache = KVCache(plain, 2, 10, dtype=torch.bfloat16)
    G, D = plain.n_kv_heads, plain.head_dim
    assert cache.k0.shape == cache.v0.shape == (2, G, 10, D)
    cache.length = 6
    assert cache.nbytes() == 2 * 6 * plain.n_layers * 2 * G * D * 2


def test_a_plain_model_keeps_its_rope_tables_and_attention():
    """Non-MLA: tables as wide as a head; the debug preset's cached decoding still equals its
    forward (its transformers match: tests/unit/model/test_model.py, tests/families/test_families.py)."""
    cfg = PRESETS["debug"]
    model = build_model(cfg).eval()
    ids = tokens(1, 9)
    with torch.no_grad():
        full = model(ids)
        cos, _ = model.model.position_tables.get(9, ids.device)
        assert cos.shape == (9, cfg.head_dim)
        cache = model.new_cache(1, 9)
        steps = [model(ids[:, :5], cache)] + [model(ids[:, t : t + 1], cache) for t in range(5, 9)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-5, atol=1e-5)
    mla = build_model(config_of("v3")).eval()
    cos, _ = mla.model.position_tables.get(9, ids.device)
    assert cos.shape == (9, 8)  # qk_rope_head_dim: RoPE rotates only the decoupled part


def test_an_mla_model_runs_on_the_meta_device():
    """The analysis counts FLOPs on the meta device: a forward, and a cached prefill and step."""
    cfg = config_of("v3")
    model = build_model(cfg, device="meta")
    ids = torch.zeros(2, 12, dtype=torch.long, device="meta")
    assert model(ids).shape == (2, 12, VOCAB)
    cache = model.new_cache(2, 13)
    model(ids, cache)
    assert model(ids[:, :1], cache).shape == (2, 1, VOCAB)
