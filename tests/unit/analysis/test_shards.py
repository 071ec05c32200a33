"""Sharded training's rules without a process (analysis.shards, train.shard): the layouts and
run settings refused before any rank starts, and the exact per-rank prediction by hand. The real
gloo runs against this prediction: tests/system/test_shard.py."""

import dataclasses

import pytest

from llama_lab.analysis.shards import (
    check_shard_layout,
    fsdp_chunk_rows,
    fsdp_local_shape,
    rank_shards,
    tp_local_shape,
    tp_rule,
)
from llama_lab.config import PRESETS
from llama_lab.errors import AnalysisError, ConfigError, ExperimentError, LabError
from llama_lab.train.shard import ShardSettings, run_shard

DEBUG = PRESETS["debug"]


# ---- refusals: no process is started ---------------------------------------------------------
@pytest.mark.parametrize(
    "strategy, ranks, tp, cfg, match",
    [
        ("zero", 2, None, DEBUG, "strategy='zero' must be one of fsdp, tp, fsdp\\+tp"),
        ("fsdp", 1, None, DEBUG, "ranks=1 must be an integer from 2 to 8"),
        ("fsdp", 9, None, DEBUG, "ranks=9 must be an integer from 2 to 8"),
        ("fsdp", 2.0, None, DEBUG, "ranks=2.0 must be an integer"),
        ("fsdp", 2, 2, DEBUG, "strategy='fsdp' has no tensor parallelism"),
        ("tp", 2, 4, DEBUG, "tp=4 must equal ranks=2"),
        ("tp", 4, None, DEBUG, "tp=4 does not divide n_kv_heads=2"),
        (
            "tp",
            8,
            None,
            DEBUG.replace(n_heads=8, n_kv_heads=8, head_dim=8),
            "tp=8 does not divide ffn_hidden=172",
        ),
        ("tp", 3, None, DEBUG, "tp=3 does not divide n_heads=4"),
        ("tp", 2, None, PRESETS["seed-demo"], "tp=2 does not divide ffn_hidden=1365"),
        ("tp", 2, None, dataclasses.replace(DEBUG, vocab_size=255), "tp=2 does not divide vocab_size=255"),
        ("fsdp+tp", 2, None, DEBUG, "needs ranks >= 4"),
        ("fsdp+tp", 6, 4, DEBUG, "tp=4 must be >= 2 and divide ranks=6"),
        ("fsdp+tp", 4, 4, DEBUG, "leaving dp = ranks // tp >= 2"),
        ("fsdp+tp", 8, 4, DEBUG, "tp=4 does not divide n_kv_heads=2"),
    ],
)
def test_layouts_that_cannot_run_are_refused(strategy, ranks, tp, cfg, match):
    with pytest.raises(ConfigError, match=match):
        check_shard_layout(cfg, strategy, ranks, tp)
    with pytest.raises(LabError, match=match):
        run_shard(cfg, ShardSettings(ranks, strategy, tp=tp))


def test_experts_are_not_split_by_tensor_parallelism():
    moe = dataclasses.replace(DEBUG, n_experts=4, experts_per_token=2, expert_ffn_hidden=64)
    with pytest.raises(ConfigError, match="tensor parallel of experts is not modelled"):
        check_shard_layout(moe, "tp", 2)
    assert check_shard_layout(moe, "fsdp", 2) == (2, 1)


@pytest.mark.parametrize(
    "field, value, match",
    [
        ("steps", 0, "steps=0 must be an integer from 1"),
        ("batch", 0, "batch=0"),
        ("seq_len", DEBUG.max_seq_len + 1, "exceeds the config's max_seq_len"),
        ("seed", -1, "seed=-1"),
        ("lr", 0.0, "lr=0.0"),
        ("timeout_s", 0, "timeout_s=0"),
    ],
)
def test_run_settings_out_of_bounds_are_refused(field, value, match):
    settings = dataclasses.replace(ShardSettings(2, "fsdp"), **{field: value})
    with pytest.raises(ExperimentError, match=match):
        settings.check(DEBUG)
    with pytest.raises(ExperimentError, match=match):
        run_shard(DEBUG, settings)


def test_a_wrong_setting_name_or_type_is_a_type_error():
    with pytest.raises(TypeError, match="unexpected keyword argument 'step'"):
        ShardSettings(2, "fsdp", step=3)
    with pytest.raises(TypeError, match="run_shard needs a ShardSettings, got dict"):
        run_shard(DEBUG, {"ranks": 2, "strategy": "fsdp"})
    with pytest.raises(TypeError, match="positional argument"):
        run_shard(DEBUG, 2, "fsdp")
    with pytest.raises(TypeError, match="run_shard needs a ModelConfig, got str"):
        run_shard("debug", ShardSettings(2, "fsdp"))


# ---- the prediction by hand ------------------------------------------------------------------
def test_torch_chunk_rows_uneven_and_empty():
    assert [fsdp_chunk_rows(5, 2, r) for r in range(2)] == [3, 2]
    assert [fsdp_chunk_rows(5, 4, r) for r in range(4)] == [2, 2, 1, 0]
    assert [fsdp_chunk_rows(16, 7, r) for r in range(7)] == [3, 3, 3, 3, 3, 1, 0]
    assert fsdp_local_shape((5, 7), 2, 1) == (2, 7) and fsdp_local_shape((), 2, 1) == ()


def test_rank_shards_by_hand_for_an_odd_vocabulary_over_two_ranks():
    cfg = dataclasses.replace(DEBUG, vocab_size=255)  # V=255, C=64, L=2, (H+2G)D=128, F=172
    shards = rank_shards(cfg, "fsdp", 2, 1, seq_len=32, batch=2)
    # per block: 2 norms (32 + 32), qkv 64 of 128 rows, o_proj 32 of 64, gate_up 172 of 344,
    # down 32 of 64 rows (× 172 columns)
    block = 32 + 32 + 64 * 64 + 32 * 64 + 172 * 64 + 32 * 172
    rank0 = 128 * 64 * 2 + 2 * block + 32  # embed and lm_head: 128 of 255 rows
    rank1 = 127 * 64 * 2 + 2 * block + 32  # ... and the last 127
    assert [s.params_bytes for s in shards] == [4 * rank0, 4 * rank1]
    assert [s.grads_bytes for s in shards] == [4 * rank0, 4 * rank1]
    assert [s.optimizer_bytes for s in shards] == [8 * rank0, 8 * rank1]
    assert shards[0].activation_bytes == shards[1].activation_bytes


def test_the_tensor_parallel_rule_of_each_parameter():
    assert tp_rule("model.layers.0.self_attn.qkv_proj.weight") == "parts"
    assert tp_rule("model.layers.1.mlp.down_proj.weight") == "cols"
    assert tp_rule("model.layers.1.mlp.down_proj.bias") == "replicate"
    assert tp_rule("model.layers.0.self_attn.q_norm.weight") == "replicate"
    assert tp_rule("model.embed_tokens.weight") == tp_rule("lm_head.weight") == "rows"
    # q (4 heads × 16) + k, v (2 heads × 16 each): 128 rows, 64 per rank
    assert tp_local_shape(DEBUG, "model.layers.0.self_attn.qkv_proj.weight", (128, 64), 2) == (64, 64)
    assert tp_local_shape(DEBUG, "model.layers.0.self_attn.o_proj.weight", (64, 64), 2) == (64, 32)
    shards = rank_shards(DEBUG, "fsdp+tp", 2, 2)
    assert [(s.rank, s.dp_rank, s.tp_rank) for s in shards] == [(0, 0, 0), (1, 0, 1), (2, 1, 0), (3, 1, 1)]
    with pytest.raises(AnalysisError, match="is dp=2, tp=1"):
        rank_shards(DEBUG, "fsdp", 1, 2)
