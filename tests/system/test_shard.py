"""Sharded training on local gloo processes (train.shard) against the exact per-rank prediction
(analysis.shards): FSDP2, tensor parallel, both; the refusals; failures, stops and threads.
Real gloo runs are the slow tier; the refusals and the prediction by hand are fast."""

import dataclasses
import functools
import math
import os
import sys
import threading
import types
from pathlib import Path

import pytest
import torch.distributed as dist

from llama_lab.analysis.shards import (
    check_shard_layout,
    fsdp_chunk_rows,
    fsdp_local_shape,
    local_shapes,
    rank_shards,
    tp_local_shape,
    tp_rule,
)
from llama_lab.config import PRESETS
from llama_lab.errors import AnalysisError, ConfigError, ExperimentError, LabError
from llama_lab.train.shard import ShardSettings, launch, run_shard, train_rank

_gloo = pytest.mark.skipif(
    not (dist.is_available() and dist.is_gloo_available()),
    reason="torch.distributed with gloo is not available",
)


def gloo(test):
    """A test on real gloo ranks: the slow tier (a few seconds each, the processes' start)."""
    return pytest.mark.slow(_gloo(test))


DEBUG = PRESETS["debug"]
LOSS_RTOL = 1e-5
BYTES = ("params_bytes", "grads_bytes", "optimizer_bytes")


def _orphans() -> list[int]:
    """Rank processes of this test process still alive: its children started by
    multiprocessing's spawn (not its resource tracker, which lives as long as this process)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes()
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if b"spawn_main" in cmd and ppid == os.getpid():
            found.append(int(proc.name))
    return found


def _check_exact(result, ranks: int) -> None:
    assert result.backend == "gloo" and len(result.ranks) == ranks
    for rank in result.ranks:
        for key in BYTES:
            assert rank.measured[key] == rank.predicted[key], (rank.rank, key)
        assert rank.measured["params_bytes"] > 0
    assert result.max_rel_error == 0.0
    # activations: a reported relative error, not an exact test
    assert result.activation_max_rel_error is None or math.isfinite(result.activation_max_rel_error)
    assert len(result.loss_single) == len(result.loss_sharded) == result.steps
    for single, sharded in zip(result.loss_single, result.loss_sharded):
        assert sharded == pytest.approx(single, rel=LOSS_RTOL)
    assert result.max_loss_rel_diff <= LOSS_RTOL
    assert result.logits_max_diff <= 1e-5
    data = result.to_dict()
    assert {
        "strategy",
        "ranks",
        "max_rel_error",
        "activation_max_rel_error",
        "dp",
        "tp",
        "steps",
        "seq_len",
        "batch",
        "loss_single",
        "loss_sharded",
        "max_loss_diff",
        "backend",
        "wall_s",
    } <= set(data)
    assert set(data["ranks"][0]) >= {"rank", "dp_rank", "tp_rank", "measured", "predicted"}
    assert _orphans() == []


@gloo
def test_fsdp_two_ranks_exact_shards_and_the_single_process_loss():
    calls = []
    result = run_shard(
        DEBUG,
        ShardSettings(2, "fsdp", steps=2, seq_len=32, batch=2),
        progress=lambda f, text: calls.append((f, text)),
    )
    _check_exact(result, 2)
    assert (result.dp, result.tp) == (2, 1)
    assert [r.dp_rank for r in result.ranks] == [0, 1]
    # the whole model's 4 bytes/param split between the two ranks, AdamW twice that
    total = sum(r.measured["params_bytes"] for r in result.ranks)
    assert total == 4 * sum(math.prod(s) for s in local_shapes(DEBUG, 1, 1, 0).values())
    assert all(r.measured["optimizer_bytes"] == 2 * r.measured["params_bytes"] for r in result.ranks)
    assert any("step 1/2" in text for _, text in calls) and calls[-1][0] == pytest.approx(1.0)
    assert all(0.0 <= f <= 1.0 for f, _ in calls)


@gloo
def test_tensor_parallel_from_a_thread_exact_shards_logits_and_loss():
    out = {}

    def work():
        try:
            out["result"] = run_shard(DEBUG, ShardSettings(2, "tp", steps=2))
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            out["error"] = exc

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(timeout=120)
    assert not thread.is_alive()
    if "error" in out:
        raise out["error"]
    result = out["result"]
    _check_exact(result, 2)
    assert (result.dp, result.tp) == (1, 2) and [r.tp_rank for r in result.ranks] == [0, 1]
    full = 4 * sum(math.prod(s) for s in local_shapes(DEBUG, 1, 1, 0).values())
    assert result.ranks[0].measured["params_bytes"] < full  # split, not replicated


@gloo
def test_fsdp_and_tensor_parallel_on_a_two_by_two_mesh():
    result = run_shard(DEBUG, ShardSettings(4, "fsdp+tp", tp=2, steps=2))
    _check_exact(result, 4)
    assert (result.dp, result.tp) == (2, 2)
    assert [(r.dp_rank, r.tp_rank) for r in result.ranks] == [(0, 0), (0, 1), (1, 0), (1, 1)]


@gloo
@pytest.mark.parametrize(
    "strategy, changes",
    [
        # biases split with their weights (o/down's replicated), QK-norm's replicated weights summed
        # over the group, the tied embedding one vocabulary shard read by both ends
        ("tp", dict(bias=True, qkv_bias=True, o_bias=True, mlp_bias=True, qk_norm=True, tie_embeddings=True)),
        # experts index their fused weights: views of FSDP2's all-gathered parameters, not activations
        ("fsdp", dict(n_experts=4, experts_per_token=2, expert_ffn_hidden=64)),
    ],
)
def test_variants_of_the_recipe_shard_exactly(strategy, changes):
    result = run_shard(dataclasses.replace(DEBUG, **changes), ShardSettings(2, strategy, steps=2))
    _check_exact(result, 2)
    assert result.activation_max_rel_error <= 0.01  # reported; parameters not counted in it


def failing_rank(mode: str, cfg, settings, rank: int, send) -> dict:
    """``train_rank`` but rank 1 fails after its first step: raises, or exits without a word.
    Module-level: the spawned ranks import it by name (this module is on their sys.path)."""

    def send_then_fail(kind: str, **fields) -> None:
        send(kind, **fields)
        if rank == 1 and kind == "step":
            if mode == "exit":
                os._exit(3)
            raise RuntimeError("failure injected by the test")

    return train_rank(cfg, settings, rank, send_then_fail)


@gloo
@pytest.mark.parametrize("mode", ["raise", "exit"])
def test_a_failing_rank_is_named_and_every_rank_is_killed(mode):
    settings = ShardSettings(2, "fsdp", steps=3, timeout_s=120)
    with pytest.raises(ExperimentError, match="rank 1 of 2") as caught:
        launch(DEBUG, settings, entry=functools.partial(failing_rank, mode))
    if mode == "raise":
        assert "failed: RuntimeError: failure injected by the test (at test_shard.py:" in str(caught.value)
    else:
        assert "exited (code 3) before reporting" in str(caught.value)
    assert _orphans() == []


@gloo
@pytest.mark.parametrize("stop, when", [(RuntimeError, "step 1/"), (KeyboardInterrupt, "")])
def test_a_raising_progress_callback_kills_every_rank(stop, when):
    """The app's Stop button raises from the callback: mid-run, or while the ranks start."""

    def progress(fraction, text):
        if when in text:
            raise stop("stopped")

    with pytest.raises(stop, match="stopped"):
        run_shard(DEBUG, ShardSettings(2, "fsdp", steps=20), progress=progress)
    assert _orphans() == []


@gloo
def test_a_run_past_its_time_limit_is_stopped():
    with pytest.raises(ExperimentError, match="time limit of 1 s: rank\\(s\\) 0, 1 did not finish"):
        run_shard(DEBUG, ShardSettings(2, "fsdp", timeout_s=1))
    assert _orphans() == []


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


@gloo
def test_a_rank_does_not_run_the_parents_main_script_again(tmp_path, monkeypatch):
    # Under Streamlit, __main__ is the page script (a module with its __file__, no __spec__):
    # a plain spawned process would run it again before its target; the ranks must not.
    script = tmp_path / "page.py"
    script.write_text("import pathlib\npathlib.Path(__file__).with_suffix('.ran').touch()\n")
    page = types.ModuleType("__main__")
    page.__file__ = str(script)
    monkeypatch.setitem(sys.modules, "__main__", page)
    result = run_shard(DEBUG, ShardSettings(2, "fsdp", steps=1))
    assert len(result.ranks) == 2
    assert not (tmp_path / "page.ran").exists()
    assert sys.modules["__main__"] is page  # put back
