"""``python -m llama_lab predict decode|train`` and ``validate``: predicted times against public
measurements (llama_lab.validation). Their arguments and their commands."""

from __future__ import annotations

import argparse
from dataclasses import replace

from .analysis.common import TRAINING_DTYPES
from .config import ModelConfig
from .errors import LabError
from .runtime.hardware import GPUS, RUNTIMES, VLLM_GPU_MEMORY_UTILIZATION

# --cp, for `parallel` and `predict train` alike
CP_HELP = (
    "context-parallel ranks: each holds T/cp of every sequence, K and V passed around the ring "
    "(gpus = tp · pp · cp · dp; 2·cp must divide the sequence)"
)
EP_HELP = (
    "expert-parallel ranks, taken from the dp · cp replicas: each holds E/ep of every MoE block's "
    "experts, the routed tokens sent to them and back in all-to-alls"
)


def add_parsers(sub, add_config_args, positive_int) -> None:
    """The ``predict`` (with its two kinds) and ``validate`` subcommands."""
    p = sub.add_parser("predict", help="a workload's time: the roofline bound and the calibrated estimate")
    kinds = p.add_subparsers(dest="predict_kind", required=True, parser_class=type(p))
    gpu_help = f"one of: {', '.join(GPUS)} (case and spaces free, e.g. h100-80gb)"

    d = kinds.add_parser("decode", help="generated tokens per second summed over the batch")
    add_config_args(d)
    d.add_argument("--gpu", required=True, help=gpu_help)
    d.add_argument("--gpus", type=positive_int, default=1, help="GPUs of one tensor-parallel group")
    d.add_argument("--tp", type=positive_int, default=None, help="tensor-parallel ranks (default --gpus)")
    d.add_argument("--batch", type=positive_int, default=1)
    d.add_argument("--prompt-len", type=positive_int, default=128)
    d.add_argument("--new-tokens", type=positive_int, default=128)
    d.add_argument(
        "--weight-dtype",
        choices=("bf16", "fp16", "fp8", "int8", "int4"),
        default=None,
        help="the weights' stored format (default: a --config file's own quantization_config, "
        "module by module, else bf16)",
    )
    d.add_argument("--kv-dtype", choices=("bf16", "fp16", "fp8", "int8"), default="bf16")
    d.add_argument(
        "--activation-dtype",
        choices=("bf16", "fp16", "fp8", "int8"),
        default=None,
        help="what the matmuls compute in (default bf16); fp8/int8: dynamic activation "
        "quantisation with weights of that format (W8A8), at its tensor peak",
    )
    d.add_argument(
        "--gpu-memory-utilization",
        type=float,
        default=VLLM_GPU_MEMORY_UTILIZATION,
        help="the share of each GPU's memory a vLLM-style engine fills (its KV cache takes what the "
        "weights and its profiling forward leave)",
    )
    d.add_argument(
        "--runtime",
        choices=RUNTIMES,
        default="compiled",
        help="compiled: CUDA graphs or torch.compile, as the fitted rows ran; eager: every kernel "
        "launched from Python, adding a launch cost per kernel the forward runs",
    )
    engine = "the engine's profiling forward (default: vllm serve's for the GPU)"
    d.add_argument("--max-num-batched-tokens", type=positive_int, default=None, help=f"tokens of {engine}")
    d.add_argument("--max-num-seqs", type=positive_int, default=None, help=f"sequences of {engine}")

    t = kinds.add_parser("train", help="training tokens per second per GPU and MFU of a layout")
    add_config_args(t)
    t.add_argument("--gpu", required=True, help=gpu_help)
    t.add_argument("--gpus", type=positive_int, required=True)
    t.add_argument("--tp", type=positive_int, default=1)
    t.add_argument("--pp", type=positive_int, default=1)
    t.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=1)
    t.add_argument("--seq-len", type=positive_int, default=None, help="default: the model's max_seq_len")
    t.add_argument("--micro-batch", type=positive_int, default=1)
    t.add_argument("--micro-batches", type=positive_int, default=None)
    t.add_argument(
        "--global-batch",
        type=positive_int,
        default=None,
        help="sequences per step over every data-parallel rank: micro-batches = GB / (dp · micro-batch)",
    )
    t.add_argument("--cp", type=positive_int, default=1, help=CP_HELP)
    t.add_argument("--ep", type=positive_int, default=1, help=EP_HELP)
    t.add_argument(
        "--vp",
        type=positive_int,
        default=1,
        help="virtual pipeline stages per GPU (V > 1: the interleaved 1F1B schedule, bubble (p−1)/(V·m))",
    )
    t.add_argument("--recompute", choices=("none", "selective", "full"), default="none")
    t.add_argument(
        "--dtype",
        choices=(*TRAINING_DTYPES, "fp8"),
        default="bf16",
        help="fp8: the GEMMs in fp8 with bf16 master weights (bounded at the fp8 dense peak)",
    )
    t.add_argument("--sequence-parallel", action="store_true")

    f = kinds.add_parser(
        "finetune", help="one GPU's fine-tuning step: trainable parameters, peak bytes, tokens/s"
    )
    add_config_args(f)
    add_finetune_args(f, positive_int)
    f.add_argument("--gpu", required=True, help=gpu_help)
    f.add_argument("--seq-len", type=positive_int, required=True)
    f.add_argument("--batch", type=positive_int, required=True)

    v = sub.add_parser("validate", help="every public measurement against the prediction, with errors")
    v.add_argument(
        "--kind",
        help="one kind of row: decode_bs1, decode_batched, prefill, train, memory, kv_capacity, "
        "finetune_memory or finetune_throughput (default: every row)",
    )
    v.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def add_finetune_args(p, positive_int) -> None:
    """The recipe of ``predict finetune`` (and of a live fine-tuning run). The method and the
    optimizer are checked by ``analysis.finetune.FinetuneSpec`` (a one-line refusal naming the
    choices), so building the parser imports no analysis."""
    p.add_argument("--method", required=True, help="lora, qlora, dora or full")
    p.add_argument("--rank", type=positive_int, default=8, help="LoRA rank r (default 8, PEFT's)")
    p.add_argument(
        "--alpha", type=float, default=None, help="LoRA alpha (default 8, PEFT's): scales, counts nothing"
    )
    p.add_argument(
        "--targets",
        default="q_proj,v_proj",
        help="comma-separated module names (PEFT's suffix rule) or all-linear (default q_proj,v_proj)",
    )
    p.add_argument("--optimizer", default="adamw", help="adamw, adamw8bit or paged_adamw8bit")
    p.add_argument("--grad-checkpointing", action="store_true")
    p.add_argument("--rslora", action="store_true", help="rank-stabilised scaling alpha/√r (same counts)")
    p.add_argument(
        "--loss",
        choices=("upcast", "logits", "chunked"),
        default="upcast",
        help="upcast: the N·V logits upcast to float32 for the cross-entropy (transformers' loss); "
        "logits: the same in --dtype; chunked: the head and loss in chunks, never the N·V logits",
    )
    p.add_argument("--dtype", choices=TRAINING_DTYPES, default="bf16")
    p.add_argument(
        "--pure-16bit",
        action="store_true",
        help="trainable weights, gradients and AdamW states all in --dtype, no float32 copy "
        "(torchtune's recipes); default: PEFT's float32 adapters, full fine-tuning in mixed precision",
    )


def targets_from(text: str) -> tuple[str, ...] | str:
    """``--targets``: "all-linear", or comma-separated module names."""
    text = text.strip()
    if text == "all-linear":
        return text
    return tuple(name.strip() for name in text.split(",") if name.strip())


def finetune_spec_from_args(args: argparse.Namespace):
    """The ``FinetuneSpec`` a command line names."""
    from .analysis.finetune import FinetuneSpec

    return FinetuneSpec(
        args.method,
        args.rank,
        args.alpha,
        targets_from(args.targets),
        args.optimizer,
        args.grad_checkpointing,
        args.dtype,
        args.rslora,
        args.loss,
        args.pure_16bit,
    )


def _gib(n: float) -> str:
    return f"{n / 2**30:,.2f} GiB"


def finetune_text(r: dict) -> str:
    """``predict finetune``'s answer in words: the counts, the peak by part, the fit, the rate."""
    peak = r["peak_bytes"]
    fits = "fits" if r["fits"] else "does NOT fit"
    lines = [
        f"{r['method']} on {r['gpu']}, batch {r['batch']} × {r['seq_len']} tokens: "
        f"{r['trainable_params']:,} trainable parameters ({r['frozen_params']:,} frozen)",
        f"peak {_gib(peak['estimate'])} ({_gib(peak['low'])}–{_gib(peak['high'])}) of "
        f"{_gib(r['gpu_memory_bytes'])} usable: {fits}",
    ]
    lines += [f"  {part:18s} {_gib(value):>14s}" for part, value in r["by_part"].items() if value]
    t = r["tokens_per_s"]
    lines.append(
        f"tokens/s: estimate {t['estimate']:,.4g} ({t['low']:,.4g}–{t['high']:,.4g}), bound {t['bound']:,.4g}"
    )
    return "\n".join(lines)


def _band(values: dict, unit: str) -> str:
    return (
        f"bound {values['bound']:,.4g} {unit}, estimate {values['estimate']:,.4g} "
        f"({values['low']:,.4g}–{values['high']:,.4g})"
    )


def _fits_line(m: dict) -> str:
    """Whether the weights and the cache fit, with the reserves and the engine setting named."""
    need, margin = m["weights_and_cache_bytes_per_gpu"], m["margin_bytes"]
    text = (
        f"weights + cache {need / 1e9:,.2f} GB per GPU of {m['reported_bytes'] / 1e9:,.2f} GB reported, "
        f"less a {m['cuda_context_bytes'] / 1e9:.1f} GB CUDA context: "
        + (f"fits with {margin / 1e9:,.2f} GB to spare" if m["fits"] else f"short by {-margin / 1e9:,.2f} GB")
    )
    default = m["vllm_default_gpu_memory_utilization"]
    at = "fits" if m["fits_at_vllm_default"] else "does not fit"
    return text + (
        f"; at vLLM's default gpu_memory_utilization {default} it {at} "
        f"(needs ≥ {m['gpu_memory_utilization_needed']:.3f})"
    )


def _cache_line(m: dict) -> str:
    """The tokens a vLLM-style paged cache holds, and the engine settings behind them."""
    tokens, e = m["kv_cache_tokens"], m["engine"]
    return (
        f"KV cache at gpu_memory_utilization {e['gpu_memory_utilization']:g}: "
        f"{tokens['estimate']:,.0f} tokens ({tokens['low']:,.0f}–{tokens['high']:,.0f}), after a "
        f"profiling forward of {e['max_num_batched_tokens']:,} tokens over {e['max_num_seqs']:,} sequences"
    )


def layout_from_args(args: argparse.Namespace):
    """The training layout a ``parallel`` or ``predict train`` command line names (1F1B, one
    chunk per GPU unless --schedule / --chunks, or --vp, say otherwise; the micro-batches per
    step given, or --global-batch's share of each data-parallel rank)."""
    from .analysis.parallel import Layout

    vp = getattr(args, "vp", 1)
    schedule, chunks = (
        ("interleaved", vp) if vp > 1 else (getattr(args, "schedule", "1f1b"), getattr(args, "chunks", 1))
    )
    layout = Layout(
        args.gpus,
        args.tp,
        args.pp,
        args.zero,
        args.sequence_parallel,
        args.recompute,
        args.micro_batch,
        args.micro_batches or 0,
        schedule,
        chunks,
        getattr(args, "cp", 1),
        getattr(args, "ep", 1),
    )
    return with_global_batch(layout, getattr(args, "global_batch", None), args.micro_batches)


def with_global_batch(layout, global_batch: int | None, micro_batches: int | None):
    """``layout`` with the micro-batches per step a global batch of sequences makes on each
    data-parallel rank (GB = dp · micro-batch · m), refused where it does not divide."""
    if global_batch is None:
        return layout
    per_step = layout.dp * layout.micro_batch
    if layout.dp < 1 or global_batch % per_step:
        raise LabError(
            f"--global-batch {global_batch} is not a whole number of micro-batches: dp={layout.dp} × "
            f"micro-batch={layout.micro_batch} = {per_step} sequences per micro-batch step must divide it"
        )
    m = global_batch // per_step
    if micro_batches is not None and micro_batches != m:
        raise LabError(
            f"--micro-batches {micro_batches} and --global-batch {global_batch} disagree: "
            f"{global_batch} / (dp={layout.dp} × micro-batch={layout.micro_batch}) = {m}"
        )
    return replace(layout, micro_batches=m)


def file_weights(path: str | None):
    """A config file's own stored format (``analysis.stored_weights`` of its quantization_config),
    None for a preset or a file that declares none."""
    from .analysis import stored_weights
    from .config.files import load_stored_quant

    stored = load_stored_quant(path) if path is not None else None
    return stored_weights(stored) if stored is not None else None


def cmd_predict(args: argparse.Namespace, cfg: ModelConfig) -> tuple[dict, str]:
    """The prediction as JSON and as one line of text."""
    from .validation.predict import find_gpu, predict_decode, predict_finetune, predict_train

    gpu = find_gpu(args.gpu)
    if args.predict_kind == "finetune":
        from .config.files import load_stored_quant

        stored = load_stored_quant(args.config) if args.config is not None else None
        r = predict_finetune(cfg, gpu, finetune_spec_from_args(args), args.seq_len, args.batch, stored)
        return r, finetune_text(r)
    if args.predict_kind == "decode":
        weights = args.weight_dtype or file_weights(args.config) or "bf16"
        workload = (args.batch, args.prompt_len, args.new_tokens, weights, args.kv_dtype)
        engine = (args.gpu_memory_utilization, args.max_num_batched_tokens, args.max_num_seqs)
        r = predict_decode(
            cfg,
            gpu,
            args.gpus,
            args.tp,
            *workload,
            *engine,
            activations=args.activation_dtype,
            runtime=args.runtime,
        )
        return r, "\n".join(
            [
                f"{gpu.name} × {r['tp']} ({r['runtime']}), weights stored as {r['weight_dtype']}: "
                f"{_band(r['tokens_per_s'], 'tokens/s')}",
                f"time to first token: {_band(r['ttft_ms'], 'ms')}",
                f"the whole batch (prefill + {args.new_tokens} steps): {_band(r['e2e_s'], 's')}",
                _fits_line(r["memory"]),
                _cache_line(r["memory"]),
            ]
        )
    layout = layout_from_args(args)
    r = predict_train(cfg, gpu, layout, args.seq_len or cfg.max_seq_len, args.dtype)
    fits = "fits" if r["fits"] else "does NOT fit"
    return r, (
        f"{r['layout']} on {gpu.name}: {_band(r['tokens_per_s_per_gpu'], 'tokens/s per GPU')}; MFU "
        f"estimate {r['mfu']['estimate']:.1%}; {r['per_gpu_bytes'] / 2**30:,.1f} GiB per GPU {fits}"
    )


def cmd_validate(args: argparse.Namespace) -> tuple[dict, str]:
    from .validation import validate

    r = validate(args.kind)
    lines = [f"{'row':50s} {'half':8s} {'measured':>10s} {'bound':>10s} {'estimate':>10s} {'error':>7s}"]
    for row in r["rows"]:
        if row["estimate"] is None:
            why = row["not_predicted"]
            lines.append(f"{row['id']:50s} {row['half']:8s} {row['measured']:10.4g}  not predicted: {why}")
            continue
        lines.append(
            f"{row['id']:50s} {row['half']:8s} {row['measured']:10.4g} {row['bound']:10.4g} "
            f"{row['estimate']:10.4g} {row['rel_error']:+7.1%}"
        )
    for kind, s in r["summary"].items():
        held = s["held_out_median_abs_error"]
        lines.append(
            f"{kind}: {s['predicted']} of {s['n']} rows predicted; held-out median |error| "
            + ("—" if held is None else f"{held:.1%}, worst {s['held_out_max_abs_error']:.1%}")
        )
    return r, "\n".join(lines)
