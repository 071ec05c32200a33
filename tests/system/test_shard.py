"""Sharded training on local gloo processes (train.shard) against the exact per-rank prediction
(analysis.shards): FSDP2, tensor parallel, both; the refusals; failures, stops and threads.
Here the real gloo runs (the slow tier); the refusals and the prediction by hand, fast:
tests/unit/analysis/test_shards.py."""

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

from llama_lab.analysis.shards import local_shapes
from llama_lab.config import PRESETS
from llama_lab.errors import ExperimentError
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
