"""``python -m llama_lab``: the public command line (names and JSON keys other programs rely on).
Errors: one line on stderr, exit status 2."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .cli_args import build_parser
from .cli_predict import cmd_predict, cmd_validate, layout_from_args, targets_from
from .config import PRESETS, ModelConfig, apply_overrides, get_preset, load_config_file
from .errors import LabError
from .report.formats import check_output, write_atomically
from .runtime.memory import allocation_failures_refused
from .train.budgets import check_cpu_budget
from .units import json_line, plural, strip_control

EXIT_USAGE = 2


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


def _emit_pair(answer: tuple[Any, str], as_json: bool) -> None:
    """A command's (JSON object, text) answer, as --json asks."""
    _emit(answer[0], as_json, answer[1])


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


def cmd_analyze(args, cfg: ModelConfig, notes: list[str]) -> None:
    from .analysis import WeightQuant, analyze, format_analysis, stored_weights
    from .analysis.vision import parse_image_size
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
    size = parse_image_size(args.image_size) if args.image_size is not None else None
    result = analyze(
        cfg,
        seq_len=args.seq_len,
        batch=args.batch,
        dtype=args.dtype,
        weights=weights,
        kv_dtype=args.kv_dtype,
        images=args.images,
        image_size=size,
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

    check_budget(args, cfg, args.steps + 3, f"{plural(args.steps, 'timed step')} (and a warm-up)")
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
    from .analysis import MFU_CONVENTION

    summary = run.summary() | {"flops_convention": MFU_CONVENTION}  # of achieved_tflops
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


def cmd_distill(args) -> None:
    from .experiments.distill import DistillSettings, distill_run

    settings = DistillSettings(
        steps=args.steps,
        teacher_steps=args.teacher_steps,
        seeds=args.seeds,
        temperature=args.temperature,
        alpha=args.alpha,
        device=args.device,
    )

    def on_step(record: dict) -> None:
        if args.json:
            print(json_line(record), flush=True)
        elif "val_loss" in record or "distilled_val_loss" in record:  # the text: evaluations only
            print(
                f"teacher step {record['step'] + 1}: val loss {record['val_loss']:.4f}"
                if "val_loss" in record
                else f"seed {record['seed']} step {record['step'] + 1}: val loss distilled "
                f"{record['distilled_val_loss']:.4f}, scratch {record['scratch_val_loss']:.4f}",
                flush=True,
            )

    r = distill_run(args.teacher, args.student, settings, on_step=on_step)
    d = r.to_dict()
    text = (
        f"teacher {r.teacher.params:,} params, val loss {r.teacher_val_loss:.4f}; student "
        f"{r.student.params:,} params ({r.teacher.params / r.student.params:.1f}× fewer, "
        f"{r.teacher.decode_flops_per_token / r.student.decode_flops_per_token:.1f}× fewer decode FLOPs "
        f"per token); final val loss per seed: distilled "
        f"{', '.join(f'{v:.4f}' for v in r.distilled_final)}, from scratch "
        f"{', '.join(f'{v:.4f}' for v in r.scratch_final)}; soft targets at T={r.temperature:g} "
        f"carry {r.soft_target_entropy:.2f} nats of entropy per token (a one-hot label 0)"
    )
    _emit(d, args.json, text)


def cmd_parallel(args, cfg: ModelConfig, notes: list[str]) -> None:
    from .analysis.parallel import parallel_memory

    layout = layout_from_args(args)
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


def cmd_scaling(args) -> None:
    if args.ladder:
        from .experiments.scaling_ladder import budget_label

        ladder = _ladder(args)
        fit = ladder["fit"]
        a2, (low, high) = ladder["isoflop_a"], ladder["isoflop_a_interval"]
        text = "\n".join(
            [
                f"{budget_label(r['budget'])} N={r['params']:,} D={r['tokens']:,}: "
                f"val loss {r['val_loss']:.4f}"
                for r in ladder["rows"]
            ]
            + [
                f"fit (approach 3): E {fit['E']:.3f}, A {fit['A']:.4g}, B {fit['B']:.4g}, "
                f"α {fit['alpha']:.3f}, β {fit['beta']:.3f}",
                f"approach 2: N_opt ∝ C^{a2:.3f} (10–90 %: {low:.3f} – {high:.3f})",
            ]
        )
        _emit(ladder, args.json, text)
        return
    from .analysis.scaling import get_fit

    fit = get_fit(args.fit)
    given_nd = args.params is not None or args.tokens is not None
    if given_nd == (args.compute is not None) or (given_nd and (args.params is None or args.tokens is None)):
        raise LabError("scaling --fit takes either --params N and --tokens D, or --compute C")
    if args.live:
        raise LabError("--live re-measures the ladder: use it with --ladder")
    out: dict[str, Any] = {"fit": args.fit, **fit.to_dict(), "source": fit.source}
    if args.compute is not None:
        n_opt, d_opt = fit.compute_optimal(args.compute)
        out |= {"compute": args.compute, "n_opt": n_opt, "d_opt": d_opt, "tokens_per_param": d_opt / n_opt}
        out["loss_opt"] = fit.loss(n_opt, d_opt)
        text = (
            f"C = {args.compute:.3g} FLOPs: N_opt = {n_opt:.4g}, D_opt = {d_opt:.4g} "
            f"({d_opt / n_opt:.1f} tokens per parameter), loss {out['loss_opt']:.4f} ({fit.source})"
        )
    else:
        out |= {"params": args.params, "tokens": args.tokens, "loss": fit.loss(args.params, args.tokens)}
        text = f"L(N={args.params:.4g}, D={args.tokens:.4g}) = {out['loss']:.4f} ({fit.source})"
    _emit(out, args.json, text)


def _ladder(args) -> dict:
    from .experiments import scaling_ladder

    if args.fit or args.params or args.tokens or args.compute:
        raise LabError("scaling --ladder takes no --fit, --params, --tokens or --compute")
    if args.live:
        settings = scaling_ladder.LadderSettings()
        result = scaling_ladder.measure(settings, on_event=lambda e: print(json_line(e), flush=True))
        where = "measured now on this machine"
    else:
        shipped = scaling_ladder.shipped()
        result, where = shipped.result, "pre-measured " + shipped.provenance["date"]
    row_keys = (
        "params",
        "tokens",
        "val_loss",
        "val_losses",
        "design",
        "budget",
        "compute",
        "steps",
        "epochs",
    )
    return {
        "rows": [{k: r[k] for k in row_keys} for r in result["rows"]],
        "fit": result["fit"],
        "bootstrap": result["bootstrap"],
        "log_residuals": result["log_residuals"],
        "isoflop": result["isoflop"],
        "isoflop_a": result["isoflop_a"],
        "isoflop_a_interval": result["isoflop_a_interval"],
        "measured": where,
    }


def cmd_finetune(args, cfg: ModelConfig, notes: list[str]) -> None:
    from .experiments.finetune import FinetuneSettings, finetune_run

    if args.config is not None or args.overrides:
        raise LabError("finetune takes --preset only: it fine-tunes the preset's live copy")
    settings = FinetuneSettings(
        method=args.method,
        rank=args.rank,
        alpha=args.alpha,
        targets=targets_from(args.targets),
        steps=args.steps,
        pretrain_steps=args.pretrain_steps,
        seq_len=args.seq_len,
        batch=args.batch,
        device=args.device,
        save_adapter=args.save_adapter,
    )

    def on_step(record: dict) -> None:
        print(
            json_line(record) if args.json else f"step {record['step']} loss {record['loss']:.4f}", flush=True
        )

    r = finetune_run(args.preset or "seed-demo", settings, on_step=on_step)
    last = {
        "step": len(r.losses),
        "loss": r.losses[-1],
        "val_loss_before": r.val_loss_before,
        "val_loss_after": r.val_loss_after,
        "measured_trainable_params": r.measured_trainable_params,
        "predicted_trainable_params": r.predicted_trainable_params,
        "measured_peak_bytes": r.measured_peak_bytes,
        "predicted_peak_bytes": r.predicted_peak_bytes,
        "peak_ratio": r.peak_ratio,
        "peak_source": r.peak_source,
        "base": r.base,
        "predicted_by_part": r.predicted_by_part,
        "merged_logits_max_abs_diff": r.merged_logits_max_abs_diff,
        "adapter_file": r.adapter_file,
    }
    text = (
        f"trainable parameters {r.measured_trainable_params:,} measured, {r.predicted_trainable_params:,} "
        f"predicted; peak {r.measured_peak_bytes:,} bytes measured, {r.predicted_peak_bytes:,} predicted "
        f"(ratio {r.peak_ratio:.3f}); held-out loss {r.val_loss_before:.4f} → {r.val_loss_after:.4f}"
        + (
            ""
            if r.merged_logits_max_abs_diff is None
            else f"; merged into the weights, logits within {r.merged_logits_max_abs_diff:.2g}"
        )
        + (f"; adapters saved to {r.adapter_file}" if r.adapter_file else "")
    )
    _emit(last, args.json, text)


COMMANDS = {
    "finetune": cmd_finetune,
    "analyze": cmd_analyze,
    "quantize": cmd_quantize,
    "gradnorms": cmd_gradnorms,
    "bench": cmd_bench,
    "train": cmd_train,
    "report": cmd_report,
    "parallel": cmd_parallel,
    "shard": cmd_shard,
}


NO_CONFIG_COMMANDS = {"presets": cmd_presets, "speculate": cmd_speculate, "distill": cmd_distill}

# the commands that build and run the model itself (the live model is a text decoder)
LIVE_COMMANDS = ("gradnorms", "bench", "train")


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.command in NO_CONFIG_COMMANDS:  # no model config
            NO_CONFIG_COMMANDS[args.command](args)
            return 0
        if args.command == "scaling":  # no model config
            cmd_scaling(args)
            return 0
        if args.command == "validate":
            _emit_pair(cmd_validate(args), args.json)
            return 0
        cfg, notes = resolve_config(args)
        if args.command in LIVE_COMMANDS and cfg.vision is not None:  # a multimodal model, run live
            notes.append("the live model is the text decoder: the vision tower and projector are not built")
            cfg = cfg.replace(vision=None)
        for note in notes:
            print(strip_control(f"note: {note}"), file=sys.stderr)
        with allocation_failures_refused(f"python -m llama_lab {args.command}"):
            if args.command == "predict":
                _emit_pair(cmd_predict(args, cfg), args.json)
            else:
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
