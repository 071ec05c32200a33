"""Real training steps on R local ``torch.distributed`` processes (gloo on the CPU): PyTorch's
FSDP2 (``fully_shard``), our tensor-parallel plan (``train.tensor_parallel``) or both on a 2-D
(dp, tp) mesh. Every rank builds the same model from the seed, runs a few AdamW steps and
reports the local bytes of its parameters, gradients and AdamW moments and the bytes autograd
saved in one forward with the loss, beside ``analysis.shards``' prediction; the parent runs the
same steps in one process on the global batch and compares the losses.

The ranks are ``python -c`` subprocesses in their own sessions (SIGINT ignored), brought
together by a TCPStore the parent serves on a free port; they report JSON lines on stdout.
Whatever raises in the parent — a failed or silent rank, the time limit, KeyboardInterrupt, the
progress callback (the app's Stop button) — kills every rank before it propagates.
"""

from __future__ import annotations

import json
import os
import pickle
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from contextlib import nullcontext, suppress
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from .. import analysis
from ..analysis.shards import BYTE_FIELDS, check_shard_layout, rank_shards
from ..config import ModelConfig
from ..errors import ExperimentError
from ..model import build_model
from ..runtime.memory import check_memory
from ..units import Progress, plain_fields, settings_from
from .budgets import MAX_SEED, check_count, check_cpu_budget, check_real, check_sizes, training_bytes_needed
from .measure import _CAST_OR_VIEW

HOST = "127.0.0.1"
BACKEND = "gloo"
MARK = "@@shard "  # the prefix of a rank's report lines on its stdout
MAX_SHARD_STEPS, MAX_SHARD_BATCH = 50, 64
GRACE_S = 10.0  # after its report a rank has this long to exit
PROGRESS_EVERY_S = 0.25
_CHILD = "from llama_lab.train.shard import child_main; child_main()"
FAULT_ENV = "LLAMA_LAB_SHARD_FAULT"  # tests: "<rank>:raise" / "<rank>:exit" after its 1st step


@dataclass(frozen=True)
class ShardSettings:
    """One sharded run: ``ranks`` processes under ``strategy``; ``steps`` AdamW steps (lr,
    β = (0.9, 0.95), weight decay 0.1 on matrices, no clipping); ``batch`` sequences of
    ``seq_len`` + 1 tokens per data-parallel rank (tensor-parallel ranks share theirs);
    ``tp``: the tensor-parallel size of 'fsdp+tp' (default 2); ``timeout_s``: the whole run."""

    ranks: int
    strategy: str
    steps: int = 2
    seq_len: int = 32
    batch: int = 2
    seed: int = 0
    tp: int | None = None
    lr: float = 1e-3
    timeout_s: float = 300.0


@dataclass(frozen=True)
class RankReport:
    """One rank: measured and predicted bytes (``analysis.shards.BYTE_FIELDS``), its losses,
    and the tensors it saved for backward (label, local shape, dtype, bytes) for diagnosis."""

    rank: int
    dp_rank: int
    tp_rank: int
    measured: dict
    predicted: dict
    losses: tuple[float, ...]
    wall_s: float
    saved: tuple = field(default=(), repr=False)

    def to_dict(self) -> dict:
        return plain_fields(self, exclude=("saved",))


@dataclass(frozen=True)
class ShardResult:
    strategy: str
    dp: int
    tp: int
    steps: int
    seq_len: int
    batch: int
    seed: int
    ranks: tuple[RankReport, ...]
    max_rel_error: float  # params, grads, optimizer: |measured − predicted| / predicted
    activation_max_rel_error: float | None
    loss_single: tuple[float, ...]
    loss_sharded: tuple[float, ...]
    max_loss_diff: float
    max_loss_rel_diff: float
    logits_max_diff: float  # rank 0's first logits against the single model's
    backend: str
    wall_s: float

    def to_dict(self) -> dict:
        return plain_fields(self)


# ---- the global batch ------------------------------------------------------------------------
def batch_ids(cfg: ModelConfig, settings: ShardSettings, dp_rank: int, step: int) -> torch.Tensor:
    """Data-parallel rank ``dp_rank``'s tokens (batch, seq_len + 1) at ``step``: uniform ids
    from a generator seeded by (seed, step, dp_rank)."""
    generator = torch.Generator().manual_seed((settings.seed * 1009 + step) * 1009 + dp_rank)
    return torch.randint(0, cfg.vocab_size, (settings.batch, settings.seq_len + 1), generator=generator)


def shard_optimizer(model: torch.nn.Module, lr: float) -> torch.optim.AdamW:
    """AdamW as ``step.make_optimizer`` (β = (0.9, 0.95), decay 0.1 on matrices only) but the
    per-parameter loop (``foreach=False``), which DTensors and plain tensors run alike."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8, foreach=False)


# ---- one rank --------------------------------------------------------------------------------
def _local(tensor: torch.Tensor) -> torch.Tensor:
    from torch.distributed._functional_collectives import AsyncCollectiveTensor
    from torch.distributed.tensor import DTensor

    if isinstance(tensor, DTensor):
        tensor = tensor._local_tensor
    return tensor.wait() if isinstance(tensor, AsyncCollectiveTensor) else tensor


def _is_parameter(tensor: torch.Tensor) -> bool:
    """A parameter (a leaf that requires grad: FSDP2's all-gathered ones too) or a view or cast
    of one, found by walking the autograd graph to its AccumulateGrad."""
    fn = tensor.grad_fn
    if fn is None:
        return tensor.requires_grad
    for _ in range(8):
        if fn is None or type(fn).__name__ == "AccumulateGrad":
            return fn is not None
        if type(fn).__name__ not in _CAST_OR_VIEW or not fn.next_functions:
            return False
        fn = fn.next_functions[0][0]
    return False


class LocalSavedMeter:
    """Bytes of the tensors autograd saves for backward on this rank, each storage once: a
    DTensor by its local tensor; parameters excluded — a tensor on the storage of one of
    ``model``'s parameters as they are at that moment (FSDP2's all-gathered ones while their
    block runs, the sharded ones otherwise), or a view or cast of a parameter. Unlike
    ``measure.SavedTensorMeter`` the graph stays usable: the step backpropagates through it."""

    def __init__(self, model: torch.nn.Module):
        self.model, self.sizes = model, {}
        self.saved: list[tuple[str, tuple[int, ...], str, int]] = []  # label, shape, dtype, bytes
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)

    def _pack(self, tensor: torch.Tensor) -> torch.Tensor:
        local = _local(tensor)
        ptr, nbytes = local.untyped_storage().data_ptr(), local.untyped_storage().nbytes()
        params = {_local(p).untyped_storage().data_ptr() for p in self.model.parameters()}
        if ptr not in self.sizes and ptr not in params and not _is_parameter(tensor):
            self.sizes[ptr] = nbytes
            label = type(tensor.grad_fn).__name__ if tensor.grad_fn is not None else "leaf"
            self.saved.append((label, tuple(local.shape), str(local.dtype)[6:], nbytes))
        return tensor

    @property
    def bytes(self) -> int:
        return sum(self.sizes.values())

    def __enter__(self):
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc):
        return self._hooks.__exit__(*exc)


def _elements_bytes(tensors) -> int:  # a view of FSDP2's flat gradient buffer: its own size
    return sum(t.numel() * t.element_size() for t in map(_local, tensors))


def held_bytes(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """Local bytes of the parameters, their gradients and AdamW's exp_avg and exp_avg_sq (its
    ``step`` counters are not counted)."""
    params = list(model.parameters())
    moments = [
        state[key] for state in optimizer.state.values() for key in ("exp_avg", "exp_avg_sq") if key in state
    ]
    return {
        "params_bytes": _elements_bytes(params),
        "grads_bytes": _elements_bytes(p.grad for p in params if p.grad is not None),
        "optimizer_bytes": _elements_bytes(moments),
    }


def _send(kind: str, **fields) -> None:
    print(MARK + json.dumps({"kind": kind, **fields}), flush=True)


def _fault(rank: int) -> None:
    """The failure a test asks of this rank (FAULT_ENV): an exception, or a silent exit."""
    target, _, mode = os.environ.get(FAULT_ENV, "").partition(":")
    if target == str(rank):
        if mode == "exit":
            os._exit(3)
        raise RuntimeError(f"failure injected by {FAULT_ENV}")


def train_rank(cfg: ModelConfig, settings: ShardSettings, rank: int, out_dir: str) -> dict:
    """This rank's run (the process group is up): build, parallelize, the first logits (rank 0
    keeps them), the steps; returns its report."""
    from .tensor_parallel import parallelize  # DTensor and FSDP2: only the ranks load them

    start = time.perf_counter()
    dp, tp = check_shard_layout(cfg, settings.strategy, settings.ranks, settings.tp)
    dp_rank, tp_rank = divmod(rank, tp)
    torch.manual_seed(settings.seed)
    model = build_model(cfg, seed=settings.seed)
    loss_fn, loss_context = parallelize(model, settings.strategy, dp, tp)
    optimizer = shard_optimizer(model, settings.lr)
    with torch.no_grad():
        logits = model(batch_ids(cfg, settings, dp_rank, 0)[:, :-1])
        logits = logits.full_tensor() if hasattr(logits, "full_tensor") else logits
    if rank == 0:
        torch.save(logits, Path(out_dir) / "logits.pt")
    _send("ready", rank=rank)
    losses, meter, held = [], LocalSavedMeter(model), {}
    for step in range(settings.steps):
        ids = batch_ids(cfg, settings, dp_rank, step)
        with loss_context():
            with meter if step == 0 else nullcontext():
                loss = loss_fn(model, ids)
            loss.backward()
        optimizer.step()
        if step == 0:
            held = held_bytes(model, optimizer)
        optimizer.zero_grad(set_to_none=True)
        mean = _local(loss).detach().clone()
        dist.all_reduce(mean)  # tp copies are equal: the dp mean
        losses.append(mean.item() / settings.ranks)
        _send("step", rank=rank, step=step + 1, loss=losses[-1])
        _fault(rank)
    return {
        "rank": rank,
        "dp_rank": dp_rank,
        "tp_rank": tp_rank,
        "measured": {**held, "activation_bytes": meter.bytes},
        "losses": losses,
        "saved": meter.saved,
        "wall_s": time.perf_counter() - start,
    }


def child_main() -> None:
    """A rank's process: ``python -c ... <job file> <rank>``; reports on stdout, never a
    traceback on the terminal (SIGINT ignored: the parent kills its ranks)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    job_path, rank = sys.argv[1], int(sys.argv[2])
    try:
        with open(job_path, "rb") as f:
            job = pickle.load(f)
        settings = job["settings"]
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // settings.ranks))
        timeout = timedelta(seconds=settings.timeout_s)
        store = dist.TCPStore(HOST, job["port"], is_master=False, timeout=timeout)
        dist.init_process_group(BACKEND, store=store, rank=rank, world_size=settings.ranks, timeout=timeout)
        _send("result", **train_rank(job["cfg"], settings, rank, job["out_dir"]))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises
        where = traceback.extract_tb(exc.__traceback__)[-1:]
        at = f" (at {Path(where[0].filename).name}:{where[0].lineno})" if where else ""
        _send("error", rank=rank, text=f"{type(exc).__name__}: {exc}{at}")
        os._exit(1)
    try:
        dist.barrier()
        dist.destroy_process_group()
    finally:
        os._exit(0)


# ---- the parent ------------------------------------------------------------------------------
def check_settings(cfg: ModelConfig, settings: ShardSettings) -> tuple[int, int]:
    """(dp, tp), or the refusal (a LabError naming the rule) — before any process starts."""
    if not isinstance(cfg, ModelConfig):
        raise TypeError(f"run_shard needs a ModelConfig, got {type(cfg).__name__}")
    dp, tp = check_shard_layout(cfg, settings.strategy, settings.ranks, settings.tp)
    check_sizes(cfg, settings.seq_len, settings.batch)
    check_count("steps", settings.steps, 1, MAX_SHARD_STEPS)
    check_count("batch", settings.batch, 1, MAX_SHARD_BATCH)
    check_count("seed", settings.seed, 0, MAX_SEED)
    check_real("lr", settings.lr, 0.0, 1.0)
    check_real("timeout_s", settings.timeout_s, 0.0, 3600.0)
    return dp, tp


def _guard(cfg: ModelConfig, settings: ShardSettings, dp: int) -> None:
    """Every rank builds the whole model before it shards it, and the parent trains one copy
    on the global batch: memory for all of them, and the CPU budget for both runs."""
    what = f"{settings.ranks} ranks of {settings.strategy}"
    need = settings.ranks * training_bytes_needed(
        cfg, settings.seq_len, settings.batch, "fp32"
    ) + training_bytes_needed(cfg, settings.seq_len, dp * settings.batch, "fp32")
    check_memory(need, "cpu", what)
    flops = analysis.count_flops(cfg, settings.seq_len, dp * settings.batch).training_step
    check_cpu_budget(
        2 * settings.steps * flops, "cpu", what, "use fewer steps, a smaller batch, sequence or model"
    )


class _Ranks:
    """The rank processes of one run: started, read (one thread per stdout), killed."""

    def __init__(self, settings: ShardSettings, job_path: Path):
        self.settings, self.job_path, self.dir = settings, job_path, job_path.parent
        self.queue: queue.Queue = queue.Queue()
        self.procs: list[subprocess.Popen] = []
        self.results, self.errors, self.ready, self.ended, self.last = {}, {}, set(), set(), ""
        self.steps = {r: 0 for r in range(settings.ranks)}
        root = str(Path(__file__).resolve().parents[2])
        self.env = {
            **os.environ,
            "OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // settings.ranks)),
            "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
        }

    def start(self) -> None:
        for rank in range(self.settings.ranks):
            with open(self.dir / f"stderr-{rank}.txt", "wb") as err:
                proc = subprocess.Popen(
                    [sys.executable, "-c", _CHILD, str(self.job_path), str(rank)],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    env=self.env,
                    start_new_session=True,
                )
            self.procs.append(proc)
            threading.Thread(target=self._read, args=(rank, proc.stdout), daemon=True).start()

    def _read(self, rank: int, stream) -> None:
        for raw in stream:
            line = raw.decode("utf-8", "replace")
            if line.startswith(MARK):
                with suppress(json.JSONDecodeError):  # a line cut short by a kill
                    self.queue.put((rank, json.loads(line[len(MARK) :])))
        self.queue.put((rank, None))  # end of its output: it exited

    def take(self, rank: int, message: dict | None) -> None:
        if message is None:
            self.ended.add(rank)
        elif message["kind"] == "error":
            self.errors[rank] = message["text"]
        elif message["kind"] == "result":
            self.results[rank] = message
        elif message["kind"] == "ready":
            self.ready.add(rank)
            self.last = f"rank {rank}/{self.settings.ranks}: model built and sharded"
        elif message["kind"] == "step":
            self.steps[rank] = message["step"]
            self.last = (
                f"rank {rank}/{self.settings.ranks}: step {message['step']}/"
                f"{self.settings.steps}, loss {message['loss']:.4f}"
            )

    def check(self) -> None:
        """Raise (ExperimentError, naming the rank) when a rank failed or died unreported."""
        for rank in sorted(self.errors):
            raise ExperimentError(f"rank {rank} of {self.settings.ranks} failed: {self.errors[rank]}")
        for rank in sorted(self.ended - set(self.results)):
            code = self.procs[rank].wait()
            tail = (self.dir / f"stderr-{rank}.txt").read_text("utf-8", "replace")[-800:]
            raise ExperimentError(
                f"rank {rank} of {self.settings.ranks} exited (code {code}) "
                f"before reporting: {' '.join(tail.split()) or 'no output'}"
            )

    def fraction(self) -> float:
        units = self.settings.ranks * (self.settings.steps + 1)
        return 0.9 * (len(self.ready) + sum(self.steps.values())) / units

    def kill(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                with suppress(ProcessLookupError):  # its own session: it and anything it began
                    os.killpg(proc.pid, signal.SIGKILL)
        for proc in self.procs:
            proc.wait()
            proc.stdout.close()


def _watch(ranks: _Ranks, progress: Progress | None) -> None:
    """Wait for every rank's report, calling ``progress`` every PROGRESS_EVERY_S."""
    settings, start = ranks.settings, time.monotonic()
    last_call = -1.0
    while len(ranks.results) < settings.ranks:
        try:
            ranks.take(*ranks.queue.get(timeout=0.1))
        except queue.Empty:
            pass
        ranks.check()
        now = time.monotonic()
        if now - start > settings.timeout_s:
            waiting = [r for r in range(settings.ranks) if r not in ranks.results]
            raise ExperimentError(
                f"the {settings.strategy} run passed its time limit of {settings.timeout_s:g} s: "
                f"rank(s) {', '.join(map(str, waiting))} did not finish (at step "
                f"{', '.join(str(ranks.steps[r]) for r in waiting)} of {settings.steps})"
            )
        if progress is not None and now - last_call >= PROGRESS_EVERY_S:
            last_call = now
            progress(
                ranks.fraction(),
                ranks.last or f"starting {settings.ranks} {BACKEND} processes ({now - start:.0f} s)",
            )
    end = time.monotonic() + GRACE_S
    while any(p.poll() is None for p in ranks.procs) and time.monotonic() < end:
        time.sleep(0.05)


def launch(cfg: ModelConfig, settings: ShardSettings, progress: Progress | None) -> tuple[dict, torch.Tensor]:
    """Run the ranks: (their reports by rank, rank 0's first logits). Every rank is killed
    before anything propagates."""
    with tempfile.TemporaryDirectory(prefix="llama-lab-shard-") as tmp:
        timeout = timedelta(seconds=settings.timeout_s)
        store = dist.TCPStore(HOST, 0, is_master=True, wait_for_workers=False, timeout=timeout)
        job_path = Path(tmp) / "job.pkl"
        with open(job_path, "wb") as f:
            pickle.dump({"cfg": cfg, "settings": settings, "port": store.port, "out_dir": tmp}, f)
        ranks = _Ranks(settings, job_path)
        try:
            ranks.start()
            _watch(ranks, progress)
        finally:
            ranks.kill()
            del store
        logits = torch.load(Path(tmp) / "logits.pt", weights_only=True)
    return ranks.results, logits


def reference_run(
    cfg: ModelConfig, settings: ShardSettings, dp: int, progress: Progress | None = None
) -> tuple[list[float], torch.Tensor]:
    """The same steps in this process on the global batch (the dp ranks' batches one after
    another): (losses, the first logits of data-parallel rank 0's batch)."""
    if progress is not None:
        progress(0.9, "single-process reference: building the model")
    torch.manual_seed(settings.seed)
    model = build_model(cfg, seed=settings.seed)
    with torch.no_grad():
        logits = model(batch_ids(cfg, settings, 0, 0)[:, :-1])
    optimizer, losses = shard_optimizer(model, settings.lr), []
    for step in range(settings.steps):
        ids = torch.cat([batch_ids(cfg, settings, r, step) for r in range(dp)])
        loss = model.loss(ids)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        if progress is not None:
            progress(
                0.9 + 0.1 * (step + 1) / settings.steps,
                f"single-process reference: step {step + 1}/{settings.steps}, loss {losses[-1]:.4f}",
            )
    return losses, logits


def _rel(measured: float, predicted: float | None) -> float | None:
    if predicted is None or predicted == measured:
        return None if predicted is None else 0.0
    return abs(measured - predicted) / predicted if predicted else float("inf")


def _reports(
    cfg: ModelConfig, settings: ShardSettings, dp: int, tp: int, results: dict
) -> tuple[RankReport, ...]:
    predicted = rank_shards(cfg, settings.strategy, dp, tp, settings.seq_len, settings.batch)
    return tuple(
        RankReport(
            rank=r,
            dp_rank=results[r]["dp_rank"],
            tp_rank=results[r]["tp_rank"],
            measured=results[r]["measured"],
            predicted=predicted[r].figures(),
            losses=tuple(results[r]["losses"]),
            wall_s=results[r]["wall_s"],
            saved=tuple(tuple(s) for s in results[r]["saved"]),
        )
        for r in range(settings.ranks)
    )


def run_settings(cfg: ModelConfig, settings: ShardSettings, progress: Progress | None = None) -> ShardResult:
    """``run_shard`` with its settings gathered."""
    start = time.perf_counter()
    dp, tp = check_settings(cfg, settings)
    _guard(cfg, settings, dp)
    results, logits = launch(cfg, settings, progress)
    single, single_logits = reference_run(cfg, settings, dp, progress)
    ranks = _reports(cfg, settings, dp, tp, results)
    errors = [_rel(r.measured[k], r.predicted[k]) for r in ranks for k in BYTE_FIELDS[:3]]
    activation = [_rel(r.measured["activation_bytes"], r.predicted["activation_bytes"]) for r in ranks]
    sharded = ranks[0].losses
    diffs = [abs(a - b) for a, b in zip(single, sharded)]
    return ShardResult(
        strategy=settings.strategy,
        dp=dp,
        tp=tp,
        steps=settings.steps,
        seq_len=settings.seq_len,
        batch=settings.batch,
        seed=settings.seed,
        ranks=ranks,
        max_rel_error=max(errors),
        activation_max_rel_error=None if None in activation else max(activation),
        loss_single=tuple(single),
        loss_sharded=sharded,
        max_loss_diff=max(diffs),
        max_loss_rel_diff=max(d / abs(s) for d, s in zip(diffs, single)),
        logits_max_diff=(logits - single_logits).abs().max().item(),
        backend=BACKEND,
        wall_s=time.perf_counter() - start,
    )


def run_shard(
    cfg: ModelConfig, ranks: int, strategy: str, *, progress: Progress | None = None, **options
) -> ShardResult:
    """``steps`` AdamW steps of ``cfg`` on ``ranks`` local gloo processes under ``strategy``
    ('fsdp', 'tp', 'fsdp+tp'), each rank's measured bytes beside the prediction, the losses
    beside a single-process run. ``options``: the other ``ShardSettings`` fields (steps,
    seq_len, batch, seed, tp, lr, timeout_s). Refusals are LabErrors naming the rule."""
    settings = settings_from(ShardSettings, {"ranks": ranks, "strategy": strategy, **options}, "run_shard")
    return run_settings(cfg, settings, progress)
