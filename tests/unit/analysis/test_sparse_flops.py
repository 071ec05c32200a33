"""A sparse pattern's score FLOPs: ``flops.attention_scores_causal`` is the mask's pairs exactly
(the materialised mask summed, times the FLOPs of a pair), counted without the T×T mask (fast
at 128k context); the full convention is the T×T the masked kernel computes (FlopCounterMode)."""

import json
import time

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from llama_lab import analysis
from llama_lab.analysis.pairs import causal_pairs, row_keys
from llama_lab.config import PRESETS, ModelConfig
from llama_lab.config.sparse import SparsePattern
from llama_lab.model import attention_mask, build_model


def tiny(**pattern):
    shape = dict(vocab_size=64, d_model=32, n_layers=3, n_heads=4, n_kv_heads=2, ffn_hidden=48)
    return ModelConfig(**{**shape, "max_seq_len": 96, "local_layers": "0,2", **pattern})


# (T, W, G, d, r, b)
CASES = [
    (1, 4, 0, 1, 0, 64),
    (40, 4, 3, 1, 0, 64),
    (40, 4, 0, 3, 0, 64),
    (41, 5, 2, 2, 0, 64),
    (64, 3, 7, 4, 0, 64),
    (33, 4, 0, 1, 2, 4),
    (70, 3, 2, 2, 1, 5),
    (90, 6, 10, 3, 3, 8),
    (12, 16, 20, 1, 0, 64),  # the window and the global tokens beyond T
]


@pytest.mark.parametrize("T, W, G, d, r, b", CASES)
def test_causal_score_flops_are_the_masks_pairs(T, W, G, d, r, b):
    cfg = tiny(
        sliding_window=W,
        global_tokens=G,
        dilation=d,
        random_blocks=r,
        **({"sparse_block_size": b} if r else {}),
    )
    B = 2
    pairs = int(attention_mask(T, T, W, "cpu", sparse=cfg.sparse_pattern).sum()) if cfg.sparse_pattern else T
    if cfg.sparse_pattern is None:  # plain window: Σ min(i + 1, W)
        pairs = sum(min(i + 1, W) for i in range(T))
    per_pair = 2 * 4 * (8 + 8)  # 2 FLOPs × H × (D for QKᵀ + Dv for AV)
    dense = T * (T + 1) // 2  # the block without a window
    f = analysis.count_flops(cfg, T, B)
    assert f.attention_scores_causal == B * per_pair * (2 * pairs + dense)


@pytest.mark.parametrize("T, W, G, d, r, b", CASES[1:])
def test_every_row_and_decode_step_meets_its_row_of_the_mask(T, W, G, d, r, b):
    p = SparsePattern(W, d, G, r, b)
    mask = attention_mask(T, T, W, "cpu", sparse=p)
    assert row_keys(p, range(T)).tolist() == mask.sum(1).tolist()
    cfg = tiny(
        sliding_window=W, global_tokens=G, dilation=d, random_blocks=r, sparse_block_size=b if r else 64
    )
    per_pair = 2 * 4 * 16
    step = analysis.decode_flops(cfg, T)  # the token at position T − 1
    assert step.attention_scores_causal == per_pair * (2 * int(mask[-1].sum()) + T)


def test_the_closed_form_is_fast_at_405b_and_128k():
    cfg = PRESETS["llama-3.1-405b"].replace(sliding_window=4096, global_tokens=4, local_layers="every:2")
    start = time.perf_counter()
    f = analysis.count_flops(cfg, 131072)
    assert time.perf_counter() - start < 1.0
    # per windowed block: the first 4 rows see everything before them, rows 4 … 4098 their
    # window and the globals less the overlap, then W + G keys each
    p = cfg.sparse_pattern
    head = sum(
        min(4096, i + 1) + min(4, i + 1) - max(0, min(4, i + 1) - max(0, i - 4095)) for i in range(4099)
    )
    assert causal_pairs(p, 131072) == head + (131072 - 4099) * 4100
    per_pair = 2 * 128 * (128 + 128)
    dense = 131072 * 131073 // 2
    assert f.attention_scores_causal == per_pair * (63 * causal_pairs(p, 131072) + 63 * dense)
    # a pattern grows linearly in T, the dense causal count quadratically
    assert causal_pairs(p, 2 * 131072) - causal_pairs(p, 131072) == 131072 * 4100


def test_random_blocks_at_128k_in_closed_form():
    p = SparsePattern(256, 1, 2, 3, 64, 0)
    start = time.perf_counter()
    n = causal_pairs(p, 131072)
    assert time.perf_counter() - start < 1.0
    # query block q draws min(3, q − 5) blocks (eligible: blocks 1 … q − 5, wholly before the
    # window of its first query, which reaches back 255), 64 keys each per row
    random_keys = sum(64 * 64 * min(3, max(0, q - 5)) for q in range(2048))
    assert n == causal_pairs(SparsePattern(256, 1, 2), 131072) + random_keys


@pytest.mark.parametrize(
    "pattern", [dict(global_tokens=3), dict(dilation=2, random_blocks=1, sparse_block_size=4)]
)
def test_the_full_convention_is_what_the_masked_kernel_computes(pattern):
    """FlopCounterMode on the eager forward (and on one cached decode step) counts every
    matmul the module runs: the masked kernel scores all T×T pairs (the held keys and the new
    one when decoding), as ``flops.forward`` counts them. Soft-capped scores take the model's
    plain-matmul path (FlopCounterMode has no rule for the CPU's fused SDPA kernel)."""
    torch.manual_seed(0)
    cfg = tiny(sliding_window=4, attn_softcap=30.0, **pattern)
    m = build_model(cfg).eval()
    T = 20
    ids = torch.randint(0, 64, (1, T))
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        m(ids)
    assert counter.get_total_flops() == analysis.count_flops(cfg, T).forward
    cache = m.new_cache(1)
    with torch.no_grad():
        m(ids[:, :-1], cache)
        with FlopCounterMode(display=False) as step:
            m(ids[:, -1:], cache)
    assert step.get_total_flops() == analysis.decode_flops(cfg, T).forward


def test_the_cost_against_t_is_linear_for_a_pattern():
    cfg = tiny(sliding_window=4, global_tokens=2, local_layers="all")
    frame = analysis.score_flops_against_t(cfg, [16, 32, 64])
    assert list(frame.columns) == ["T", "dense causal", "pattern"]
    dense, pattern = frame["dense causal"].tolist(), frame["pattern"].tolist()
    assert pattern == [analysis.count_flops(cfg, T).attention_scores_causal for T in (16, 32, 64)]
    plain = tiny(local_layers="all")
    assert dense == [analysis.count_flops(plain, T).attention_scores_causal for T in (16, 32, 64)]
    per_pair = 3 * 2 * 4 * 16  # every block
    assert pattern[2] - pattern[1] == 32 * (4 + 2) * per_pair  # W + G keys per added query
    assert dense[2] - dense[1] == (64 * 65 - 32 * 33) // 2 * per_pair


def test_analyze_takes_the_pattern_through_set(capsys):
    from llama_lab.cli import main

    args = ["analyze", "--preset", "seed-demo", "--seq-len", "128", "--dtype", "fp32", "--json"]
    assert main([*args, "--set", "global_tokens=4", "--set", "sliding_window=16"]) == 0
    out = json.loads(capsys.readouterr().out)
    cfg = PRESETS["seed-demo"].replace(global_tokens=4, sliding_window=16)
    pairs = int(attention_mask(128, 128, 16, "cpu", sparse=cfg.sparse_pattern).sum())
    assert out["flops"]["attention_scores_causal"] == 4 * pairs * 2 * 8 * (64 + 64)  # 4 blocks
    assert out["kv_cache"]["bytes"] == 4 * (4 + 16) * 2 * 2 * 64 * 4  # G + W tokens, K and V, fp32
    assert main(["analyze", "--preset", "seed-demo", "--set", "dilation=2"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "needs sliding_window > 0" in err


def test_the_report_and_the_pages_draw_the_same_pattern():
    from llama_lab.figures.sparse import mask_reasons
    from llama_lab.report.analysis_part import pattern_figures

    cfg = tiny(sliding_window=4, global_tokens=2, random_blocks=1, sparse_block_size=8)
    codes = mask_reasons(cfg, 64)
    allowed = attention_mask(64, 64, 4, "cpu", sparse=cfg.sparse_pattern).numpy()
    assert ((codes > 0) == allowed).all() and {2, 3, 4} <= set(codes.ravel().tolist())
    assert [f.name for f in pattern_figures(cfg, 96)] == ["attention_pattern", "score_flops_vs_t"]
    assert pattern_figures(tiny(), 96) == []


@pytest.mark.parametrize(
    "command",
    [
        ["decode", "--gpu", "h100-80gb"],
        ["train", "--gpu", "h100-80gb", "--gpus", "1"],
        ["finetune", "--method", "lora", "--gpu", "h100-80gb", "--seq-len", "64", "--batch", "1"],
    ],
)
def test_the_time_predictions_refuse_a_pattern_by_name(capsys, command):
    from llama_lab.cli import main

    pattern = ["--preset", "seed-demo", "--set", "sliding_window=16", "--set", "dilation=2"]
    assert main(["predict", *command, *pattern]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"predict {command[0]} is not predicted for a sparse attention pattern" in err


def test_what_fits_counts_the_tokens_the_pattern_keeps():
    from llama_lab.runtime.hardware import GPUS

    gpu = GPUS["H100 80GB"]
    per_layer_token = 2 * 2 * 8 * 2  # K and V, 2 KV heads of 8, bf16
    kept = tiny(sliding_window=16, global_tokens=4, dilation=2)  # blocks 0 and 2 keep 4 + 31
    free = gpu.usable_bytes - analysis.weight_bytes(kept, "bf16")
    assert analysis.kv_cache_bytes(kept, 1000, 1, "bf16") == per_layer_token * (2 * 35 + 1000)
    assert (
        analysis.max_context_that_fits(kept, gpu) == 35 + (free - 3 * 35 * per_layer_token) // per_layer_token
    )
    random = tiny(sliding_window=16, random_blocks=1)  # any earlier block: every token kept
    assert analysis.kv_cache_bytes(random, 1000, 1, "bf16") == per_layer_token * 3 * 1000
    assert analysis.max_context_that_fits(random, gpu) == free // (3 * per_layer_token)


def test_palms_estimate_counts_the_keys_the_last_query_sees():
    cfg = tiny(sliding_window=4, global_tokens=3, dilation=2)
    T = 50
    last = int(attention_mask(T, T, 4, "cpu", sparse=cfg.sparse_pattern)[-1].sum())  # 4 + 3
    f = analysis.count_flops(cfg, T)
    keys = 2 * last + T  # blocks 0 and 2 windowed, block 1 dense
    assert last == 7 and f.palm_training_per_token == 6 * f.palm_params + 6 * 4 * (8 + 8) * keys
    from llama_lab.analysis import derive

    written = derive.palm_training_per_token(cfg, T)  # the page's equation, from its own terms
    assert written.terms["K"] == keys and written.evaluate() == f.palm_training_per_token
