"""``python -m llama_lab``: the SPEC's command line. Errors: one line on stderr, exit status 2."""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from .analysis.common import TRAINING_DTYPES
from .config import (PRESETS, ModelConfig, apply_overrides, get_preset, load_config_file,
                     read_bounded)
from .errors import LabError
from .report.formats import FORMATS
from .runtime.devices import DEVICES
from .runtime.precision import DTYPES
from .train.schedules import SCHEDULES

EXIT_USAGE = 2


class CliError(LabError):
    """A one-line message for the user (a bad command line)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:                      # one line, exit 2
        raise CliError(f"{self.prog}: {message}")


def _number(kind: type, minimum: float, strict: bool = False):
    """An argparse type: ``kind`` (int/float), finite, ≥ minimum (> minimum when strict)."""
    word = "an integer" if kind is int else "a number"

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {word}") from None
        if not math.isfinite(value) or value < minimum or (strict and value == minimum):
            rule = f"> {minimum}" if strict else f"at least {minimum}"
            raise argparse.ArgumentTypeError(f"{value} must be {rule}")
        return value
    return parse


_positive_int = _number(int, 1)
_nonneg_int = _number(int, 0)
_positive_float = _number(float, 0.0, strict=True)


def _add_config_args(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group()
    src.add_argument("--preset", help=f"one of: {', '.join(PRESETS)} (default seed-demo)")
    src.add_argument("--config", type=Path, help="a ModelConfig JSON or a Hugging Face config.json")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE",
                   help="override one config field (repeatable), e.g. --set n_kv_heads=1")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def _add_run_args(p: argparse.ArgumentParser, seq_len: int, batch: int) -> None:
    p.add_argument("--seq-len", type=_positive_int, default=None,
                   help=f"tokens per sequence (default: {seq_len} or the model's max_seq_len if smaller)")
    p.set_defaults(default_seq_len=seq_len)
    p.add_argument("--batch", type=_positive_int, default=batch, help=f"sequences per batch (default {batch})")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m llama_lab", description="LLaMA Lab: analyse and run LLaMA-style decoders.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("presets", help="list the preset names")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("analyze", help="parameters, FLOPs and KV cache of a config")
    _add_config_args(p)
    _add_run_args(p, seq_len=2048, batch=1)
    p.add_argument("--dtype", choices=TRAINING_DTYPES, default="bf16")

    p = sub.add_parser("gradnorms", help="per-layer gradient norms, Post-LN vs Pre-LN")
    _add_config_args(p)
    _add_run_args(p, seq_len=64, batch=4)
    p.add_argument("--seed", type=_nonneg_int, default=0)

    p = sub.add_parser("bench", help="time forward+backward+optimizer steps")
    _add_config_args(p)
    _add_run_args(p, seq_len=128, batch=4)
    p.add_argument("--device", choices=DEVICES, default="auto")
    p.add_argument("--steps", type=_positive_int, default=5)
    p.add_argument("--dtype", choices=tuple(DTYPES), default="fp32")

    p = sub.add_parser("train", help="train on the built-in corpus (or a text file); JSON line per step")
    _add_config_args(p)
    _add_run_args(p, seq_len=64, batch=8)
    p.add_argument("--steps", type=_positive_int, default=50)
    p.add_argument("--lr", type=_positive_float, default=3e-3)
    p.add_argument("--warmup", type=_nonneg_int, default=10, help="warmup steps (0 = none)")
    p.add_argument("--schedule", choices=SCHEDULES, default="cosine")
    p.add_argument("--data", default="builtin", help="'builtin' (Python's pydoc text), 'random', or a UTF-8 text file")
    p.add_argument("--seed", type=_nonneg_int, default=0)

    p = sub.add_parser("report", help="the app's full report")
    _add_config_args(p)
    _add_run_args(p, seq_len=2048, batch=1)
    p.add_argument("-o", "--output", type=Path, help="write to FILE, atomically (default or '-': stdout)")
    p.add_argument("--format", choices=FORMATS, default="html",
                   help="csv: a zip with one CSV per table")
    return parser


def resolve_config(args: argparse.Namespace) -> tuple[ModelConfig, list[str]]:
    notes: list[str] = []
    if getattr(args, "config", None) is not None:
        cfg, notes = load_config_file(args.config)
    else:
        cfg = get_preset(args.preset or "seed-demo")
    cfg = apply_overrides(cfg, args.overrides)
    if getattr(args, "default_seq_len", None) is not None and args.seq_len is None:
        args.seq_len = min(args.default_seq_len, cfg.max_seq_len)
    return cfg, notes


def _emit(obj: Any, as_json: bool, text: str) -> None:
    print(json.dumps(obj) if as_json else text)


def cmd_presets(args) -> None:
    if args.json:
        print(json.dumps({name: cfg.to_dict() for name, cfg in PRESETS.items()}))
        return
    from .analysis import count_params
    for name, cfg in PRESETS.items():
        print(f"{name:<16} {count_params(cfg).total:>17,} params  {cfg.attention_kind:<3} "
              f"L={cfg.n_layers:<4} d={cfg.d_model:<6} heads={cfg.n_heads}/{cfg.n_kv_heads}")


def cmd_analyze(args, cfg: ModelConfig, notes: list[str]) -> None:
    from .analysis import analyze, format_analysis
    result = analyze(cfg, seq_len=args.seq_len, batch=args.batch, dtype=args.dtype)
    if notes:
        result["notes"] = notes + result.get("notes", [])
    _emit(result, args.json, format_analysis(result))


def cmd_gradnorms(args, cfg: ModelConfig, notes: list[str]) -> None:
    from .experiments import gradnorms
    result = gradnorms(cfg, seq_len=args.seq_len, batch=args.batch, seed=args.seed).to_dict()
    if args.json:
        print(json.dumps(result))
        return
    for kind in ("post", "pre"):
        r = result[kind]
        print(f"{kind}-LN  loss {r['loss']:.4f}")
        print(f"  {'layer':>5} {'‖∇θ block‖':>12} {'‖∇W_down‖':>12} {'‖∂L/∂x_l‖':>12}")
        for i, (a, b, c) in enumerate(zip(r["layer_grad_norm"], r["ffn_out_grad_norm"], r["residual_grad_norm"])):
            print(f"  {i:>5} {a:>12.4e} {b:>12.4e} {c:>12.4e}")


def cmd_bench(args, cfg: ModelConfig, notes: list[str]) -> None:
    from .experiments import bench
    result = bench(cfg, device=args.device, steps=args.steps, seq_len=args.seq_len,
                   batch=args.batch, dtype=args.dtype)
    text = "\n".join(f"{k:<20} {v}" for k, v in result.items())
    _emit(result, args.json, text)


def cmd_train(args, cfg: ModelConfig, notes: list[str]) -> None:
    from .train import data as data_mod
    from .train.loop import train
    if args.data == "builtin":
        data = data_mod.load_builtin()
    elif args.data == "random":
        data = data_mod.random_tokens(cfg.vocab_size, 200_000, seed=args.seed)
    else:
        data = data_mod.load_user_text(read_bounded(Path(args.data), data_mod.MAX_USER_BYTES, "--data"),
                                       name=args.data)

    def on_step(record: dict) -> None:
        if args.json:
            print(json.dumps(record), flush=True)
        else:
            print(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                           for k, v in record.items() if not isinstance(v, (list, dict))), flush=True)

    run = train(cfg, steps=args.steps, lr=args.lr, warmup_steps=args.warmup, schedule=args.schedule,
                data=data, seq_len=args.seq_len, batch=args.batch, seed=args.seed, on_step=on_step)
    summary = run.summary() if hasattr(run, "summary") else {}
    if args.json:
        print(json.dumps({"summary": summary}))
    elif summary:
        print(" ".join(f"{k}={v}" for k, v in summary.items()))


def cmd_report(args, cfg: ModelConfig, notes: list[str]) -> None:
    from .report import build_report, render
    report = build_report(cfg, seq_len=args.seq_len, batch=args.batch, notes=notes)
    content = render(report, args.format)
    if args.output is None or str(args.output) == "-":
        if isinstance(content, str):
            sys.stdout.write(content)
        else:
            sys.stdout.buffer.write(content)
        return
    write_atomically(args.output, content.encode("utf-8") if isinstance(content, str) else content)
    print(f"wrote {args.output} ({args.output.stat().st_size:,} bytes)", file=sys.stderr)


def write_atomically(path: Path, content: bytes) -> None:
    """Write to a temporary file beside ``path`` and rename it into place, so an interrupted or
    failed export never leaves a half-written report."""
    if path.is_dir():
        raise CliError(f"cannot write {str(path)!r}: it is a folder")
    if path.exists() and not path.is_file():     # a device or pipe (/dev/stdout): write through
        try:
            with path.open("wb") as handle:
                handle.write(content)
        except OSError as exc:
            raise CliError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
        return
    path = path.resolve()                   # through a symlink: replace its target, not the link
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent or ".")
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)       # mkstemp makes it 0600; a report is an ordinary file
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise CliError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


COMMANDS = {"analyze": cmd_analyze, "gradnorms": cmd_gradnorms, "bench": cmd_bench,
            "train": cmd_train, "report": cmd_report}


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.command == "presets":
            cmd_presets(args)
            return 0
        cfg, notes = resolve_config(args)
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
        COMMANDS[args.command](args, cfg, notes)
        return 0
    except SystemExit as exc:            # --help
        return int(exc.code or 0)
    except (LabError, OSError, MemoryError) as exc:    # every refusal for a person is a LabError
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"error: {message}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 — a user never sees a traceback
        print(f"error: internal error ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
              f"please report it", file=sys.stderr)
        return EXIT_USAGE
