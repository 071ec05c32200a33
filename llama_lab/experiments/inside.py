"""Inside the model: one real forward pass of a small model of the sidebar's recipe, opened up
block by block — each head's attention map (the model's own q and k, softmax(qkᵀ/√D) under its
causal mask and window), RoPE's rotation and its offset property measured on the model's own
q/k, the residual stream's RMS through the blocks, what each norm does to its input, the share
of SwiGLU gates that are closed, a logit lens (the head applied after every block), and a
mixture's routing. Everything is read off the module as it runs (forward hooks on the blocks and
sublayers) and recomputed only where the fused kernel hides it (the attention weights), with
the recomputation checked against the module's own output (``max_attention_error``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, TypedDict

import torch
from torch.utils.hooks import RemovableHandle

from ..config import ModelConfig, live_config, require_decoder_only
from ..config.sparse import SparsePattern
from ..model import (
    CausalLM,
    apply_rope,
    apply_rope_interleaved,
    build_model,
    reference_attention,
    rope_cos_sin,
    rope_inv_freq,
    sinusoidal_table,
)
from ..model.mla import LatentAttention
from ..model.mlp import MLP, MoE
from ..runtime.devices import pick_device
from ..train.data import TokenData, decode_tokens, encode_text, load_builtin
from ..train.loop import TrainRun, TrainSettings, train
from ..units import Progress


class InsideDefaults(TypedDict):
    d_model: int
    n_layers: int
    steps: int
    lr: float
    seq_len: int
    batch: int
    max_text: int
    top_k: int


# The model the page opens: the sidebar's recipe at d=64, 4 blocks, byte-level vocabulary,
# trained briefly on the built-in text (a few seconds on a CPU); texts of up to 96 bytes.
INSIDE_DEFAULTS = InsideDefaults(
    d_model=64, n_layers=4, steps=200, lr=5e-3, seq_len=64, batch=8, max_text=96, top_k=5
)
DEFAULT_TEXT = "Return the number of items in a container."
INSIDE_WINDOW = 16  # a sliding window scaled down with the model, so that a text shows it
_D = INSIDE_DEFAULTS


def inside_config(base: ModelConfig) -> ModelConfig:
    """``base``'s recipe at the page's size, with room for the longest text; a sliding window
    becomes at most INSIDE_WINDOW tokens."""
    cfg = live_config(base, _D["n_layers"], _D["d_model"], max(_D["seq_len"], _D["max_text"]))
    if cfg.sliding_window:
        cfg = cfg.replace(sliding_window=min(cfg.sliding_window, INSIDE_WINDOW))
    return cfg


def inside_settings(steps: int) -> dict:
    """How the page's small copy is trained (INSIDE_DEFAULTS; ``steps`` 0: untrained)."""
    return {"steps": steps, "lr": _D["lr"], "seq_len": _D["seq_len"], "batch": _D["batch"], "seed": 0}


def trained_inside(
    cfg: ModelConfig,
    steps: int = _D["steps"],
    device: str = "cpu",
    data: TokenData | None = None,
    progress: Progress | None = None,
) -> tuple[CausalLM, TrainRun]:
    """``cfg`` trained ``steps`` ≥ 1 AdamW steps on the built-in text, in eval mode, and the
    run's record (its losses)."""
    s = inside_settings(steps)
    kept: list[CausalLM] = []
    run = train(
        cfg,
        TrainSettings(
            steps=steps,
            lr=s["lr"],
            seq_len=s["seq_len"],
            batch=s["batch"],
            seed=s["seed"],
            device=device,
            eval_batches=1,
        ),
        data=data or load_builtin(),
        keep_model=kept,
        progress=progress,
    )
    return kept[0].eval(), run


def inside_model(
    cfg: ModelConfig,
    steps: int = _D["steps"],
    device: str = "cpu",
    data: TokenData | None = None,
    progress: Progress | None = None,
) -> CausalLM:
    """``cfg`` trained ``steps`` AdamW steps on the built-in text (0: as initialised), eval mode."""
    require_decoder_only(cfg, "inside the model (its hooks)")
    if steps == 0:
        return build_model(cfg, device=pick_device(device), seed=0).eval()
    return trained_inside(cfg, steps, device, data, progress)[0]


def text_tokens(text: str, cfg: ModelConfig) -> torch.Tensor:
    """The typed text as byte tokens (1, T); refused when empty or longer than the model holds."""
    ids = encode_text(text)
    if ids.numel() == 0:
        raise ValueError("type some text first: the forward pass needs at least one token")
    limit = min(_D["max_text"], cfg.max_seq_len)
    if ids.numel() > limit:
        raise ValueError(f"the text is {ids.numel()} bytes; the model here reads at most {limit} (max_text)")
    return ids.view(1, -1)


TopK = list[list[tuple[int, float]]]  # per position: the top k (token, probability)


class OffsetScores(TypedDict):
    """``offset_probe``'s result for one kind of positions."""

    scores: list[float]  # the pair's score at each position m
    spread: float  # max − min of the scores
    scale: float  # the largest |score|


@dataclass
class LayerTrace:
    """One block of the forward pass (batch of one, T tokens)."""

    attention: torch.Tensor | None  # (H, T, T) softmax weights, rows sum to 1; None: Gated DeltaNet
    kv_head_of: list[int]  # the KV head each query head reads (GQA/MQA groups)
    window: int | None  # a sliding-window layer's W (a chunked layer's chunk)
    chunked: bool  # Llama 4: the window is fixed chunks of W positions, not the last W
    sparse: SparsePattern | None  # a sparse pattern on the window (global tokens, dilation, …)
    residual_in_rms: torch.Tensor  # (T,) RMS of the block's input, per token
    residual_out_rms: torch.Tensor  # (T,) of its output
    norm_in: dict[str, float]  # the attention sublayer's norm: its input's mean/std/rms
    norm_out: dict[str, float]  # ... and its output's
    attn_out_rms: float  # what the attention sublayer adds, RMS
    ffn_out_rms: float
    gate_closed_share: float | None  # SwiGLU: share of gate pre-activations below 0
    experts: torch.Tensor | None  # (T, k) a sparse block's chosen experts per token
    lens: TopK  # per position: [(token, probability)] top-k after the block
    max_attention_error: float  # |o_proj(weights @ v) − the module's output|, max


@dataclass
class ForwardTrace:
    config: dict[str, Any]  # ModelConfig.to_dict()
    tokens: list[int]
    pieces: list[str]  # each token as text (a byte, shown)
    layers: list[LayerTrace]  # per block
    final: TopK  # per position: top-k of the model's own next-token distribution
    logits: torch.Tensor  # (T, V) the model's output
    lens_logits: torch.Tensor  # (L, T, V) the head applied after each block
    rope: dict[str, Any] | None = None  # rope_probe on block 0 (RoPE models)
    # offset_probe: RoPE vs additive positions, by kind
    positions: dict[str, OffsetScores] = field(default_factory=dict)


def _stats(x: torch.Tensor) -> dict:
    x = x.float()
    return {
        "mean": float(x.mean(-1).abs().mean()),
        "std": float(x.std(-1).mean()),
        "rms": float(x.pow(2).mean(-1).sqrt().mean()),
    }


def _top(probs: torch.Tensor, k: int) -> list:
    values, ids = probs.topk(min(k, probs.shape[-1]), dim=-1)
    return [
        [(int(i), float(v)) for i, v in zip(row_ids, row_values)]
        for row_ids, row_values in zip(ids.tolist(), values.tolist())
    ]


class _Recorder:
    """Forward hooks on every block and sublayer, removed on exit."""

    def __init__(self, model: CausalLM):
        self.model = model
        # (block, name) → a module's positional inputs, and its output
        self.inputs: dict[tuple[int, str], tuple[Any, ...]] = {}
        self.outputs: dict[tuple[int, str], torch.Tensor] = {}
        self.handles: list[RemovableHandle] = []

    def _save(self, i: int, name: str, what: str):
        def hook(module: torch.nn.Module, args: tuple[Any, ...], output: torch.Tensor) -> None:
            if what == "in":
                self.inputs[(i, name)] = args
            else:
                self.outputs[(i, name)] = output

        return hook

    def __enter__(self) -> "_Recorder":
        for i, layer in enumerate(self.model.model.blocks):
            pairs = [
                (layer, "block"),
                (layer.mixer, "attn"),  # self_attn, or a Gated DeltaNet block's linear_attn
                (layer.ffn, "ffn"),
                (layer.first_norm, "norm1"),
            ]
            for module, name in pairs:
                self.handles.append(module.register_forward_hook(self._save(i, name + "_in", "in")))
                self.handles.append(module.register_forward_hook(self._save(i, name + "_out", "out")))
            ffn = layer.ffn
            if isinstance(ffn, MLP) and ffn.gated:
                self.handles.append(
                    ffn.gate_up_proj.register_forward_hook(self._save(i, "gate_up_out", "out"))
                )
        return self

    def __exit__(self, *exc) -> None:
        for handle in self.handles:
            handle.remove()


def _attention_weights(model: CausalLM, i: int, x: torch.Tensor, rope, out: torch.Tensor):
    """The block's attention weights from its own projections (``Attention.project``), and how
    far o_proj(weights @ v) is from what the module returned."""
    attn = model.model.blocks[i].self_attn
    q, k, v, gate = (
        (*attn.project(x, rope), None) if isinstance(attn, LatentAttention) else attn._project(x, rope)
    )
    cfg = model.cfg
    mixed, weights = reference_attention(
        q,
        k,
        v,
        cfg.n_rep,
        attn.window,
        getattr(attn, "sinks", None),
        scale=cfg.attention_multiplier,
        softcap=cfg.attn_softcap,
        chunk_start=0 if getattr(attn, "chunked", False) else None,
        sparse=getattr(attn, "sparse", None),
    )
    B, H, T, D = mixed.shape
    mixed = mixed.transpose(1, 2).reshape(B, T, H * D)
    again = attn.o_proj(mixed if gate is None else mixed * torch.sigmoid(gate))  # (Qwen3-Next's gate)
    return weights[0], float((again - out).abs().max())


@torch.no_grad()
def trace(model: CausalLM, ids: torch.Tensor, top_k: int = _D["top_k"]) -> ForwardTrace:
    """One forward of ``ids`` (1, T) opened up block by block."""
    cfg, body = model.cfg, model.model
    with _Recorder(model) as rec:
        logits = model(ids)[0].float()  # (T, V)
    layers, lens = [], []
    for i, layer in enumerate(body.blocks):
        inputs, outputs = rec.inputs, rec.outputs
        x_in = inputs[(i, "block_in")][0]
        attn_x, rope = inputs[(i, "attn_in")][0], inputs[(i, "attn_in")][1]
        weights, error = None, 0.0  # a Gated DeltaNet block has no attention weights
        if not layer.linear:
            weights, error = _attention_weights(model, i, attn_x, rope, outputs[(i, "attn_out")])
        h = outputs[(i, "block_out")]
        head_in = body.norm(h) if cfg.final_norm else h
        lens_logits = model.cap(model.lm_head(head_in))[0].float()
        lens.append(lens_logits)
        gate_up = outputs.get((i, "gate_up_out"))  # SwiGLU's gate and up, one GEMM
        ffn = layer.ffn
        gate = ffn.gate_up_proj.split(gate_up)[0] if isinstance(ffn, MLP) and gate_up is not None else None
        experts = None
        if isinstance(ffn, MoE):
            flat = inputs[(i, "ffn_in")][0].reshape(-1, cfg.d_model)
            experts = ffn.route(flat)[1]
        layers.append(
            LayerTrace(
                attention=None if weights is None else weights.float(),
                kv_head_of=[q // cfg.n_rep for q in range(cfg.n_heads)],
                window=None if layer.linear else layer.self_attn.window,
                chunked=not layer.linear and getattr(layer.self_attn, "chunked", False),
                sparse=None if layer.linear else getattr(layer.self_attn, "sparse", None),
                residual_in_rms=x_in[0].float().pow(2).mean(-1).sqrt(),
                residual_out_rms=h[0].float().pow(2).mean(-1).sqrt(),
                norm_in=_stats(inputs[(i, "norm1_in")][0][0]),
                norm_out=_stats(outputs[(i, "norm1_out")][0]),
                attn_out_rms=float(outputs[(i, "attn_out")].float().pow(2).mean().sqrt()),
                ffn_out_rms=float(outputs[(i, "ffn_out")].float().pow(2).mean().sqrt()),
                gate_closed_share=None if gate is None else float((gate < 0).float().mean()),
                experts=experts,
                lens=_top(lens_logits.softmax(-1), top_k),
                max_attention_error=error,
            )
        )
    tokens = ids[0].tolist()
    result = ForwardTrace(
        config=cfg.to_dict(),
        tokens=tokens,
        pieces=[decode_tokens(torch.tensor([t])) for t in tokens],
        layers=layers,
        final=_top(logits.softmax(-1), top_k),
        logits=logits,
        lens_logits=torch.stack(lens),
    )
    first = first_attention_block(model)  # the probes read an attention block's q and k
    x0 = rec.inputs[(first, "attn_in")][0]
    if cfg.pos_encoding == "rope":
        result.rope = rope_probe(model, x0)
    result.positions = offset_probe(model, ids)
    return result


def first_attention_block(model: CausalLM) -> int:
    """The first block that attends (Qwen3-Next's and Qwen3.5's first three are Gated DeltaNet)."""
    return next(i for i, layer in enumerate(model.model.blocks) if not layer.linear)


def _scores(q: torch.Tensor, k: torch.Tensor) -> float:
    return float((q * k).sum())


@torch.no_grad()
def rope_probe(model: CausalLM, x: torch.Tensor, head: int = 0, n_positions: int = 32) -> dict:
    """RoPE on block 0's own q and k (head ``head``, the first two tokens' vectors before the
    rotation): the rotated q's first, middle and last frequency pair over positions 0…n−1 (each
    turns by θ_i per position), and the score q_m·k_n for pairs at the same offset m − n."""
    cfg = model.cfg
    attn = model.model.blocks[first_attention_block(model)].self_attn
    if isinstance(attn, LatentAttention):  # MLA rotates q's decoupled part and the one shared RoPE key only
        q, k = attn.query(x)[..., cfg.qk_nope_head_dim :], attn.latent(x)[1]
    else:
        q, k, _ = attn.project(x, None)  # (1, H, T, D), before RoPE
    D, body = cfg.rope_dim, model.model
    kv_head = min(head // cfg.n_rep, k.shape[1] - 1)
    # the rotated part of each head (all of it but under partial rotary: its first D dimensions)
    qv, kv = q[0, head, 0, :D].float(), k[0, kv_head, min(1, k.shape[2] - 1), :D].float()
    rotate = apply_rope_interleaved if cfg.rope_interleave else apply_rope
    n_positions = min(n_positions, cfg.max_seq_len)
    local = cfg.local_layer_flags[0]  # block 0's base: Gemma 3's local layers have their own
    inv_freq = body.position_tables.frequencies(local)  # the model's own frequencies ...
    cos, sin = (t[:n_positions] for t in body.position_tables.get(n_positions, x.device, local))  # ... tables
    rotated_q = rotate(qv.view(1, 1, 1, D).expand(1, 1, n_positions, D), cos, sin)[0, 0]
    rotated_k = rotate(kv.view(1, 1, 1, D).expand(1, 1, n_positions, D), cos, sin)[0, 0]
    pairs = sorted({0, D // 4, D // 2 - 1})
    offsets = {}
    for offset in (0, 1, 4):
        offsets[offset] = [_scores(rotated_q[m], rotated_k[m - offset]) for m in range(offset, n_positions)]
    return {
        "head": head,
        "pairs": pairs,
        "theta": [float(inv_freq[i]) for i in pairs],
        # pair i: dimensions (i, i + D/2), or (2i, 2i + 1) when RoPE rotates adjacent pairs
        "trajectory": {
            i: tuple(
                rotated_q[:, j].tolist()
                for j in ((2 * i, 2 * i + 1) if cfg.rope_interleave else (i, i + D // 2))
            )
            for i in pairs
        },
        "scores_by_offset": offsets,
        "max_spread": max(max(s) - min(s) for s in offsets.values()),
        "score_scale": max(abs(v) for s in offsets.values() for v in s),
    }


@torch.no_grad()
def offset_probe(model: CausalLM, ids: torch.Tensor, head: int = 0, n_positions: int = 32) -> dict:
    """Does block 0's score between the text's first two tokens depend only on how far apart
    they are? The pair placed at positions (m, m − 1) for every m, scored by block 0's own norm
    and projections, under this model's positions and the other kinds: RoPE (rotating q and k)
    against sinusoidal or learned positions added to the input. Per kind: the scores, their
    spread over m and their scale. ``none``: no positions at all — the score cannot move."""
    cfg, body = model.cfg, model.model
    n_positions = min(n_positions, cfg.max_seq_len)
    tokens = ids[0, :2] if ids.shape[1] > 1 else ids[0, :1].repeat(2)
    emb = body.embed_tokens(tokens)
    if cfg.embed_scale:
        emb = emb * math.sqrt(cfg.d_model)
    kinds = ["rope"] if cfg.head_dim % 2 == 0 or cfg.is_mla else []
    if not cfg.is_mla:  # MLA's decoupled key cannot go unrotated: RoPE alone
        kinds += ["sinusoidal"] + (["learned"] if cfg.pos_encoding == "learned" else [])
    result = {}
    for kind in kinds:
        scores = [_pair_score(model, emb, kind, m, head) for m in range(1, n_positions)]
        label = f"{kind} (this model's)" if kind == cfg.pos_encoding else f"{kind} (for comparison)"
        result[label] = {
            "scores": scores,
            "spread": max(scores) - min(scores),
            "scale": max(abs(v) for v in scores),
        }
    return result


def _pair_score(model: CausalLM, emb: torch.Tensor, kind: str, m: int, head: int) -> float:
    """Block 0's score of the first token at position m against the second at m − 1."""
    cfg, body = model.cfg, model.model
    layer = body.blocks[first_attention_block(model)]
    rows = torch.tensor([m, m - 1])
    x, rope = emb, None
    if kind == "sinusoidal":
        x = emb + sinusoidal_table(m + 1, cfg.d_model, emb.device)[rows].to(emb)
    elif kind == "learned":
        x = emb + body.embed_positions(rows.to(emb.device))
    else:
        if cfg.pos_encoding == "rope":  # the model's own tables (rotated width, pair layout)
            cos, sin = (
                t[rows.to(emb.device)]
                for t in body.position_tables.get(m + 1, emb.device, cfg.local_layer_flags[0])
            )
        else:
            cos, sin = rope_cos_sin(rows, rope_inv_freq(cfg.rope_dim, cfg.rope_theta))
        rope = cos.to(emb.device), sin.to(emb.device)
    x = x.unsqueeze(0)
    if layer.pre_norm:
        x = layer.input_layernorm(x)
    q, k, _ = layer.self_attn.project(x, rope)
    return _scores(q[0, head, 0].float(), k[0, head // cfg.n_rep, 1].float())
