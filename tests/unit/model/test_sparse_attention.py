"""Sparse attention patterns (global tokens, dilation, BigBird's random blocks) as the live model
runs them: the mask against the definition written out by hand, the attention's output against
softmax(QKᵀ/√D + mask)·V computed by hand, and KV-cached decoding against the full forward."""

import pytest
import torch

from llama_lab.analysis import kv_cache_bytes
from llama_lab.config import ConfigError, ModelConfig
from llama_lab.config.sparse import SparsePattern
from llama_lab.model import attention_mask, build_model
from llama_lab.model.attention import Attention


def hand_mask(T, W, G=0, d=1, r=0, b=4, seed=0):
    """The pattern's definition, one pair at a time (config.sparse)."""
    p = SparsePattern(W, d, G, r, b, seed)
    allowed = torch.zeros(T, T, dtype=torch.bool)
    for i in range(T):
        drawn = p.random_key_blocks(i // b) if r else []
        for j in range(i + 1):
            window = (i - j) < W * d and (i - j) % d == 0
            allowed[i, j] = window or j < G or i < G or j // b in drawn
    return allowed


def tiny(**pattern):
    shape = dict(vocab_size=64, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn_hidden=48)
    return ModelConfig(**{**shape, "max_seq_len": 48, "sliding_window": 4, "local_layers": "0", **pattern})


PATTERNS = [
    dict(global_tokens=3),
    dict(dilation=2),
    dict(global_tokens=2, dilation=3),
    dict(random_blocks=2, sparse_block_size=4),
    dict(random_blocks=1, sparse_block_size=3, global_tokens=2, dilation=2, sparse_seed=5),
]


def test_a_small_mask_written_out():
    # T = 7, W = 2 keys 2 apart, G = 1: row i sees i, i − 2 and position 0
    expected = [
        "1......",
        "11.....",
        "1.1....",
        "11.1...",
        "1.1.1..",
        "1..1.1.",
        "1...1.1",
    ]
    got = attention_mask(7, 7, 2, "cpu", sparse=SparsePattern(2, dilation=2, global_tokens=1))
    assert ["".join("1" if x else "." for x in row) for row in got.tolist()] == expected


@pytest.mark.parametrize("W, G", [(4, 0), (4, 3), (1, 5), (9, 2)])
def test_the_undilated_pattern_is_transformers_sliding_mask_or_the_global_tokens(W, G):
    """SPEC's window convention is transformers' own sliding mask (masking_utils); Longformer's
    causal global attention joins it as one more allowed set."""
    from transformers.masking_utils import and_masks, causal_mask_function, or_masks, sliding_window_overlay

    def global_tokens(batch_idx, head_idx, q_idx, kv_idx):
        return (kv_idx < G) | (q_idx < G)

    theirs = and_masks(causal_mask_function, or_masks(sliding_window_overlay(W), global_tokens))
    q, kv = torch.arange(30)[:, None], torch.arange(30)[None, :]
    want = theirs(0, 0, q, kv)
    assert torch.equal(attention_mask(30, 30, W, "cpu", sparse=SparsePattern(W, global_tokens=G)), want)
    if G == 0:  # the plain window's path too
        assert torch.equal(attention_mask(30, 30, W, "cpu"), want)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_the_mask_is_the_definition(pattern):
    cfg = tiny(**pattern)
    p = cfg.sparse_pattern
    T = 37
    want = hand_mask(T, 4, p.global_tokens, p.dilation, p.random_blocks, p.block_size, p.seed)
    assert torch.equal(attention_mask(T, T, 4, "cpu", sparse=p), want)


def test_random_blocks_are_seeded_and_reproducible():
    p = SparsePattern(4, random_blocks=2, block_size=4, seed=7, global_tokens=5)
    assert (
        p.random_key_blocks(9)
        == p.random_key_blocks(9)
        == SparsePattern(4, 1, 5, 2, 4, 7).random_key_blocks(9)
    )
    # eligible: wholly past G = 5 (from block 2) and wholly before the window of position 36,
    # which reaches back to 33 (blocks up to 7)
    assert p.eligible_blocks(9) == range(2, 8)
    assert len(set(p.random_key_blocks(9))) == 2 and set(p.random_key_blocks(9)) <= set(range(2, 8))
    assert p.random_key_blocks(3) == [] and p.random_key_blocks(4) == [2]  # r or fewer: all of them
    seeds = {tuple(SparsePattern(4, 1, 0, 2, 4, s).random_key_blocks(30)) for s in range(6)}
    assert len(seeds) > 1  # the seed changes the draw


@pytest.mark.parametrize("pattern", [*PATTERNS, dict(global_tokens=2, attn_softcap=20.0)])
def test_attention_output_equals_dense_attention_under_the_mask(pattern):
    torch.manual_seed(0)
    cfg = tiny(pos_encoding="none", **pattern)
    attn = Attention(cfg, 0).eval()
    for p in attn.parameters():
        torch.nn.init.normal_(p, std=0.3)
    T = 21
    x = torch.randn(2, T, cfg.d_model)
    with torch.no_grad():
        ours = attn(x, None, None)
        q, k, v = attn.project(x, None)
        k, v = k.repeat_interleave(cfg.n_rep, 1), v.repeat_interleave(cfg.n_rep, 1)
        scores = q @ k.transpose(-2, -1) / cfg.head_dim**0.5
        if cfg.attn_softcap:
            scores = torch.tanh(scores / cfg.attn_softcap) * cfg.attn_softcap
        p = cfg.sparse_pattern
        mask = hand_mask(T, 4, p.global_tokens, p.dilation, p.random_blocks, p.block_size, p.seed)
        dense = (scores + torch.where(mask, 0.0, float("-inf"))).softmax(-1) @ v  # (B, H, T, D)
        mine = attn.o_proj(dense.transpose(1, 2).reshape(2, T, -1))
        plain = Attention(
            cfg.replace(
                global_tokens=0,
                random_blocks=0,
                dilation=1,
                sparse_block_size=64,
                sparse_seed=0,
                attn_softcap=cfg.attn_softcap,
            ),
            0,
        )
        plain.load_state_dict(attn.state_dict())
        without = plain(x, None, None)
    torch.testing.assert_close(ours, mine, atol=1e-5, rtol=1e-5)
    assert (ours - without).abs().max() > 1e-3  # the pattern is in force


@pytest.mark.parametrize("pattern", PATTERNS)
def test_cached_decoding_equals_the_full_forward(pattern):
    torch.manual_seed(0)
    cfg = tiny(**pattern)
    m = build_model(cfg).eval()
    ids = torch.randint(0, 64, (2, 30))
    with torch.no_grad():
        full = m(ids)
        one = m.new_cache(2)
        steps = [m(ids[:, :5], one)] + [m(ids[:, t : t + 1], one) for t in range(5, 30)]
        chunked = m.new_cache(2)
        chunks = [m(ids[:, a : a + 7], chunked) for a in range(0, 30, 7)]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.cat(chunks, 1), full, atol=1e-5, rtol=1e-5)
    # the cache keeps what the pattern needs, as analysis.kv counts it
    assert one.nbytes() == chunked.nbytes() == kv_cache_bytes(cfg, 30, 2, "fp32")


def test_the_cache_keeps_the_global_tokens_and_the_dilated_span():
    cfg = tiny(global_tokens=3, dilation=2)  # span (4 − 1)·2 + 1 = 7
    assert cfg.local_cache_tokens == 3 + 7
    cache = build_model(cfg).new_cache(1)
    assert cache.k0.shape[2] == 10 and cache.k1.shape[2] == 48  # block 1 has no window
    assert tiny(random_blocks=1).local_cache_tokens is None  # any earlier block: everything


@pytest.mark.parametrize(
    "overrides, rule",
    [
        (dict(sliding_window=0, global_tokens=2), "needs sliding_window > 0"),
        (dict(dilation=2, chunked_attention=True), "with chunked_attention is not modelled"),
        (dict(global_tokens=49), "global_tokens=49 exceeds max_seq_len=48"),
        (dict(sparse_seed=3), "sparse_seed=3 sets BigBird's random blocks: it needs random_blocks > 0"),
        (dict(dilation=0), "dilation=0 must be at least 1"),
    ],
)
def test_bad_patterns_are_one_line_config_errors(overrides, rule):
    with pytest.raises(ConfigError, match=rule) as caught:
        tiny(**overrides)
    assert "\n" not in str(caught.value)


def test_no_family_writes_a_pattern():
    with pytest.raises(ConfigError, match="no supported family writes a sparse attention pattern"):
        tiny(global_tokens=2).to_hf_config()


def test_the_inside_page_traces_the_pattern_it_runs():
    """The Inside-the-model trace rebuilds each block's weights with the same mask: o_proj of
    its weights @ v equals the module's output, and a masked pair has weight 0."""
    from llama_lab.experiments.inside import trace

    torch.manual_seed(0)
    cfg = tiny(global_tokens=2, dilation=2)
    ids = torch.randint(0, 64, (1, 20))
    layer = trace(build_model(cfg).eval(), ids).layers[0]
    assert layer.sparse == cfg.sparse_pattern and layer.max_attention_error < 1e-5
    allowed = hand_mask(20, 4, 2, 2)
    assert (layer.attention[:, ~allowed] == 0).all() and (layer.attention[:, allowed] > 0).all()
