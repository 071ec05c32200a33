"""Knowledge distillation, live (Hinton, Vinyals and Dean 2015, "Distilling the Knowledge in a
Neural Network", arXiv:1503.02531): a small student learns from a larger teacher's softened
next-token distribution as well as from the labels,

    loss = α · T² · KL(softmax(z_teacher / T) ‖ softmax(z_student / T)) + (1 − α) · CE(labels),

(the T² keeps the soft term's gradients the same size as T changes: §2 of the paper), beside the
same student trained from scratch with cross-entropy alone on the same token batches from the
same initial weights, over several seeds. The teacher is the lab's own small copy of a preset's
recipe, trained first by the lab's loop on the built-in text (honest and fast: seconds on a
CPU, and the teacher's validation loss is measured on the same validation batches as the
students'). The student is smaller, so cheaper to serve: its parameters, decode FLOPs and KV
bytes per token are the lab's counts (``analysis``). The soft targets carry what one-hot labels
cannot: their mean entropy (nats) against 0 for a one-hot label.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Generator, TypedDict

import pandas as pd
import plotly.graph_objects as go
import torch
import torch.nn.functional as F

from ..analysis import count_flops, count_params
from ..analysis.flops import decode_flops
from ..analysis.kv import kv_cache_bytes_per_token
from ..config import PRESETS, ModelConfig, live_config, require_decoder_only
from ..errors import ExperimentError
from ..figures.common import GROUP_PALETTE, Figure, Table, band_traces, layout_figure
from ..model import CausalLM, build_model
from ..runtime.devices import pick_device
from ..runtime.precision import make_precision
from ..train.budgets import check_real
from ..train.data import TokenData, batches, get_batch, load_builtin
from ..train.loop import TrainSettings, evaluate, iter_train, run_to_end
from ..train.step import LossFn, Trainee, make_optimizer, next_token_loss, training_step
from ..units import Progress, json_float, plural, sub_progress
from .registry import ExperimentKind, register
from .seeds import band, median_list, median_of, seed_list


class DistillDefaults(TypedDict):
    teacher: str
    student: str
    teacher_d: int
    teacher_layers: int
    student_d: int
    student_layers: int
    steps: int
    teacher_steps_factor: int
    seeds: int
    temperature: float
    alpha: float
    lr: float
    seq_len: int
    batch: int
    eval_every: int
    eval_batches: int


# The default pair: the seed demo's recipe, a 2-block teacher of width 64 and a 1-block student
# of width 32 (4.4× fewer parameters). The teacher is trained 2 × the students' 200 AdamW steps on
# the built-in text: a teacher has seen more than its student (a 4-block teacher trained as long
# as its students ended at 2.46, no better than the student from scratch at 2.45: nothing to
# teach). T = 1, measured here on one seed (teacher 2.26): T = 2 left the distilled student behind
# the one from scratch (2.53 against 2.45), T = 1 ahead (2.42). Hinton et al. found that a much
# smaller student prefers lower temperatures (MNIST: 2.5 to 4 for 30 hidden units, above 8 for
# 300); this one, far smaller again, does best at T = 1. About a minute on two CPU cores.
DISTILL_DEFAULTS = DistillDefaults(
    teacher="seed-demo",
    student="seed-demo",
    teacher_d=64,
    teacher_layers=2,
    student_d=32,
    student_layers=1,
    steps=200,
    teacher_steps_factor=2,
    seeds=2,
    temperature=1.0,
    alpha=0.5,
    lr=3e-3,
    seq_len=64,
    batch=8,
    eval_every=20,
    eval_batches=4,
)
D = DISTILL_DEFAULTS
VAL_SEED = 1_000_003  # the validation batches: the same for the teacher and every student
KV_DTYPE = "bf16"  # the decode cost is counted as a model is served: weights and cache in bf16


# ---- the loss (Hinton et al. 2015) -----------------------------------------------------------
def soft_target_kl(
    student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float
) -> torch.Tensor:
    """KL(softmax(teacher / T) ‖ softmax(student / T)), the mean over positions; logits (…, V)."""
    V = student_logits.shape[-1]
    log_p_student = F.log_softmax(student_logits.reshape(-1, V).float() / temperature, dim=-1)
    log_p_teacher = F.log_softmax(teacher_logits.reshape(-1, V).float() / temperature, dim=-1)
    # batchmean: the sum over the vocabulary, the mean over the B·T positions
    return F.kl_div(log_p_student, log_p_teacher, log_target=True, reduction="batchmean")


def distillation_loss(
    student_logits: torch.Tensor,
    teacher_logits: torch.Tensor,
    targets: torch.Tensor,
    temperature: float,
    alpha: float,
) -> torch.Tensor:
    """α · T² · KL(soft targets ‖ student at T) + (1 − α) · cross-entropy on the labels."""
    soft = soft_target_kl(student_logits, teacher_logits, temperature)
    hard = next_token_loss(student_logits, targets)
    return alpha * temperature**2 * soft + (1 - alpha) * hard


def distilled_loss_fn(teacher_logits: torch.Tensor, temperature: float, alpha: float) -> LossFn:
    """The loss a distilled student's ``training_step`` backpropagates on one batch."""

    def loss(model: torch.nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return distillation_loss(model(inputs), teacher_logits, targets, temperature, alpha)

    return loss


def soft_target_entropy(teacher_logits: torch.Tensor, temperature: float) -> float:
    """Mean entropy (nats) of softmax(teacher / T) over positions; a one-hot label's is 0."""
    V = teacher_logits.shape[-1]
    log_p = F.log_softmax(teacher_logits.reshape(-1, V).float() / temperature, dim=-1)
    return float(-(log_p.exp() * log_p).sum(-1).mean())


# ---- sizes and serving cost ------------------------------------------------------------------
@dataclass(frozen=True)
class ModelCost:
    """A live model's size and what one decoded token costs it (the lab's counts)."""

    config: dict[str, Any]  # ModelConfig.to_dict()
    params: int  # analysis.count_params(cfg).total
    decode_flops_per_token: float  # analysis decode_flops at the training context length
    kv_bytes_per_token: int  # analysis kv_cache_bytes_per_token at KV_DTYPE


def model_cost(cfg: ModelConfig, context_len: int) -> ModelCost:
    return ModelCost(
        config=cfg.to_dict(),
        params=count_params(cfg).total,
        decode_flops_per_token=decode_flops(cfg, context_len).per_token,
        kv_bytes_per_token=kv_cache_bytes_per_token(cfg, KV_DTYPE),
    )


# ---- the run ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class DistillSettings:
    steps: int = D["steps"]
    teacher_steps: int | None = None  # None: teacher_steps_factor × steps
    seeds: int = D["seeds"]
    temperature: float = D["temperature"]
    alpha: float = D["alpha"]
    lr: float = D["lr"]
    seq_len: int = D["seq_len"]
    batch: int = D["batch"]
    eval_every: int = D["eval_every"]
    eval_batches: int = D["eval_batches"]
    device: str = "cpu"
    teacher_d: int = D["teacher_d"]
    teacher_layers: int = D["teacher_layers"]
    student_d: int = D["student_d"]
    student_layers: int = D["student_layers"]

    def check(self) -> None:
        check_real("temperature", self.temperature, 0.0, 100.0)
        if not 0.0 <= self.alpha <= 1.0:
            raise ExperimentError(f"alpha={self.alpha} must be between 0 and 1 (the soft term's weight)")

    @property
    def teacher_steps_run(self) -> int:
        return (
            self.teacher_steps if self.teacher_steps is not None else D["teacher_steps_factor"] * self.steps
        )

    def train_settings(self, seed: int, steps: int | None = None) -> TrainSettings:
        """The lab's TrainSettings for one model (a student's schedule; ``steps``: the teacher's)."""
        return TrainSettings(
            steps=steps or self.steps,
            lr=self.lr,
            seq_len=self.seq_len,
            batch=self.batch,
            seed=seed,
            device=self.device,
            eval_every=self.eval_every,
            eval_batches=self.eval_batches,
        )


@dataclass(frozen=True)
class DistillRun:
    teacher: ModelCost
    student: ModelCost
    temperature: float
    alpha: float
    steps: int
    teacher_steps: int
    seeds: list[int]
    teacher_val_loss: float
    val_step: list[int]  # updates done when the students' validation loss was taken
    distilled_val: list[list[float]]  # per seed, per val_step
    scratch_val: list[list[float]]
    soft_target_entropy: float  # nats, of softmax(teacher / T) on the validation batches
    teacher_entropy_t1: float  # the same at T = 1
    vocab_size: int
    wall_s: float

    @property
    def distilled_final(self) -> list[float]:
        return [curve[-1] for curve in self.distilled_val]

    @property
    def scratch_final(self) -> list[float]:
        return [curve[-1] for curve in self.scratch_val]

    @property
    def gain(self) -> float | None:
        """Median over seeds of scratch − distilled final validation loss (> 0: distillation helped)."""
        return median_of([s - d for s, d in zip(self.scratch_final, self.distilled_final)])

    def to_dict(self) -> dict:
        def student(curves: list[list[float]]) -> dict:
            return {
                "params": self.student.params,
                "val_loss": [json_float(c[-1]) for c in curves],
                "val_curves": [[json_float(v) for v in c] for c in curves],
                "decode_flops_per_token": self.student.decode_flops_per_token,
                "kv_bytes_per_token": self.student.kv_bytes_per_token,
            }

        return {
            "teacher": {
                "params": self.teacher.params,
                "val_loss": json_float(self.teacher_val_loss),
                "steps": self.teacher_steps,
                "decode_flops_per_token": self.teacher.decode_flops_per_token,
                "kv_bytes_per_token": self.teacher.kv_bytes_per_token,
                "config": self.teacher.config,
            },
            "student_distilled": student(self.distilled_val),
            "student_scratch": student(self.scratch_val),
            "student_config": self.student.config,
            "seeds": self.seeds,
            "steps": self.steps,
            "val_step": self.val_step,
            "temperature": self.temperature,
            "alpha": self.alpha,
            "soft_target_entropy": self.soft_target_entropy,
            "teacher_entropy_t1": self.teacher_entropy_t1,
            "one_hot_entropy": 0.0,
            "uniform_entropy": math.log(self.vocab_size),
            "median_gain": json_float(self.gain),
            "wall_s": self.wall_s,
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per seed: the two students' final validation losses."""
        return pd.DataFrame(
            {
                "seed": self.seeds,
                "distilled val loss": self.distilled_final,
                "scratch val loss": self.scratch_final,
                "scratch − distilled": [s - d for s, d in zip(self.scratch_final, self.distilled_final)],
            }
        )

    def sizes_frame(self) -> pd.DataFrame:
        """Teacher and student side by side: parameters, decode FLOPs and KV bytes per token."""
        rows = []
        for name, cost, val in (
            ("teacher", self.teacher, [self.teacher_val_loss]),
            ("student, distilled", self.student, self.distilled_final),
            ("student, from scratch", self.student, self.scratch_final),
        ):
            rows.append(
                {
                    "model": name,
                    "blocks": cost.config["n_layers"],
                    "d_model": cost.config["d_model"],
                    "parameters": cost.params,
                    "decode FLOPs / token": cost.decode_flops_per_token,
                    f"KV bytes / token ({KV_DTYPE})": cost.kv_bytes_per_token,
                    "val loss (median)": statistics.median(val),
                }
            )
        return pd.DataFrame(rows)

    def soft_targets_frame(self) -> pd.DataFrame:
        """What one position's target carries: mean entropy in nats on the validation batches."""
        return pd.DataFrame(
            {
                "target": [
                    f"teacher's softmax at T = {self.temperature:g}",
                    "teacher's softmax at T = 1",
                    "one-hot label",
                    f"uniform over {self.vocab_size} bytes",
                ],
                "entropy (nats)": [
                    self.soft_target_entropy,
                    self.teacher_entropy_t1,
                    0.0,
                    math.log(self.vocab_size),
                ],
            }
        )


def pair_configs(teacher: str, student: str, s: DistillSettings) -> tuple[ModelConfig, ModelConfig]:
    """The live copies of the two presets' recipes (byte-level vocabulary 256 for both)."""
    for name in (teacher, student):
        if name not in PRESETS:
            raise ExperimentError(f"preset {name!r} must be one of {', '.join(PRESETS)}")
        require_decoder_only(PRESETS[name], "distillation")
    return (
        live_config(PRESETS[teacher], s.teacher_layers, s.teacher_d, s.seq_len),
        live_config(PRESETS[student], s.student_layers, s.student_d, s.seq_len),
    )


def val_batches(data: TokenData, s: DistillSettings, device: torch.device) -> list[tuple[torch.Tensor, ...]]:
    generator = torch.Generator().manual_seed(VAL_SEED)
    return [
        tuple(t.to(device) for t in get_batch(data.val, s.batch, s.seq_len, generator))
        for _ in range(s.eval_batches)
    ]


def student_pair(
    cfg: ModelConfig,
    teacher: CausalLM,
    s: DistillSettings,
    seed: int,
    data: TokenData,
    val: list[tuple[torch.Tensor, ...]],
    progress: Progress | None = None,
) -> Generator[dict, None, tuple[list[float], list[float]]]:
    """Two students from the same initial weights (``seed``), one distilled from ``teacher``
    and one from scratch, each updated by the lab's ``training_step`` on the same batch every
    step; yields a dict per step, returns their validation curves (at 0 and every eval_every)."""
    ts = s.train_settings(seed)
    ts.check(cfg)
    dev = next(teacher.parameters()).device
    precision = make_precision("fp32", dev)
    models = [build_model(cfg, device=dev, seed=seed) for _ in range(2)]  # distilled, scratch
    trainees = [Trainee(m, make_optimizer(m, s.lr, ts.weight_decay), precision) for m in models]
    curves: list[list[float]] = [[evaluate(m, val, precision)] for m in models]
    stream = batches(data, s.batch, s.seq_len, torch.Generator().manual_seed(seed))
    for step in range(s.steps):
        inputs, targets = (t.to(dev) for t in next(stream))
        with torch.no_grad():
            teacher_logits = teacher(inputs)  # (B, T, V)

        lr = ts.lr_at(step)
        for trainee in trainees:
            for group in trainee.optimizer.param_groups:
                group["lr"] = lr
        loss_d, _, _ = training_step(
            trainees[0],
            inputs,
            targets,
            loss_fn=distilled_loss_fn(teacher_logits, s.temperature, s.alpha),
            measure_grad_norm=False,
        )
        loss_s, _, _ = training_step(trainees[1], inputs, targets, measure_grad_norm=False)
        record: dict[str, Any] = {
            "seed": seed,
            "step": step,
            "distilled_loss": json_float(loss_d),
            "scratch_loss": json_float(loss_s),
            "lr": lr,
        }
        if (step + 1) % s.eval_every == 0 or step + 1 == s.steps:
            for curve, m in zip(curves, models):
                curve.append(evaluate(m, val, precision))
            record["distilled_val_loss"] = json_float(curves[0][-1])
            record["scratch_val_loss"] = json_float(curves[1][-1])
        if progress:
            progress((step + 1) / s.steps, f"step {step + 1}/{s.steps}, distilled loss {loss_d:.4g}")
        yield record
    return curves[0], curves[1]


def iter_distill(
    teacher: str = D["teacher"],
    student: str = D["student"],
    settings: DistillSettings | None = None,
    data: TokenData | None = None,
    progress: Progress | None = None,
) -> Generator[dict, None, DistillRun]:
    """Train the teacher, then a distilled and a scratch student per seed; yields a dict per
    step (the teacher's steps carry ``"model": "teacher"``), returns the DistillRun."""
    s = settings or DistillSettings()
    s.check()
    seeds = seed_list(0, s.seeds)
    data = data or load_builtin()
    t_cfg, s_cfg = pair_configs(teacher, student, s)
    start = time.perf_counter()
    dev = pick_device(s.device)
    n = len(seeds) + 1  # progress: the teacher's share, then each seed's
    kept: list[CausalLM] = []
    teacher_part = sub_progress(progress, 0.0, 1 / n, "teacher")
    teacher_loop = iter_train(
        t_cfg,
        s.train_settings(0, s.teacher_steps_run),
        data=data,
        label="teacher",
        progress=teacher_part,
        keep_model=kept,
    )
    for record in teacher_loop:  # the teacher: the lab's own loop, seed 0
        yield {"model": "teacher", **record}
    teacher_model = kept[0].eval()
    val = val_batches(data, s, dev)
    precision = make_precision("fp32", dev)
    teacher_val = evaluate(teacher_model, val, precision)
    with torch.no_grad():
        val_logits = torch.cat([teacher_model(x) for x, _ in val])  # (E·B, T, V)
    distilled, scratch = [], []
    for i, seed in enumerate(seeds):
        part = sub_progress(progress, (i + 1) / n, (i + 2) / n, f"seed {seed} ({i + 1}/{len(seeds)})")
        curve_d, curve_s = yield from student_pair(s_cfg, teacher_model, s, seed, data, val, part)
        distilled.append(curve_d)
        scratch.append(curve_s)
    if progress:
        progress(1.0, "done")
    val_step = [0] + [k for k in range(1, s.steps + 1) if k % s.eval_every == 0 or k == s.steps]
    return DistillRun(
        teacher=model_cost(t_cfg, s.seq_len),
        student=model_cost(s_cfg, s.seq_len),
        temperature=s.temperature,
        alpha=s.alpha,
        steps=s.steps,
        teacher_steps=s.teacher_steps_run,
        seeds=seeds,
        teacher_val_loss=teacher_val,
        val_step=val_step,
        distilled_val=distilled,
        scratch_val=scratch,
        soft_target_entropy=soft_target_entropy(val_logits, s.temperature),
        teacher_entropy_t1=soft_target_entropy(val_logits, 1.0),
        vocab_size=s_cfg.vocab_size,
        wall_s=time.perf_counter() - start,
    )


def distill_run(
    teacher: str = D["teacher"],
    student: str = D["student"],
    settings: DistillSettings | None = None,
    data: TokenData | None = None,
    progress: Progress | None = None,
    on_step: Callable[[dict], None] | None = None,
) -> DistillRun:
    """``iter_distill`` run to the end, each step's dict passed to ``on_step``."""
    return run_to_end(iter_distill(teacher, student, settings, data, progress), on_step)


def page_settings(temperature: float, alpha: float) -> dict:
    """What the Inference systems page runs with: DISTILL_DEFAULTS' sizes and steps (the key of
    its shipped result: a change of the defaults is not shown the old result) at ``temperature``
    and ``alpha``."""
    return {
        "temperature": temperature,
        "alpha": alpha,
        "teacher_d": D["teacher_d"],
        "teacher_layers": D["teacher_layers"],
        "student_d": D["student_d"],
        "student_layers": D["student_layers"],
        "steps": D["steps"],
        "teacher_steps_factor": D["teacher_steps_factor"],
        "seeds": D["seeds"],
    }


def page_run(
    temperature: float = D["temperature"], alpha: float = D["alpha"], progress: Progress | None = None
):
    """The page's run: DISTILL_DEFAULTS' pair, sizes and steps at ``temperature`` and ``alpha``."""
    settings = DistillSettings(
        steps=D["steps"],
        seeds=D["seeds"],
        temperature=temperature,
        alpha=alpha,
        seq_len=D["seq_len"],
        batch=D["batch"],
        eval_every=D["eval_every"],
        eval_batches=D["eval_batches"],
        teacher_d=D["teacher_d"],
        teacher_layers=D["teacher_layers"],
        student_d=D["student_d"],
        student_layers=D["student_layers"],
    )
    return distill_run(D["teacher"], D["student"], settings, progress=progress)


def distill_flops(
    teacher: str = D["teacher"], student: str = D["student"], s: DistillSettings | None = None
) -> float:
    """The training FLOPs of a run: the teacher's steps, then per seed two students' steps and
    the teacher's forward on each batch (analysis.count_flops; evaluations left out)."""
    s = s or DistillSettings()
    t_cfg, s_cfg = pair_configs(teacher, student, s)
    t_count, s_count = count_flops(t_cfg, s.seq_len, s.batch), count_flops(s_cfg, s.seq_len, s.batch)
    per_seed = s.steps * (2 * s_count.training_step + t_count.forward)
    return s.teacher_steps_run * t_count.training_step + s.seeds * per_seed


# ---- figures and tables --------------------------------------------------------------------
def distill_figure(run: DistillRun) -> go.Figure:
    """Validation loss per step: the distilled and the scratch student (median over seeds, the
    min–max band), the teacher's final loss as a line."""
    fig = go.Figure()
    for i, (name, curves) in enumerate((("distilled", run.distilled_val), ("from scratch", run.scratch_val))):
        low, high = band(curves)
        for trace in band_traces(
            run.val_step,
            median_list(curves),
            low,
            high,
            name=f"student, {name}",
            color=GROUP_PALETTE[2 * i],
            hover="%{y:.4f}",
        ):
            fig.add_trace(trace)
    fig.add_hline(
        y=run.teacher_val_loss,
        line=dict(color="#7f7f7f", dash="dot"),
        annotation_text=f"teacher {run.teacher_val_loss:.3f}",
    )
    fig.update_xaxes(title="training step")
    fig.update_yaxes(title="validation loss (nats per byte)")
    return layout_figure(
        fig,
        f"Distillation at T={run.temperature:g}, α={run.alpha:g}: validation loss over "
        f"{plural(len(run.seeds), 'seed')}",
        height=420,
    )


def tables(result: DistillRun, section: str, config: ModelConfig | None = None) -> list[Table]:
    return [
        Table(
            "distill_sizes",
            "Distillation: teacher and student, size and decode cost",
            section,
            result.sizes_frame(),
        ),
        Table("distill_seeds", "Distillation: final validation loss per seed", section, result.to_frame()),
        Table(
            "distill_soft_targets",
            "Distillation: what a target carries",
            section,
            result.soft_targets_frame(),
        ),
    ]


def figures(result: DistillRun, section: str) -> list[Figure]:
    return [Figure("distill", "Distillation: validation loss", section, distill_figure(result))]


KIND = register(
    ExperimentKind(
        name="distill",
        title="Distillation (Hinton et al. 2015)",
        result_type=DistillRun,
        run=distill_run,
        tables=tables,
        figures=figures,
        panel="distill",
        order=72,
    )
)
