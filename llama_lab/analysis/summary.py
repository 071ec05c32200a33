"""The ``analyze --json`` object, and the CLI's plain-text table of it."""

from __future__ import annotations

from ..config import ModelConfig, families
from ..config.hf.family import Counts
from ..runtime.hardware import GPUS
from ..units import human_bytes, human_count, human_params
from .common import check_seq, checked_dtype_bytes, training_dtype
from .flash import attention_memory
from .flops import count_flops
from .kv import kv_cache, max_context_that_fits, naive_mla_bytes_per_token, state_bytes
from .memory import inference_memory, training_memory
from .params import ParamCount, count_params
from .quant import WeightQuant, as_weight_quant, weights_bytes
from .vision import check_images, image_summary, image_tokens, tokens_with_images


def family_notes(cfg: ModelConfig, params: ParamCount | None = None) -> list[str]:
    """One line each for what sets the config apart from a plain LLaMA: head_dim, QK-norm,
    windows, experts, … (each family's notes, ``config.families``), every figure computed from
    the config and its counts."""
    params = params or count_params(cfg)
    counts = Counts(
        total=params.total,
        active=params.active,
        embedding=params.by_component["embedding"],
        experts=params.detail.get("experts", 0),
        sandwich_norms=params.detail.get("pre_feedforward_layernorm", 0)
        + params.detail.get("post_feedforward_layernorm", 0),
        state_bytes=state_bytes(cfg, "bf16"),
        vision=params.by_component.get("vision", 0) + params.by_component.get("projector", 0),
        image_tokens=image_tokens(cfg.vision) if cfg.vision is not None else 0,
    )
    return families.family_notes(cfg, counts)


FLOP_KEYS = (
    "forward",
    "by_component",
    "training_step",
    "per_token",
    "training_per_token",
    "attention_scores_causal",
    "forward_causal",
    "palm_params",
    "palm_training_per_token",
    "elementwise",
    "elementwise_constants",
    "conventions",
)


def architecture(cfg: ModelConfig) -> dict:
    """What sets the config's family apart: head_dim, QK-norm, windows, experts."""
    return {
        "head_dim": cfg.head_dim,
        "qk_norm": cfg.qk_norm,
        "sliding_window": cfg.sliding_window,
        "local_layers": sum(cfg.local_layer_flags),
        "sparse_layers": sum(cfg.moe_layer_flags),
        "n_experts": cfg.n_experts,
        "experts_per_token": cfg.experts_per_token,
        "n_shared_experts": cfg.n_shared_experts,
        "mla": cfg.is_mla,
        "kv_lora_rank": cfg.kv_lora_rank,
        "encoder_layers": cfg.encoder_layers,  # > 0: an encoder-decoder (the 2017 Transformer)
    }


def analyze(
    cfg: ModelConfig,
    seq_len: int,
    batch: int = 1,
    dtype: str = "bf16",
    weights: "WeightQuant | str | None" = None,
    kv_dtype: str | None = None,
    images: int = 0,
    image_size: tuple[int, int] | None = None,
) -> dict:
    """The ``analyze --json`` object (plain JSON types), plus extra keys. ``weights`` (a
    format or its name) and ``kv_dtype`` default to ``dtype``. A multimodal config (``vision``)
    adds ``image_tokens`` and ``vision`` (what one image costs); ``images`` per sequence join
    its ``seq_len`` text tokens in the text decoder's counts (FLOPs, KV cache, memory), and
    ``flops.prefill_with_images`` adds the encoder's FLOPs for every image."""
    check_seq(seq_len, batch)
    check_images(images)
    text_tokens = seq_len
    seq_len = tokens_with_images(cfg, seq_len, images, image_size)
    checked_dtype_bytes(dtype)
    weights = as_weight_quant(weights or dtype)
    kv_dtype = kv_dtype or dtype
    stored = weights_bytes(cfg, weights)
    params = count_params(cfg)
    flops = count_flops(cfg, seq_len, batch)
    kv = kv_cache(cfg, seq_len, batch, kv_dtype)
    compute = training_dtype(dtype)
    training = training_memory(cfg, seq_len, batch, compute)
    inference = inference_memory(cfg, seq_len, batch, dtype, weights, kv_dtype)
    attention = attention_memory(cfg, seq_len, batch, compute)
    notes = []
    if seq_len > cfg.max_seq_len:
        notes.append(
            f"seq_len={seq_len} exceeds max_seq_len={cfg.max_seq_len}: counted as if the model allowed it"
        )
    if cfg.pos_encoding == "learned":
        notes.append(
            "params.by_component.embedding includes the learned positional table "
            f"({params.by_component['positional']:,})"
        )
    if cfg.is_encoder_decoder:
        notes.append(
            "encoder-decoder: flops, kv_cache, attention_memory and memory's activations count the "
            "encoder over a source as long as the target (seq_len) and every decoder block's "
            "cross-attention; training's activations are what the encoder, the decoder and the "
            "loss on the logits save, inference's the larger of the encoder's and the decoder's "
            "forward peak (the caches counted under kv_cache)"
        )
    if not cfg.lm_head:
        notes.append(
            "a bare encoder (lm_head=False): memory's activations count the encoder"
            + (" and its pooler" if cfg.pooler else "")
            + ", without a task head or loss (the model has none)"
        )
    params_out = {
        "total": params.total,
        "active": params.active,
        "by_component": params.spec_by_component(),
        "non_embedding": params.non_embedding,
        "per_layer": params.per_layer,
        "detail": params.detail,
    }
    vision = {}
    if cfg.vision is not None:  # params.text_decoder: the decoder alone, as a text-only file counts it
        summary = image_summary(cfg, images, kv.bytes_per_token, image_size)
        encoder = batch * images * summary["flops_per_image"]
        params_out["text_decoder"] = params.total - summary["vision_params"] - summary["projector_params"]
        vision = {
            "image_tokens": summary["image_tokens"],
            "vision": {
                **summary,
                "flops_all_images": encoder,
                "prefill_with_images": flops.forward + encoder,
            },
        }
        notes.append(
            f"params.total is the whole multimodal model: the text decoder "
            f"({params_out['text_decoder']:,}, params.text_decoder) plus the vision tower "
            f"({summary['vision_params']:,}) and projector ({summary['projector_params']:,}); "
            "params.active counts the tower too (every image runs all of it)"
        )
        if images:
            notes.append(
                f"seq_len {text_tokens} text tokens + {images} image(s) × {summary['image_tokens']} tokens = "
                f"{seq_len} tokens through the text decoder"
            )
    return {
        **vision,
        "inputs": {
            "text_tokens": text_tokens,
            "images": images,
            "seq_len": seq_len,
            "batch": batch,
            "dtype": dtype,
            "weight_dtype": weights.dtype,
            "kv_dtype": kv_dtype,
            "attention_kind": cfg.attention_kind,
        },
        "architecture": architecture(cfg),
        "params": params_out,
        "flops": {key: getattr(flops, key) for key in FLOP_KEYS},
        "kv_cache": {
            "dtype": kv_dtype,
            "bytes_per_token": kv.bytes_per_token,
            "bytes_per_sequence": kv.bytes_per_sequence,
            "bytes": kv.bytes,
            "compare": kv.compare,
            "compare_kv_heads": kv.compare_kv_heads,
            "by_dtype": kv.by_dtype,
            **({"naive_bytes_per_token": naive_mla_bytes_per_token(cfg, kv_dtype)} if cfg.is_mla else {}),
            **({"state_bytes": kv.state_bytes} if cfg.has_linear_attention else {}),
            # an encoder-decoder's cross-attention K and V of the source, fixed (in bytes)
            **(
                {"cross_attention_bytes": kv.cross_bytes, "source_len": kv.source_len}
                if cfg.is_encoder_decoder
                else {}
            ),
            "max_context_by_gpu": {
                name: max_context_that_fits(cfg, gpu, batch, weights, kv_dtype) for name, gpu in GPUS.items()
            },
            "note": kv.note,
        },
        "attention_memory": attention.to_dict(),
        "memory": {
            "weights_bytes": stored.total,
            "weights": {key: value for key, value in stored.to_dict().items() if key != "by_tensor"},
            "inference": {"components": inference.components, "total_bytes": inference.total_bytes},
            "training": {
                "dtype": compute,
                "mixed_precision": compute != "fp32",
                "components": training.components,
                "total_bytes": training.total_bytes,
            },
        },
        "notes": notes,
    }


def _table(title: str, rows: list[tuple[str, str, str]]) -> list[str]:
    width = max(len(r[0]) for r in rows)
    mid = max(len(r[1]) for r in rows)
    lines = [title, "-" * len(title)]
    lines += [f"  {name:<{width}}  {exact:>{mid}}  {readable}" for name, exact, readable in rows]
    return lines + [""]


def format_analysis(result: dict) -> str:
    """A readable plain-text report of an ``analyze`` result (the CLI's default output)."""
    inputs, params, flops, kv = result["inputs"], result["params"], result["flops"], result["kv_cache"]
    total = params["total"]
    lines = [
        f"LLaMA Lab analysis - seq_len {inputs['seq_len']}, batch {inputs['batch']}, "
        f"dtype {inputs['dtype']}, {inputs['attention_kind']}",
        "",
    ]
    rows = [
        (name, f"{count:,}", f"{human_params(count):>10}  {100 * count / total:5.1f}%")
        for name, count in params["by_component"].items()
    ]
    rows += [
        (name, f"{params[key]:,}", f"{human_params(params[key]):>10}")
        for name, key in (
            ("total", "total"),
            ("active per token", "active"),
            ("non-embedding", "non_embedding"),
            ("per layer", "per_layer"),
        )
    ]
    lines += _table("Parameters", rows)
    forward = flops["forward"]
    rows = [
        (name, f"{value:,}", f"{human_count(value, 'FLOP'):>14}  {100 * value / forward:5.1f}%")
        for name, value in flops["by_component"].items()
    ]
    summary = (
        ("forward", flops["forward"]),
        ("  causal scores only", flops["forward_causal"]),
        ("per token", flops["per_token"]),
        ("training step (3x)", flops["training_step"]),
        ("training / token", flops["training_per_token"]),
        ("PaLM 6N+12LHQT / token", flops["palm_training_per_token"]),
        ("element-wise (not in fwd)", flops["elementwise"]["total"]),
    )
    rows += [(name, f"{value:,.0f}", f"{human_count(value, 'FLOP'):>14}") for name, value in summary]
    lines += _table("FLOPs (2 per multiply-add; scores over the full T x T)", rows)
    rows = [
        ("bytes / token", f"{kv['bytes_per_token']:,}", human_bytes(kv["bytes_per_token"])),
        ("bytes / sequence", f"{kv['bytes_per_sequence']:,}", human_bytes(kv["bytes_per_sequence"])),
        ("bytes (B x T)", f"{kv['bytes']:,}", human_bytes(kv["bytes"])),
    ]
    if "naive_bytes_per_token" in kv:  # MLA: the per-head K/V it does not cache
        naive = kv["naive_bytes_per_token"]
        rows.append(("naive per-head K/V / token", f"{naive:,}", human_bytes(naive)))
    rows += [
        (
            f"{kind.upper()} (n_kv_heads={kv['compare_kv_heads'][kind]}) / token",
            f"{value:,}",
            human_bytes(value),
        )
        for kind, value in kv["compare"].items()
    ]
    lines += _table(f"KV cache ({kv['dtype']})", rows)
    memory = result["memory"]
    rows = [
        (f"inference: {name}", f"{value:,}", human_bytes(value))
        for name, value in memory["inference"]["components"].items()
    ]
    rows.append(
        (
            "inference total",
            f"{memory['inference']['total_bytes']:,}",
            human_bytes(memory["inference"]["total_bytes"]),
        )
    )
    rows += [
        (f"training: {name}", f"{value:,}", human_bytes(value))
        for name, value in memory["training"]["components"].items()
    ]
    rows.append(
        (
            "training total (1 GPU)",
            f"{memory['training']['total_bytes']:,}",
            human_bytes(memory["training"]["total_bytes"]),
        )
    )
    lines += _table("Memory", rows)
    if "vision" in result:  # a multimodal model: what one image costs
        v = result["vision"]
        rows = [
            ("image size (pixels)", "x".join(map(str, v["image_size"])), ""),
            ("image tokens", f"{v['image_tokens']:,}", "per image"),
            ("vision tower params", f"{v['vision_params']:,}", human_params(v["vision_params"])),
            ("projector params", f"{v['projector_params']:,}", human_params(v["projector_params"])),
            ("encoder FLOPs / image", f"{v['flops_per_image']:,}", human_count(v["flops_per_image"], "FLOP")),
            (
                "KV cache / image",
                f"{v['kv_cache_bytes_per_image']:,}",
                human_bytes(v["kv_cache_bytes_per_image"]),
            ),
        ]
        lines += _table(f"Images ({v['kind']} tower, {v['projector']} projector)", rows)
    lines += [f"note: {note}" for note in result.get("notes", [])]
    return "\n".join(lines).rstrip() + "\n"
