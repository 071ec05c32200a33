"""The command line's grammar: ``build_parser`` (every subcommand, its options and their
checks: each number bounded, each choice listed) and the parser that answers a bad command line
in one line, naming the closest option for a misspelt one. ``cli`` runs the commands."""

from __future__ import annotations

import argparse
import difflib
import math
from pathlib import Path
from typing import NoReturn

from .analysis.common import TRAINING_DTYPES
from .analysis.quant import KEEP_CHOICES, KV_DTYPES, SCALE_DTYPES, WEIGHT_DTYPES
from .analysis.speculative import MAX_GAMMA
from .cli_predict import CP_HELP, EP_HELP
from .cli_predict import add_parsers as add_predict_parsers
from .config import PRESETS
from .errors import LabError
from .report.formats import FORMATS
from .runtime.devices import DEVICES
from .runtime.precision import DTYPES
from .train.budgets import CPU_FLOP_BUDGET, MAX_LR, MAX_SEED, MAX_SEEDS, MAX_STEPS
from .train.schedules import SCHEDULES
from .units import strip_control


class CliError(LabError):
    """A one-line message for the user (a bad command line)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2
        raise CliError(f"{self.prog}: {message}")

    def parse_args(self, args=None, namespace=None):
        """As argparse's, but an unknown option names the closest one of its command."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            options = self._options_of(getattr(parsed, "command", None))
            hints = []
            for extra in extras:
                close = difflib.get_close_matches(extra.split("=")[0], options, n=1, cutoff=0.6)
                hints += [f"did you mean {close[0]}?"] if extra.startswith("-") and close else []
            self.error(
                f"unrecognized arguments: {' '.join(extras)}" + (f" ({'; '.join(hints)})" if hints else "")
            )
        return parsed

    def add_argument(self, *names, **kwargs):
        """As argparse's; the long options are kept for the hint above."""
        self.long_options = [*getattr(self, "long_options", []), *(n for n in names if n.startswith("--"))]
        return super().add_argument(*names, **kwargs)

    def add_subparsers(self, **kwargs):
        action = super().add_subparsers(**kwargs)
        self.commands = action.choices  # name → that command's parser
        return action

    def _options_of(self, command: str | None) -> list[str]:
        """The long options of ``command``'s parser (this one's without a command)."""
        parser = getattr(self, "commands", {}).get(command, self)
        return list(getattr(parser, "long_options", []))


def _number(kind: type, minimum: float, strict: bool = False, maximum: float | None = None):
    """An argparse type: ``kind`` (int/float), finite, ≥ minimum (> minimum when strict) and
    ≤ maximum when given."""
    word = "an integer" if kind is int else "a number"

    def parse(text: str):
        if len(text) > 40:
            raise argparse.ArgumentTypeError(
                f"{strip_control(text[:20])!r}… is not {word} (at most 40 characters)"
            )
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{strip_control(text)!r} is not {word}") from None
        too_big = maximum is not None and value > maximum
        if not math.isfinite(value) or value < minimum or (strict and value == minimum) or too_big:
            rule = f"> {minimum:g}" if strict else f"at least {minimum:,}"
            rule += f" and at most {maximum:,}" if maximum is not None else ""
            shown = f"{value:,}" if kind is int else f"{value:g}"
            raise argparse.ArgumentTypeError(f"{shown} must be {rule}")
        return value

    return parse


_positive_int = _number(int, 1)


_nonneg_int = _number(int, 0)


_steps = _number(int, 1, maximum=MAX_STEPS)


_warmup = _number(int, 0, maximum=MAX_STEPS)


_seed = _number(int, 0, maximum=MAX_SEED)


_lr = _number(float, 0.0, strict=True, maximum=MAX_LR)


_positive_float = _number(float, 0.0, strict=True, maximum=1e6)


def _add_budget_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-budget",
        action="store_true",
        help=f"lift the CPU compute budget ({CPU_FLOP_BUDGET / 1e12:.0f} TFLOP per "
        f"run, as in the app); the memory guard still applies",
    )


def _add_config_args(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group()
    src.add_argument("--preset", help=f"one of: {', '.join(PRESETS)} (default seed-demo)")
    src.add_argument("--config", type=Path, help="a ModelConfig JSON or a Hugging Face config.json")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override one config field (repeatable), e.g. --set n_kv_heads=1",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def _add_run_args(p: argparse.ArgumentParser, seq_len: int, batch: int, analysis: bool = False) -> None:
    """``analysis``: a counting command, whose T for a --config file is the file's context
    length, as the app's after an upload (a live run keeps its small default)."""
    where = "; a --config file's max_seq_len" if analysis else ""
    p.add_argument(
        "--seq-len",
        type=_positive_int,
        default=None,
        help=f"tokens per sequence (default: {seq_len} or the model's max_seq_len if smaller{where})",
    )
    p.set_defaults(default_seq_len=seq_len, file_context=analysis)
    p.add_argument(
        "--batch", type=_positive_int, default=batch, help=f"sequences per batch (default {batch})"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m llama_lab", description="LLaMA Lab: analyse and run LLaMA-style decoders."
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("presets", help="list the preset names")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("analyze", help="parameters, FLOPs and KV cache of a config")
    _add_config_args(p)
    _add_run_args(p, seq_len=2048, batch=1, analysis=True)
    p.add_argument("--dtype", choices=TRAINING_DTYPES, default="bf16")
    _add_storage_args(p)
    p.add_argument(
        "--images",
        type=_number(int, 0, maximum=4096),
        default=0,
        help="images per sequence (a multimodal config): their tokens join --seq-len's in the text decoder",
    )
    p.add_argument(
        "--image-size",
        default=None,
        metavar="HxW",
        help="image size in pixels (Qwen2.5-VL, Qwen3.5, Pixtral; Llama 4 in tiles): dynamic resolution",
    )

    p = sub.add_parser("gradnorms", help="per-layer gradient norms, Post-LN vs Pre-LN")
    _add_config_args(p)
    _add_run_args(p, seq_len=64, batch=4)
    p.add_argument("--seed", type=_seed, default=0)
    p.add_argument(
        "--seeds",
        type=_number(int, 1, maximum=MAX_SEEDS),
        default=None,
        help="measure seeds S … S+N−1: each list the median, plus <name>_by_seed",
    )
    p.add_argument(
        "--data",
        default="random",
        help="'random' token ids (default), 'builtin' (Python's pydoc text, byte-level) or a UTF-8 text file",
    )
    _add_budget_arg(p)

    p = sub.add_parser("bench", help="time forward+backward+optimizer steps")
    _add_config_args(p)
    _add_run_args(p, seq_len=128, batch=4)
    p.add_argument("--device", choices=DEVICES, default="auto")
    p.add_argument("--steps", type=_number(int, 1, maximum=10_000), default=5)
    p.add_argument("--dtype", choices=tuple(DTYPES), default="fp32")
    _add_budget_arg(p)

    p = sub.add_parser("train", help="train on the built-in corpus (or a text file); JSON line per step")
    _add_config_args(p)
    _add_run_args(p, seq_len=64, batch=8)
    p.add_argument("--steps", type=_steps, default=50)
    p.add_argument("--lr", type=_lr, default=3e-3)
    p.add_argument("--warmup", type=_warmup, default=10, help="warmup steps (0 = none)")
    p.add_argument("--schedule", choices=SCHEDULES, default="cosine")
    p.add_argument(
        "--grad-clip",
        type=_positive_float,
        default=None,
        metavar="MAX_NORM",
        help="clip the total gradient norm to MAX_NORM (default: no clipping)",
    )
    p.add_argument(
        "--data", default="builtin", help="'builtin' (Python's pydoc text), 'random', or a UTF-8 text file"
    )
    p.add_argument("--seed", type=_seed, default=0)
    _add_budget_arg(p)

    p = sub.add_parser(
        "speculate",
        help="speculative decoding: Leviathan et al.'s expected "
        "tokens and speedup, or --live: measured on small trained models",
    )
    _add_speculate_args(p)

    _add_scaling_parser(sub)
    _add_quantize_parser(sub)
    _add_finetune_parser(sub)
    _add_distill_parser(sub)
    _add_parallel_parsers(sub)
    add_predict_parsers(sub, _add_config_args, _positive_int)

    p = sub.add_parser("report", help="the app's full report")
    _add_config_args(p)
    _add_run_args(p, seq_len=2048, batch=1, analysis=True)
    p.add_argument("--dtype", choices=TRAINING_DTYPES, default="bf16")
    _add_format_args(p)
    p.add_argument("-o", "--output", type=Path, help="write to FILE, atomically (default or '-': stdout)")
    p.add_argument("--format", choices=FORMATS, default="html", help="csv: a zip with one CSV per table")
    return parser


def _add_scaling_parser(sub) -> None:
    p = sub.add_parser(
        "scaling",
        help="L(N, D) = E + A/N^α + B/D^β: a published fit at N and D, or the compute-optimal model "
        "for a budget C = 6·N·D; or --ladder: the lab's own models measured at several sizes and budgets",
    )
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--fit", choices=("hoffmann", "besiroglu"), help="the published fit")
    what.add_argument("--ladder", action="store_true", help="the shipped pre-measured ladder and its fit")
    p.add_argument("--params", type=_positive_float_any, help="N: parameters (with --tokens)")
    p.add_argument("--tokens", type=_positive_float_any, help="D: training tokens (with --params)")
    p.add_argument(
        "--compute", type=_positive_float_any, help="C: training FLOPs (the compute-optimal model)"
    )
    p.add_argument(
        "--live", action="store_true", help="with --ladder: re-measure it here (JSON line per event)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")


_positive_float_any = _number(float, 0.0, strict=True, maximum=1e40)


def _add_quantize_parser(sub) -> None:
    p = sub.add_parser(
        "quantize",
        help="quantise the briefly trained live copy's linear layers for real: bytes, logit error, loss",
    )
    _add_config_args(p)
    p.add_argument("--weight-dtype", choices=("int8", "int4", "fp8"), default="int8")
    p.add_argument("--group-size", type=_number(int, -1, maximum=1 << 20), default=None)
    p.add_argument(
        "--steps",
        type=_number(int, 0, maximum=10_000),
        default=150,
        help="training steps before quantising (default 150)",
    )
    p.add_argument("--device", choices=DEVICES, default="auto")


def _add_finetune_parser(sub) -> None:
    p = sub.add_parser(
        "finetune",
        help="fine-tune the briefly trained live copy here (LoRA, QLoRA, DoRA, full): loss per step, "
        "trainable parameters and peak bytes measured vs predicted",
    )
    _add_config_args(p)
    p.add_argument("--method", choices=("lora", "qlora", "dora", "full"), default="lora")
    p.add_argument("--rank", type=int, default=8, help="adapter rank r (default 8)")
    p.add_argument("--alpha", type=float, default=16.0, help="LoRA alpha (scaling alpha/r; default 16)")
    p.add_argument(
        "--targets",
        default="all-linear",
        help="comma-separated module names (q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj) "
        "or all-linear (the default here: rank 8 on q_proj,v_proj alone barely moves the small "
        "copy's loss in 20 steps; every linear layer shows it fall)",
    )
    p.add_argument("--steps", type=_number(int, 1, maximum=10_000), default=20)
    p.add_argument("--pretrain-steps", type=_number(int, 0, maximum=10_000), default=60)
    p.add_argument("--seq-len", type=_number(int, 1, maximum=4096), default=128)
    p.add_argument("--batch", type=_number(int, 1, maximum=1024), default=16)
    p.add_argument("--device", choices=DEVICES, default="cpu")
    p.add_argument(
        "--save-adapter",
        default=None,
        metavar="PATH",
        help="write the trained adapters to PATH (safetensors, PEFT's key names)",
    )


def _add_distill_parser(sub) -> None:
    p = sub.add_parser(
        "distill",
        help="distillation, live: a small student trained on a small trained teacher's soft targets "
        "beside the same student from scratch on the same tokens, over seeds (Hinton et al. 2015)",
    )
    for role, what in (("teacher", "2 blocks, width 64"), ("student", "1 block, width 32")):
        p.add_argument(
            f"--{role}",
            choices=list(PRESETS),
            default="seed-demo",
            metavar="P",
            help=f"whose recipe the {role} copies ({what}, byte vocabulary; default seed-demo)",
        )
    p.add_argument(
        "--steps",
        type=_number(int, 1, maximum=10_000),
        default=200,
        help="each student's steps (default 200)",
    )
    p.add_argument(
        "--teacher-steps",
        type=_number(int, 1, maximum=30_000),
        default=None,
        help="the teacher's training steps (default 2 × --steps)",
    )
    p.add_argument("--seeds", type=_number(int, 1, maximum=MAX_SEEDS), default=2, help="seeds (default 2)")
    p.add_argument(
        "--temperature",
        type=_number(float, 0.0, strict=True, maximum=100.0),
        default=1.0,
        help="T: the softmax temperature of the soft targets (default 1)",
    )
    p.add_argument(
        "--alpha",
        type=_number(float, 0.0, maximum=1.0),
        default=0.5,
        help="α: the soft term's weight, 1 − α the labels' (default 0.5)",
    )
    p.add_argument("--device", choices=DEVICES, default="cpu")
    p.add_argument("--json", action="store_true", help="a JSON line per step, then the result")


def _add_speculate_args(p: argparse.ArgumentParser) -> None:
    """speculate: the formula's α, γ and c, or a live run's pair and length."""
    p.add_argument(
        "--alpha",
        type=_number(float, 0.0, maximum=1.0),
        default=None,
        help="acceptance rate of a drafted token (formula; required without --live)",
    )
    p.add_argument(
        "--gamma", type=_number(int, 1, maximum=MAX_GAMMA), default=4, help="draft length γ (default 4)"
    )
    p.add_argument(
        "--cost-ratio",
        type=_number(float, 0.0, maximum=1e6),
        default=None,
        help="c: a draft step's time over a target step's (formula)",
    )
    p.add_argument(
        "--live",
        action="store_true",
        help="decode for real: a small target and a smaller draft, both briefly trained on the built-in text",
    )
    p.add_argument(
        "--target",
        choices=list(PRESETS),
        default="seed-demo",
        help="--live: whose recipe the target copies (default seed-demo)",
    )
    p.add_argument(
        "--draft",
        choices=list(PRESETS),
        default="seed-demo",
        help="--live: whose recipe the draft copies (default seed-demo)",
    )
    p.add_argument("--new-tokens", type=_number(int, 1, maximum=512), default=64)
    p.add_argument(
        "--steps",
        type=_number(int, 0, maximum=10_000),
        default=None,
        help="--live: training steps of each model (default 150)",
    )
    p.add_argument("--device", choices=DEVICES, default="auto")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def _add_format_args(p: argparse.ArgumentParser) -> None:
    """The formats the weights and the KV cache are stored in."""
    p.add_argument(
        "--weight-dtype",
        choices=WEIGHT_DTYPES,
        default=None,
        help="how the weights are stored (default: --dtype)",
    )
    p.add_argument(
        "--kv-dtype", choices=KV_DTYPES, default=None, help="how the KV cache is stored (default: --dtype)"
    )


def _add_storage_args(p: argparse.ArgumentParser) -> None:
    """How the weights and the KV cache are stored (analysis.quant.WeightQuant)."""
    _add_format_args(p)
    p.add_argument(
        "--group-size",
        type=_number(int, -1, maximum=1 << 20),
        default=None,
        help="quantised weights: inputs per scale (0: per output row, -1: per "
        "tensor; default int4 128, int8 0, fp8 -1)",
    )
    p.add_argument(
        "--scale-dtype",
        choices=SCALE_DTYPES,
        default=None,
        help="quantised weights: the scales' dtype (default fp16; fp8: fp32)",
    )
    p.add_argument(
        "--zero-point", action="store_true", help="int8/int4 weights: asymmetric, a zero point per scale"
    )
    p.add_argument(
        "--keep",
        type=_keep_list,
        default=None,
        help="tensors that stay in 16 bits when the weights are quantised: a comma "
        f"list of {', '.join(KEEP_CHOICES)}, or 'none' (default: all but experts)",
    )


def _keep_list(text: str) -> tuple[str, ...]:
    names = () if text.strip() == "none" else tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in KEEP_CHOICES]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"{', '.join(map(repr, unknown))} must be among {', '.join(KEEP_CHOICES)} (or 'none')"
        )
    return names


def _add_parallel_parsers(sub) -> None:
    p = sub.add_parser(
        "parallel",
        help="per-GPU training memory and communication of a "
        "TP × PP × DP layout (ZeRO, sequence parallel, recomputation)",
    )
    _add_config_args(p)
    p.add_argument("--gpus", type=_positive_int, required=True)
    p.add_argument("--tp", type=_positive_int, default=1, help="tensor-parallel ranks")
    p.add_argument("--pp", type=_positive_int, default=1, help="pipeline stages")
    p.add_argument(
        "--zero",
        type=int,
        choices=(0, 1, 2, 3),
        default=0,
        help="ZeRO stage of the data-parallel group (3 = FSDP full shard)",
    )
    p.add_argument(
        "--seq-len",
        type=_positive_int,
        default=None,
        help="tokens per sequence (default: the model's max_seq_len)",
    )
    p.add_argument("--micro-batch", type=_positive_int, default=1, help="sequences per micro-batch")
    p.add_argument(
        "--micro-batches",
        type=_positive_int,
        default=None,
        help="micro-batches per step per data-parallel rank (default 1, or 4·pp with a pipeline)",
    )
    p.add_argument("--recompute", choices=("none", "selective", "full"), default="none")
    p.add_argument("--sequence-parallel", action="store_true")
    p.add_argument("--schedule", choices=("1f1b", "interleaved"), default="1f1b")
    p.add_argument("--chunks", type=_positive_int, default=1, help="interleaved: chunks per GPU")
    p.add_argument("--cp", type=_positive_int, default=1, help=CP_HELP)
    p.add_argument("--ep", type=_positive_int, default=1, help=EP_HELP)
    p.add_argument(
        "--dtype",
        choices=TRAINING_DTYPES,
        default="bf16",
        help="bf16/fp16: mixed precision (fp32 master weights and AdamW moments)",
    )

    p = sub.add_parser(
        "shard",
        help="real training steps on R local torch.distributed "
        "processes: measured shards and activations per rank against the prediction",
    )
    _add_config_args(p)
    p.add_argument("--ranks", type=_number(int, 2, maximum=8), default=2)
    p.add_argument("--strategy", choices=("fsdp", "tp", "fsdp+tp"), default="fsdp")
    p.add_argument(
        "--tp", type=_positive_int, default=None, help="fsdp+tp: tensor-parallel ranks (default 2)"
    )
    for flag, upper, default in (("--steps", 20, 2), ("--seq-len", 4096, 32), ("--batch", 64, 2)):
        p.add_argument(flag, type=_number(int, 1, maximum=upper), default=default)
    p.add_argument("--seed", type=_seed, default=0)
