"""Issue 11: an honest memory guard (llama_lab.runtime.memory). Free memory is the least of
MemAvailable, the cgroup's limit less its usage and RLIMIT_AS less the process size; an
allocation that fails part-way is a refusal in both front ends, never a traceback; the guard
refuses before building. The estimate against the measured peak, RLIMIT_AS in a real process
and the allocator setting: tests/system/test_memory_guard.py."""

import pytest
import torch

from llama_lab import experiments
from llama_lab.config import PRESETS
from llama_lab.errors import ExperimentError
from llama_lab.experiments import LiveSettings
from llama_lab.runtime import memory
from llama_lab.train.budgets import training_bytes_needed

MiB = 2**20


# ---- where free memory comes from ---------------------------------------------------------------
def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_cgroup_v2_limit_less_usage_tightest_up_the_tree(tmp_path):
    proc = tmp_path / "cgroup"
    proc.write_text("0::/user.slice/app\n")
    root = tmp_path / "fs"
    _write(root / "user.slice" / "app" / "memory.max", "max\n")  # no limit here ...
    _write(root / "user.slice" / "app" / "memory.current", "100\n")
    _write(root / "user.slice" / "memory.max", str(4 * 2**30) + "\n")  # ... but above it
    _write(root / "user.slice" / "memory.current", str(3 * 2**30) + "\n")
    _write(root / "user.slice" / "memory.stat", f"anon 1\ninactive_file {512 * MiB}\n")
    free = memory.cgroup_available_bytes(str(root), str(proc))
    assert free == 4 * 2**30 - (3 * 2**30 - 512 * MiB)  # page cache reclaimable


def test_cgroup_v1_limit_and_no_limit(tmp_path):
    proc = tmp_path / "cgroup"
    proc.write_text("4:memory:/docker/abc\n3:cpu:/x\n")
    base = tmp_path / "fs" / "memory" / "docker" / "abc"
    _write(base / "memory.limit_in_bytes", str(2 * 2**30))
    _write(base / "memory.usage_in_bytes", str(2**30))
    _write(base / "memory.stat", f"total_inactive_file {100 * MiB}\n")
    assert memory.cgroup_available_bytes(str(tmp_path / "fs"), str(proc)) == 2**30 + 100 * MiB
    _write(base / "memory.limit_in_bytes", "9223372036854771712")  # v1's "unlimited"
    assert memory.cgroup_available_bytes(str(tmp_path / "fs"), str(proc)) is None
    assert memory.cgroup_available_bytes(str(tmp_path / "nowhere"), str(proc)) is None


def test_free_memory_is_the_least_of_the_three(monkeypatch):
    monkeypatch.setattr(memory, "meminfo_available_bytes", lambda: 10 * 2**30)
    monkeypatch.setattr(memory, "cgroup_available_bytes", lambda: 3 * 2**30)
    monkeypatch.setattr(memory, "rlimit_available_bytes", lambda: 5 * 2**30)
    assert memory.free_memory_bytes(torch.device("cpu")) == 3 * 2**30
    with pytest.raises(ExperimentError, match=r"is free \(limit 90% of free, from cgroup\)"):
        memory.check_memory(3 * 2**30, "cpu", "this run")
    monkeypatch.setattr(memory, "rlimit_available_bytes", lambda: 2**30)
    with pytest.raises(ExperimentError, match="from RLIMIT_AS"):
        memory.check_memory(2 * 2**30, "cpu", "this run")


# ---- an allocation failing part-way ---------------------------------------------------------------
CPU_OOM = RuntimeError(
    "[enforce fail at alloc_cpu.cpp:121] data. DefaultCPUAllocator: can't "
    "allocate memory: you tried to allocate 7516192768 bytes. Error code 12"
)


@pytest.mark.parametrize("failure", [CPU_OOM, MemoryError(), torch.OutOfMemoryError("CUDA out of memory")])
def test_an_allocation_failure_becomes_a_refusal(failure):
    with pytest.raises(ExperimentError, match="ran out of memory part-way"):
        with memory.allocation_failures_refused("the live pass"):
            raise failure
    with pytest.raises(ValueError, match="not memory"):  # other errors pass
        with memory.allocation_failures_refused("the live pass"):
            raise ValueError("not memory")


def test_the_cli_turns_an_allocation_failure_into_one_line(monkeypatch, capsys):
    from llama_lab import cli

    def fails(*args, **kwargs):
        raise CPU_OOM

    monkeypatch.setattr(experiments, "bench", fails)
    assert cli.main(["bench", "--preset", "debug", "--steps", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ran out of memory part-way" in err[0] and "internal" not in err[0]


def test_the_guard_refuses_what_would_not_fit_before_building(monkeypatch):
    cfg = PRESETS["seed-demo"]
    need = training_bytes_needed(cfg, 128, 4, "fp32")
    monkeypatch.setattr(memory, "free_memory_bytes", lambda device: need)  # 90 % rule
    built = []
    monkeypatch.setattr(experiments.live, "build_model", lambda *a, **k: built.append(1))
    with pytest.raises(ExperimentError, match="needs about"):
        experiments.live_pass(cfg, 128, 4, LiveSettings(device="cpu", iters=1))
    assert not built
