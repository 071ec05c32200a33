"""Real training steps on R local ``torch.distributed`` processes (gloo on the CPU): PyTorch's
FSDP2 (``fully_shard``), our tensor-parallel plan (``train.tensor_parallel``) or both on a 2-D
(dp, tp) mesh. Every rank builds the same model from the seed, runs a few AdamW steps and
reports the local bytes of its parameters, gradients and AdamW moments and the bytes autograd
saved in one forward with the loss, beside ``analysis.shards``' prediction; the parent runs the
same steps in one process on the global batch and compares the losses.

The ranks are ``torch.multiprocessing`` processes (the spawn start method), each in its own
session with SIGINT ignored and its output in a file, brought together by a TCPStore the parent
serves on a free port; each reports on its own pipe. Whatever raises in the parent — a failed or
silent rank, the time limit, KeyboardInterrupt, the progress callback (the app's Stop button) —
kills every rank before it propagates. A rank runs ``launch``'s ``entry`` (``train_rank``):
the seam where the tests make one fail. Unlike a plain spawned process, a rank does not import
the parent's main module again (``_main_not_rerun``): not the app's page script under
Streamlit, not a user's script that calls ``run_shard``.
"""

from __future__ import annotations

import importlib.machinery
import io
import os
import signal
import sys
import tempfile
import time
import traceback
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from datetime import timedelta
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing

from .. import analysis
from ..analysis.shards import BYTE_FIELDS, check_shard_layout, rank_shards
from ..config import ModelConfig, require_decoder_only
from ..errors import ExperimentError
from ..model import build_model
from ..runtime.memory import check_memory
from ..units import Progress, plain_fields
from .budgets import MAX_SEED, check_count, check_cpu_budget, check_real, check_sizes, training_bytes_needed
from .measure import parameter_behind

HOST = "127.0.0.1"
BACKEND = "gloo"
MAX_SHARD_STEPS, MAX_SHARD_BATCH = 50, 64
GRACE_S = 10.0  # after its report a rank has this long to exit
PROGRESS_EVERY_S = 0.25


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

    def check(self, cfg: ModelConfig) -> tuple[int, int]:
        """(dp, tp) of this run of ``cfg``, or the refusal (a LabError naming the rule) —
        before any process starts."""
        if not isinstance(cfg, ModelConfig):
            raise TypeError(f"run_shard needs a ModelConfig, got {type(cfg).__name__}")
        dp, tp = check_shard_layout(cfg, self.strategy, self.ranks, self.tp)
        check_sizes(cfg, self.seq_len, self.batch)
        check_count("steps", self.steps, 1, MAX_SHARD_STEPS)
        check_count("batch", self.batch, 1, MAX_SHARD_BATCH)
        check_count("seed", self.seed, 0, MAX_SEED)
        check_real("lr", self.lr, 0.0, 1.0)
        check_real("timeout_s", self.timeout_s, 0.0, 3600.0)
        return dp, tp


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


class LocalSavedMeter:
    """Bytes of the tensors autograd saves for backward on this rank, each storage once: a
    DTensor by its local tensor; parameters excluded — a tensor on the storage of one of
    ``model``'s parameters as they are at that moment (FSDP2's all-gathered ones while their
    block runs, the sharded ones otherwise), or a view or cast of a parameter. Unlike
    ``measure.SavedTensorMeter`` the graph stays usable: the step backpropagates through it."""

    def __init__(self, model: torch.nn.Module):
        self.model, self.sizes = model, dict[int, int]()
        self.saved: list[tuple[str, tuple[int, ...], str, int]] = []  # label, shape, dtype, bytes
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)

    def _pack(self, tensor: torch.Tensor) -> torch.Tensor:
        local = _local(tensor)
        ptr, nbytes = local.untyped_storage().data_ptr(), local.untyped_storage().nbytes()
        params = {_local(p).untyped_storage().data_ptr() for p in self.model.parameters()}
        if ptr not in self.sizes and ptr not in params and not parameter_behind(tensor):
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


Send = Callable[..., None]  # a rank's report: send(kind, **fields) to the parent
RankEntry = Callable[[ModelConfig, ShardSettings, int, Send], dict]  # what a rank runs


def train_rank(cfg: ModelConfig, settings: ShardSettings, rank: int, send: Send) -> dict:
    """This rank's run (the process group is up): build, parallelize, the first logits (rank 0
    returns them, ``torch.save``d), the steps, each reported with ``send``; returns its report."""
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
    first: dict = {}
    if rank == 0:  # bytes, not a tensor: a pickled tensor would point at this process's memory
        buffer = io.BytesIO()
        torch.save(logits, buffer)
        first["logits"] = buffer.getvalue()
    send("ready", rank=rank)
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
        send("step", rank=rank, step=step + 1, loss=losses[-1])
    return {
        "rank": rank,
        "dp_rank": dp_rank,
        "tp_rank": tp_rank,
        "measured": {**held, "activation_bytes": meter.bytes},
        "losses": losses,
        "saved": meter.saved,
        "wall_s": time.perf_counter() - start,
        **first,
    }


def _exit(code: int) -> None:
    """End a rank at once (no interpreter teardown: gloo's threads), its output flushed."""
    for stream in (sys.stdout, sys.stderr):
        with suppress(Exception):
            stream.flush()
    os._exit(code)


def _rank_process(
    entry: RankEntry,
    cfg: ModelConfig,
    settings: ShardSettings,
    rank: int,
    port: int,
    conn: Connection,
    log: str,
) -> None:
    """A rank's process (the target ``_Ranks.start`` spawns): SIGINT ignored (it started with
    SIGINT blocked, see ``_sigint_blocked``: the parent kills its ranks), its own session, its
    stdout and stderr to ``log``; reports on ``conn`` as dicts, never a traceback on the
    terminal; ends with ``os._exit``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    os.setsid()
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    for std in (1, 2):
        os.dup2(out, std)
    os.close(out)

    def send(kind: str, **fields) -> None:
        conn.send({"kind": kind, **fields})

    try:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // settings.ranks))
        timeout = timedelta(seconds=settings.timeout_s)
        store = dist.TCPStore(HOST, port, is_master=False, timeout=timeout)
        dist.init_process_group(BACKEND, store=store, rank=rank, world_size=settings.ranks, timeout=timeout)
        send("result", **entry(cfg, settings, rank, send))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises
        where = traceback.extract_tb(exc.__traceback__)[-1:]
        at = f" (at {Path(where[0].filename).name}:{where[0].lineno})" if where else ""
        with suppress(Exception):  # the parent may be gone
            send("error", rank=rank, text=f"{type(exc).__name__}: {exc}{at}")
        _exit(1)
    try:
        dist.barrier()
        dist.destroy_process_group()
    finally:
        _exit(0)


# ---- the parent ------------------------------------------------------------------------------
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


@contextmanager
def _sigint_blocked() -> Iterator[None]:
    """SIGINT blocked in this thread while a rank starts: the rank inherits the mask, so a
    Ctrl-C before it ignores SIGINT stays pending, then is dropped — no traceback of its.
    (multiprocessing's resource tracker, which spawn starts with the first process, unblocks
    SIGINT after its own start: started first.)"""
    resource_tracker.ensure_running()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@contextmanager
def _main_not_rerun() -> Iterator[None]:
    """While a rank starts, the parent's ``__main__`` presents itself as ``llama_lab.__main__``.
    A spawned process first imports the parent's main module again, by its path or by its
    module name (``multiprocessing.spawn.get_preparation_data``); under Streamlit that is the
    page script, which each rank would run once more without a session (seconds, and the app's
    warnings on the server's stderr), and a user's script without the ``__main__`` guard would
    start ranks of its own. A main module named ``<package>.__main__`` is never re-imported,
    so the ranks import only what unpickling their target needs. The real one is put back
    unless something (another Streamlit run) replaced it meanwhile."""
    real = sys.modules["__main__"]
    stand_in = types.ModuleType("__main__")
    stand_in.__spec__ = importlib.machinery.ModuleSpec("llama_lab.__main__", None)
    sys.modules["__main__"] = stand_in
    try:
        yield
    finally:
        if sys.modules.get("__main__") is stand_in:
            sys.modules["__main__"] = real


class _Ranks:
    """The rank processes of one run: started (spawned, each with its own pipe), read, killed.
    The first failure to arrive (an error report, or a rank that ended unreported) is the run's:
    the other ranks' errors are mostly its echoes (a peer gone from gloo)."""

    def __init__(self, settings: ShardSettings, entry: RankEntry, log_dir: Path):
        self.settings, self.entry, self.dir = settings, entry, log_dir
        self.procs: list[BaseProcess] = []
        self.conns: dict[Connection, int] = {}  # the read end of each rank's pipe, till its end
        self.results: dict[int, dict] = {}
        self.ready: set[int] = set()
        self.failure: str | None = None
        self.last = ""
        self.steps = {r: 0 for r in range(settings.ranks)}

    def _log(self, rank: int) -> Path:
        return self.dir / f"rank-{rank}.txt"

    def start(self, cfg: ModelConfig, port: int) -> None:
        context = torch.multiprocessing.get_context("spawn")
        for rank in range(self.settings.ranks):
            reader, writer = context.Pipe(duplex=False)
            self.conns[reader] = rank
            proc = context.Process(
                target=_rank_process,
                args=(self.entry, cfg, self.settings, rank, port, writer, str(self._log(rank))),
                name=f"llama-lab-shard-rank-{rank}",
                daemon=True,
            )
            try:
                with _sigint_blocked(), _main_not_rerun():  # a Ctrl-C meanwhile lands once listed
                    proc.start()
                    self.procs.append(proc)
            finally:
                writer.close()  # the rank holds the only write end: its exit is our end of file

    def poll(self, timeout: float) -> None:
        """Take what the ranks sent within ``timeout`` s (a message, or the end of a pipe)."""
        for conn in wait(list(self.conns), timeout):
            assert isinstance(conn, Connection)
            rank = self.conns[conn]
            try:
                message = conn.recv()
            except (EOFError, OSError):  # it exited (a message cut short by a kill too)
                del self.conns[conn]
                conn.close()
                message = None
            self.take(rank, message)

    def take(self, rank: int, message: dict | None) -> None:
        n = self.settings.ranks
        if message is None:
            if rank not in self.results and self.failure is None:
                self.failure = self._ended(rank)
        elif message["kind"] == "error":
            self.failure = self.failure or f"rank {rank} of {n} failed: {message['text']}"
        elif message["kind"] == "result":
            self.results[rank] = message
        elif message["kind"] == "ready":
            self.ready.add(rank)
            self.last = f"rank {rank}/{n}: model built and sharded"
        elif message["kind"] == "step":
            self.steps[rank] = message["step"]
            self.last = (
                f"rank {rank}/{n}: step {message['step']}/{self.settings.steps}, loss {message['loss']:.4f}"
            )

    def _ended(self, rank: int) -> str:
        """Why ``rank`` ended unreported: its exit code and the end of its output."""
        proc = self.procs[rank]
        proc.join(GRACE_S)
        try:
            said = " ".join(self._log(rank).read_text("utf-8", "replace")[-800:].split()) or "no output"
        except FileNotFoundError:  # before _rank_process ran: spawn's traceback is on our stderr
            said = (
                "it died while starting (see this process's stderr; a script that calls run_shard at "
                "its top level needs the 'if __name__ == \"__main__\":' guard: spawned ranks import "
                "the main module)"
            )
        return f"rank {rank} of {self.settings.ranks} exited (code {proc.exitcode}) before reporting: {said}"

    def check(self) -> None:
        """Raise (ExperimentError, naming the rank) when a rank failed or died unreported."""
        if self.failure is not None:
            raise ExperimentError(self.failure)

    def fraction(self) -> float:
        units = self.settings.ranks * (self.settings.steps + 1)
        return 0.9 * (len(self.ready) + sum(self.steps.values())) / units

    def kill(self) -> None:
        for proc in self.procs:
            if proc.exitcode is None and proc.pid is not None:  # alive (not reaped: its pid is its)
                with suppress(ProcessLookupError):  # its own session: it and anything it began
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.kill()  # (before its setsid there is no such session yet)
        for proc in self.procs:
            proc.join()
            proc.close()
        for conn in self.conns:
            conn.close()
        self.conns.clear()


def _watch(ranks: _Ranks, progress: Progress | None) -> None:
    """Wait for every rank's report, calling ``progress`` every PROGRESS_EVERY_S."""
    settings, start = ranks.settings, time.monotonic()
    last_call = -1.0
    while len(ranks.results) < settings.ranks:
        ranks.poll(0.1)
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
    while any(p.is_alive() for p in ranks.procs) and time.monotonic() < end:
        time.sleep(0.05)


def launch(
    cfg: ModelConfig,
    settings: ShardSettings,
    progress: Progress | None = None,
    *,
    entry: RankEntry = train_rank,
) -> tuple[dict, torch.Tensor]:
    """Run ``entry`` on every rank (``train_rank``; a test passes a failing one — a module-level
    function, as the spawned ranks import it by name): (their reports by rank, rank 0's first
    logits). Every rank is killed before anything propagates."""
    with tempfile.TemporaryDirectory(prefix="llama-lab-shard-") as tmp:
        timeout = timedelta(seconds=settings.timeout_s)
        store = dist.TCPStore(HOST, 0, is_master=True, wait_for_workers=False, timeout=timeout)
        ranks = _Ranks(settings, entry, Path(tmp))
        try:
            ranks.start(cfg, store.port)
            _watch(ranks, progress)
        finally:
            ranks.kill()
            del store
    logits = torch.load(io.BytesIO(ranks.results[0]["logits"]), weights_only=True)
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


def _rel(measured: float, predicted: float) -> float:
    if predicted == measured:
        return 0.0
    return abs(measured - predicted) / predicted if predicted else float("inf")


def _activation_max_rel(ranks: tuple[RankReport, ...]) -> float | None:
    """The largest relative error of the ranks' activation bytes; None where a rank has no
    prediction (``RankShard.activation_bytes``)."""
    pairs = [(r.measured["activation_bytes"], r.predicted["activation_bytes"]) for r in ranks]
    if any(predicted is None for _, predicted in pairs):
        return None
    return max(_rel(measured, predicted) for measured, predicted in pairs)


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


def run_shard(cfg: ModelConfig, settings: ShardSettings, *, progress: Progress | None = None) -> ShardResult:
    """``settings.steps`` AdamW steps of ``cfg`` on ``settings.ranks`` local gloo processes under
    ``settings.strategy`` ('fsdp', 'tp', 'fsdp+tp'), each rank's measured bytes beside the
    prediction, the losses beside a single-process run. Refusals (``ShardSettings.check``, the
    memory and CPU budgets) are LabErrors naming the rule, before any process starts."""
    if not isinstance(settings, ShardSettings):
        raise TypeError(f"run_shard needs a ShardSettings, got {type(settings).__name__}")
    start = time.perf_counter()
    dp, tp = settings.check(cfg)
    require_decoder_only(cfg, "sharded training")
    _guard(cfg, settings, dp)
    results, logits = launch(cfg, settings, progress)
    single, single_logits = reference_run(cfg, settings, dp, progress)
    ranks = _reports(cfg, settings, dp, tp, results)
    errors = [_rel(r.measured[k], r.predicted[k]) for r in ranks for k in BYTE_FIELDS[:3]]
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
        activation_max_rel_error=_activation_max_rel(ranks),
        loss_single=tuple(single),
        loss_sharded=sharded,
        max_loss_diff=max(diffs),
        max_loss_rel_diff=max(d / abs(s) for d, s in zip(diffs, single)),
        logits_max_diff=(logits - single_logits).abs().max().item(),
        backend=BACKEND,
        wall_s=time.perf_counter() - start,
    )
