"""``python -m llama_lab``: the public command line (names and JSON keys other programs rely on).
Errors: one line on stderr, exit status 2."""

from __future__ import annotations

import argparse
import difflib
import math
import sys
from pathlib import Path
from typing import Any

from .analysis.common import TRAINING_DTYPES
from .analysis.quant import KEEP_CHOICES, KV_DTYPES, SCALE_DTYPES, WEIGHT_DTYPES
from .analysis.speculative import MAX_GAMMA
from .config import PRESETS, ModelConfig, apply_overrides, get_preset, load_config_file
from .errors import LabError
from .report.formats import FORMATS, check_output, write_atomically
from .runtime.devices import DEVICES
from .runtime.memory import allocation_failures_refused
from .runtime.precision import DTYPES
from .train.budgets import CPU_FLOP_BUDGET, MAX_LR, MAX_SEED, MAX_SEEDS, MAX_STEPS, check_cpu_budget
from .train.schedules import SCHEDULES
from .units import json_line, plural, strip_control

EXIT_USAGE = 2


class CliError(LabError):
    """A one-line message for the user (a bad command line)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        raise CliError(f"{self.prog}: {message}")

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
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

    def add_argument(self, *names, **kwargs):  # type: ignore[override]
        """As argparse's; the long options are kept for the hint above."""
        self.long_options = [*getattr(self, "long_options", []), *(n for n in names if n.startswith("--"))]
        return super().add_argument(*names, **kwargs)

    def add_subparsers(self, **kwargs):  # type: ignore[override]
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

    _add_quantize_parser(sub)
    _add_parallel_parsers(sub)

    p = sub.add_parser("report", help="the app's full report")
    _add_config_args(p)
    _add_run_args(p, seq_len=2048, batch=1, analysis=True)
    p.add_argument("--dtype", choices=TRAINING_DTYPES, default="bf16")
    _add_format_args(p)
    p.add_argument("-o", "--output", type=Path, help="write to FILE, atomically (default or '-': stdout)")
    p.add_argument("--format", choices=FORMATS, default="html", help="csv: a zip with one CSV per table")
    return parser


def resolve_config(args: argparse.Namespace) -> tuple[ModelConfig, list[str]]:
    notes: list[str] = []
    if getattr(args, "config", None) is not None:
        cfg, notes = load_config_file(args.config)
    else:
        cfg = get_preset(args.preset or "seed-demo")
    cfg = apply_overrides(cfg, args.overrides)
    if getattr(args, "default_seq_len", None) is not None and args.seq_len is None:
        from_file = getattr(args, "file_context", False) and getattr(args, "config", None) is not None
        args.seq_len = cfg.max_seq_len if from_file else min(args.default_seq_len, cfg.max_seq_len)
    return cfg, notes


def _emit(obj: Any, as_json: bool, text: str) -> None:
    print(json_line(obj) if as_json else strip_control(text))


def check_budget(args, cfg: ModelConfig, passes: float, what: str) -> None:
    """The app's CPU compute budget for ``passes`` training steps, unless --no-budget."""
    if getattr(args, "no_budget", False):
        return
    from .analysis import count_flops

    flops = passes * count_flops(cfg, args.seq_len, args.batch).training_step
    check_cpu_budget(
        flops,
        getattr(args, "device", "auto"),
        what,
        "use fewer steps, a smaller model, batch or sequence, or pass --no-budget",
    )


def cmd_presets(args) -> None:
    if args.json:
        print(json_line({name: cfg.to_dict() for name, cfg in PRESETS.items()}))
        return
    from .analysis import count_params

    for name, cfg in PRESETS.items():
        print(
            f"{name:<16} {count_params(cfg).total:>17,} params  {cfg.attention_kind:<3} "
            f"L={cfg.n_layers:<4} d={cfg.d_model:<6} heads={cfg.n_heads}/{cfg.n_kv_heads}"
        )


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


def cmd_analyze(args, cfg: ModelConfig, notes: list[str]) -> None:
    from .analysis import WeightQuant, analyze, format_analysis, stored_weights
    from .config.files import load_stored_quant

    stored = load_stored_quant(args.config) if args.config is not None else None
    if stored is not None and args.weight_dtype is None:  # the checkpoint's own format
        weights = stored_weights(stored)
    else:
        weights = WeightQuant.of(
            args.weight_dtype or args.dtype,
            group_size=args.group_size,
            scale_dtype=args.scale_dtype,
            zero_point=args.zero_point,
            keep=args.keep,
        )
    result = analyze(
        cfg, seq_len=args.seq_len, batch=args.batch, dtype=args.dtype, weights=weights, kv_dtype=args.kv_dtype
    )
    if notes:
        result["notes"] = notes + result.get("notes", [])
    _emit(result, args.json, format_analysis(result))


def _text_data(args, cfg: ModelConfig):
    """--data: the built-in text, random tokens (None where the command draws its own), or a
    UTF-8 file."""
    from .train import data as data_mod

    if args.data == "builtin":
        return data_mod.load_builtin()
    if args.data == "random":
        return None
    return data_mod.load_text_file(args.data, what="--data")


def cmd_gradnorms(args, cfg: ModelConfig, notes: list[str]) -> None:
    from .experiments import gradnorms_over_seeds, seed_list

    seeds = seed_list(args.seed, args.seeds or 1)
    check_budget(args, cfg, 2 * len(seeds), f"{2 * len(seeds)} forward/backward passes")
    result = gradnorms_over_seeds(
        cfg, seq_len=args.seq_len, batch=args.batch, seeds=seeds, data=_text_data(args, cfg)
    ).to_dict(by_seed=bool(args.seeds))
    if args.json:
        print(json_line(result))
        return
    for kind in ("post", "pre"):
        r = result[kind]
        print(f"{kind}-LN  loss {r['loss']:.4f}")
        print(f"  {'layer':>5} {'‖∇θ block‖':>12} {'‖∇W_down‖':>12} {'‖∂L/∂x_l‖':>12}")
        for i, (a, b, c) in enumerate(
            zip(r["layer_grad_norm"], r["ffn_out_grad_norm"], r["residual_grad_norm"])
        ):
            print(f"  {i:>5} {a:>12.4e} {b:>12.4e} {c:>12.4e}")


def cmd_bench(args, cfg: ModelConfig, notes: list[str]) -> None:
    from .experiments import bench

    check_budget(args, cfg, args.steps + 3, f"{args.steps} timed steps (and a warm-up)")
    result = bench(
        cfg, device=args.device, steps=args.steps, seq_len=args.seq_len, batch=args.batch, dtype=args.dtype
    )
    text = "\n".join(f"{k:<20} {v}" for k, v in result.items())
    _emit(result, args.json, text)


def cmd_train(args, cfg: ModelConfig, notes: list[str]) -> None:
    from .train import data as data_mod
    from .train.loop import TrainSettings, train

    # the steps, plus about ten evaluations of four forward passes (a third of a step each)
    check_budget(args, cfg, args.steps + 14, plural(args.steps, "training step"))
    data = _text_data(args, cfg)
    if data is None:
        data = data_mod.random_tokens(cfg.vocab_size, 200_000, seed=args.seed)

    def on_step(record: dict) -> None:
        if args.json:
            print(json_line(record), flush=True)
        else:
            print(
                strip_control(
                    " ".join(
                        f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                        for k, v in record.items()
                        if not isinstance(v, (list, dict))
                    )
                ),
                flush=True,
            )

    run = train(
        cfg,
        TrainSettings(
            steps=args.steps,
            lr=args.lr,
            warmup_steps=args.warmup,
            schedule=args.schedule,
            grad_clip=args.grad_clip,
            seq_len=args.seq_len,
            batch=args.batch,
            seed=args.seed,
        ),
        data=data,
        on_step=on_step,
    )
    summary = run.summary()
    if args.json:
        print(json_line({"summary": summary}))
    else:
        print(strip_control(" ".join(f"{k}={v}" for k, v in summary.items())))


def cmd_report(args, cfg: ModelConfig, notes: list[str]) -> None:
    from .report import Precision, build_report, render

    if args.output is not None and str(args.output) != "-":
        check_output(args.output)
    name = args.preset or (args.config.name if args.config is not None else "seed-demo")
    report = build_report(
        cfg,
        seq_len=args.seq_len,
        batch=args.batch,
        notes=notes,
        name=strip_control(name),
        dtype=Precision.of(args.dtype, args.weight_dtype, args.kv_dtype),
    )
    content = render(report, args.format)
    if args.output is None or str(args.output) == "-":
        if isinstance(content, str):
            sys.stdout.write(content)
        else:
            sys.stdout.buffer.write(content)
        return
    write_atomically(args.output, content.encode("utf-8") if isinstance(content, str) else content)
    print(f"wrote {args.output} ({args.output.stat().st_size:,} bytes)", file=sys.stderr)


def cmd_speculate(args) -> None:
    if args.live:
        from .experiments.speculative import SPECULATIVE_DEFAULTS, speculative_run

        if args.gamma > 16:
            raise LabError(f"--gamma {args.gamma}: the live run drafts at most 16 tokens")
        result = speculative_run(
            args.target,
            args.draft,
            args.gamma,
            args.new_tokens,
            args.steps if args.steps is not None else SPECULATIVE_DEFAULTS["steps"],
            args.device,
        ).to_dict()
        text = (
            "\n".join(
                f"{d['label']:>16}: α {d['measured_alpha']:.3f}, {d['tokens_per_target_step']:.2f} "
                f"tokens per target step (formula {d['predicted_tokens_per_step']:.2f}), speedup "
                f"{d['measured_speedup']:.2f}× (formula {d['predicted_speedup']:.2f}×, with the "
                f"measured verification cost {d['predicted_speedup_measured_costs']:.2f}×), "
                f"identical to the target's greedy output: {d['identical_to_target_greedy']}; "
                f"time: draft {d['draft_share']:.0%}, verification {d['verify_share']:.0%}, "
                f"loop {d['overhead_share']:.0%}"
                for d in result["drafts"]
            )
            + f"\ntarget's continuation ({result['distinct_tokens']} "
            f"different tokens): {strip_control(repr(result['target_text']))}"
        )
    else:
        if args.alpha is None or args.cost_ratio is None:
            raise LabError("speculate needs --alpha and --cost-ratio (or --live)")
        from .analysis.speculative import speculation

        result = speculation(args.alpha, args.gamma, args.cost_ratio).to_dict()
        text = (
            f"γ={result['gamma']}: {result['expected_tokens_per_step']:.3f} tokens per "
            f"target step, speedup {result['speedup']:.3f}×; best γ={result['best_gamma']} "
            f"({result['best_speedup']:.3f}×)"
        )
    _emit(result, args.json, text)


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


def cmd_parallel(args, cfg: ModelConfig, notes: list[str]) -> None:
    from .analysis.parallel import Layout, parallel_memory

    layout = Layout(
        args.gpus,
        args.tp,
        args.pp,
        args.zero,
        args.sequence_parallel,
        args.recompute,
        args.micro_batch,
        args.micro_batches or 0,
        args.schedule,
        args.chunks,
    )
    est = parallel_memory(cfg, layout, args.seq_len, args.dtype)
    g = {key: f"{value / 2**30:,.2f}" for key, value in est.per_gpu.items()}
    text = (
        f"{layout.label()}, stage {est.per_gpu['stage']} fullest: {g['total_bytes']} GiB per "
        f"GPU (weights {g['params_bytes']}, gradients {g['grads_bytes']}, optimizer "
        f"{g['optimizer_bytes']}, activations {g['activation_bytes']}); sends "
        f"{est.comm_bytes_per_step / 1e9:,.2f} GB per step; bubble {est.bubble_fraction:.1%}"
    )
    _emit(est.to_dict(), args.json, text)


def cmd_shard(args, cfg: ModelConfig, notes: list[str]) -> None:
    from .train.shard import ShardSettings, run_shard

    settings = ShardSettings(
        args.ranks,
        args.strategy,
        steps=args.steps,
        seq_len=args.seq_len,
        batch=args.batch,
        seed=args.seed,
        tp=args.tp,
    )
    r = run_shard(cfg, settings)
    lines = [
        f"{args.strategy} on {args.ranks} gloo ranks: max relative error "
        f"{r.max_rel_error:.3g} (parameters, gradients, optimizer), activations "
        f"{r.activation_max_rel_error:.3g}; loss differs from one process by "
        f"{r.max_loss_diff:.3g}"
    ]
    for rank in r.to_dict()["ranks"]:
        m, p = rank["measured"], rank["predicted"]
        lines.append(
            f"  rank {rank['rank']}: "
            + ", ".join(f"{key.removesuffix('_bytes')} {m[key]:,} / {p[key]:,}" for key in m)
        )
    _emit(r.to_dict(), args.json, "\n".join(lines))


def cmd_quantize(args, cfg: ModelConfig, notes: list[str]) -> None:
    from .experiments.quantize import quantize_run

    preset = args.preset or "seed-demo"
    if args.config is not None or args.overrides:
        raise LabError("quantize takes --preset only: it trains the preset's live copy")
    r = quantize_run(preset, args.weight_dtype, args.steps, args.group_size, args.device)
    text = (
        f"{r.weight_dtype}: {r.measured_weight_bytes:,} bytes measured, "
        f"{r.predicted_weight_bytes:,} predicted (bf16 {r.bf16_weight_bytes:,}); largest "
        f"logit error {r.logit_max_abs_error:.3g}; loss {r.loss_fp:.4f} (fp32) → "
        f"{r.loss_quantized:.4f}"
    )
    _emit(r.to_dict(), args.json, text)


COMMANDS = {
    "analyze": cmd_analyze,
    "quantize": cmd_quantize,
    "gradnorms": cmd_gradnorms,
    "bench": cmd_bench,
    "train": cmd_train,
    "report": cmd_report,
    "parallel": cmd_parallel,
    "shard": cmd_shard,
}


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.command in ("presets", "speculate"):  # no model config
            (cmd_presets if args.command == "presets" else cmd_speculate)(args)
            return 0
        cfg, notes = resolve_config(args)
        for note in notes:
            print(strip_control(f"note: {note}"), file=sys.stderr)
        with allocation_failures_refused(f"python -m llama_lab {args.command}"):
            COMMANDS[args.command](args, cfg, notes)
        return 0
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    except (LabError, OSError, MemoryError) as exc:  # every refusal for a person is a LabError
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(strip_control(f"error: {message}"), file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 — a user never sees a traceback
        print(
            strip_control(
                f"error: internal error ({type(exc).__name__}: "
                f"{str(exc).splitlines()[0] if str(exc) else ''}); please report it"
            ),
            file=sys.stderr,
        )
        return EXIT_USAGE
