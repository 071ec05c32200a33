"""Every headline number explained: its formula, the formula with the config's values put in,
the value that evaluates to (recomputed here from the terms, independently of the counters, and
checked equal to them in the tests), the counting convention — with the other conventions in
use elsewhere as alternatives, each with its own value — and the source.

A ``Derivation``'s ``expression`` is plain arithmetic over its ``terms`` (names → numbers); the
page shows it with the numbers substituted, and ``evaluate()`` computes it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from ..config import ModelConfig
from ..runtime.hardware import CUDA_CONTEXT_BYTES, DTYPE_BYTES
from .common import STATS_BYTES, checked_gpu
from .equations import NEW_LINE, chain, evaluate, latex_symbol, number, render, side_by_side
from .flash import attention_memory
from .flops import MFU_CONVENTION, count_flops, pair_width
from .kv import (
    kv_cache_bytes,
    kv_cache_bytes_per_token,
    layer_token_bytes,
    linear_state_bytes,
    max_context_that_fits,
    state_bytes,
    weight_bytes,
)
from .memory import training_memory
from .params import count_params, norm_params, norms_per_block
from .quant import BITS, as_weight_quant, group_label, kv_head_bytes, kv_scale_bytes, weights_bytes
from .shapes import Shapes
from .speculative import speculation


@dataclass(frozen=True)
class Derivation:
    title: str
    formula: str  # LaTeX, in symbols: the general form
    expression: str  # Python arithmetic over ``terms``
    terms: Mapping[str, float]  # symbol → number (and what it is, in ``meaning``)
    value: float  # what the page shows (from the lab's counters)
    source: str
    convention: str = ""  # the counting convention this value follows
    meaning: dict[str, str] = field(default_factory=dict)  # symbol → words
    # (label, Derivation): the same quantity by other conventions
    alternatives: tuple[tuple[str, Derivation], ...] = ()
    lhs: str = ""  # LaTeX of what the equation computes (``equation``'s left side)
    # terms that have their own derivation (each names its term), written before the equation
    where: tuple[Derivation, ...] = ()
    term: str = ""  # the term of another derivation this one derives
    symbols: Mapping[str, str] = field(default_factory=dict)  # a term's LaTeX, where latex_symbol's won't do
    labels: Mapping[str, str] = field(default_factory=dict)  # LaTeX set under a term's number

    def evaluate(self) -> float:
        """The expression computed from the terms (no names but the terms are allowed)."""
        return evaluate(self.expression, self.terms)

    def describe(self, name: str) -> str:
        """What the term ``name`` is, in words ('' when it speaks for itself)."""
        return self.meaning.get(name) or SHAPE_WORDS.get(name, "")

    def symbolic(self) -> str:
        """The expression in symbols, as LaTeX, e.g. ``2 \\cdot L \\cdot G \\cdot b_{\\text{head}}``."""
        return render(self.expression, self.terms, latex=True, numbers=False, symbols=self.symbols)

    def substituted(self, latex: bool = False) -> str:
        """The expression with every term's number in place, e.g. ``2 · 4 · 2 · 128``."""
        return render(self.expression, self.terms, latex=latex, numbers=True, labels=self.labels)

    def equation(self, lhs: str | None = None, *, note: str = "", omit: tuple[str, ...] = ()) -> str:
        """The whole equation as LaTeX — ``lhs`` (default: the derivation's own) = the formula in
        symbols = the same with the numbers put in = the value (``note``: words after it, e.g.
        the value in binary units) — below the derivations of its terms (``where``; those of
        the terms in ``omit`` left out, e.g. where the page has just written them). A line too
        long for a page breaks (``equations.chain``, ``side_by_side``)."""
        lhs = self.lhs if lhs is None else lhs
        lhs = lhs or (self.symbols.get(self.term) or latex_symbol(self.term) if self.term else "")
        value = number(self.value) + (rf"\;(\text{{{note}}})" if note else "")
        text = chain(lhs, self.symbolic(), self.substituted(latex=True), value)
        first = [d.equation(self.symbols.get(d.term), omit=omit) for d in self.where if d.term not in omit]
        return NEW_LINE.join([side_by_side(*first), text]) if first else text

    def text(self, lhs: str = "", *, omit: tuple[str, ...] = ()) -> str:
        """The whole equation as plain text (the report, Markdown, a message): ``lhs`` = the
        formula in symbols = the numbers = the value, after its terms' derivations."""
        lhs = lhs or self.term
        symbols = render(self.expression, self.terms, latex=False, numbers=False)
        sides = ([lhs] if lhs else []) + _distinct(symbols, self.substituted(), number(self.value))
        first = [d.text(omit=omit) for d in self.where if d.term not in omit]
        return "; ".join([*first, " = ".join(sides)])


def _distinct(*sides: str) -> list[str]:
    """The sides of an equation, a side equal to the one before it written once."""
    return [side for i, side in enumerate(sides) if i == 0 or side != sides[i - 1]]


SHAPE_WORDS = {
    "L": "blocks",
    "C": "d_model",
    "H": "query heads",
    "G": "KV heads",
    "D": "head_dim",
    "F": "FFN width",
    "V": "vocabulary",
    "B": "batch",
    "T": "tokens per sequence",
    "E": "experts",
    "k": "experts per token",
    "F_e": "expert width",
}


def _mixer_terms(cfg: ModelConfig, linear: bool) -> tuple[list[str], dict]:
    """A block's token mixer as expression parts: attention (q, k, v, o; MLA's projections;
    biases, QK-norm, sinks) or (``linear``) Gated DeltaNet."""
    s = Shapes.of(cfg)
    if linear:  # in_proj (q, k, v, z, b, a), the convolution, A_log and dt_bias, the norm, out_proj
        terms = {
            "C": s.C,
            "K_q": cfg.linear_key_dim,
            "V_d": cfg.linear_value_dim,
            "H_v": cfg.linear_v_heads,
            "K_c": cfg.linear_conv_kernel,
            "d_v": cfg.linear_v_head_dim,
        }
        return ["C*(2*K_q + 2*V_d + 2*H_v) + (2*K_q + V_d)*K_c + 2*H_v + d_v + V_d*C"], terms
    terms = {"C": s.C, "H": s.H, "G": s.G, "D": s.D}
    # a gated attention's q_proj also emits each head's output gate (Qwen3-Next, Qwen3.5)
    parts = ["2*C*H*D + 2*C*G*D + H*D*C" if cfg.attn_output_gate else "C*H*D + 2*C*G*D + H*D*C"]
    if cfg.is_mla:  # q (or q_a, q_b), kv_a, kv_b, o and the two latent norms
        terms = {"C": s.C, "H": s.H, "D": s.D, "D_v": s.Dv, "D_r": s.Dr, "R_kv": s.Rkv}
        q = "C*H*D"
        if s.Rq:
            terms["R_q"] = s.Rq
            q = "C*R_q + R_q*H*D + R_q"
        parts = [f"{q} + C*(R_kv + D_r) + R_kv*H*(D - D_r + D_v) + H*D_v*C + R_kv"]
    attn_bias = (s.H * s.D + 2 * s.G * s.D if cfg.qkv_bias else 0) + (s.C if cfg.o_bias else 0)
    if attn_bias:
        terms["b_attn"] = attn_bias
        parts.append("b_attn")
    if cfg.qk_norm and cfg.qk_norm_scope != "rope_l2":  # one γ per head for q and for k, or
        parts.append("2*D" if cfg.qk_norm_scope == "head" else "(H + G)*D")  # (OLMo 2) the projections
    if cfg.attention_sinks:  # gpt-oss: one sink logit per query head
        parts.append("H")
    return parts, terms


def _block_terms(cfg: ModelConfig, sparse: bool, linear: bool = False) -> tuple[str, dict]:
    """One block's parameters as an expression: attention (or Gated DeltaNet), FFN (or router
    and experts), norms, and whatever biases and QK-norm the family has."""
    s = Shapes.of(cfg)
    parts, terms = _mixer_terms(cfg, linear)
    if sparse:
        terms.update(E=s.E, F_e=s.Fe)
        parts.append("C*E + E*3*C*F_e")
        if cfg.moe_style == "gpt_oss":  # the router's bias, each expert's gate/up and down biases
            parts.append("E + E*(2*F_e + C)")
        if s.Fs:
            terms["F_s"] = s.Fs
            parts.append("3*C*F_s")
        if cfg.shared_expert_gate:  # its gate: C → 1
            parts.append("C")
    else:
        terms.update(n_ffn=s.n_ffn_matrices, F=s.F)
        parts.append("n_ffn*C*F")
        if cfg.mlp_bias:
            terms["b_ffn"] = (2 * s.F if s.n_ffn_matrices == 3 else s.F) + s.C
            parts.append("b_ffn")
    terms["n_norm"] = norm_params(cfg)
    parts.append(f"{norms_per_block(cfg)}*n_norm")  # sandwich blocks (Gemma): 4
    return " + ".join(parts), terms


def params_total(cfg: ModelConfig) -> Derivation:
    p = count_params(cfg)
    terms: dict[str, float] = {
        "V": cfg.vocab_size,
        "C": cfg.d_model,
        "untied": int(not cfg.tie_embeddings),
        "n_final": norm_params(cfg) if cfg.final_norm else 0,
    }
    blocks, meaning = [], {}
    kinds = list(zip(cfg.moe_layer_flags, cfg.linear_layer_flags))
    for linear in (False, True):
        for kind, sparse in (("dense", False), ("sparse", True)):
            count = kinds.count((sparse, linear))
            if not count:
                continue
            name = f"lin_{kind}" if linear else kind  # a Gated DeltaNet block's
            expr, block_terms = _block_terms(cfg, sparse, linear)
            terms[f"N_{name}"], terms[f"L_{name}"] = evaluate(expr, block_terms), count
            words = f"Gated DeltaNet {kind}" if linear else kind
            meaning[f"N_{name}"] = f"a {words} block: {expr}"
            blocks.append(f"L_{name}*N_{name}")
    expression = " + ".join(blocks) + " + V*C + untied*V*C + n_final"
    if cfg.pos_encoding == "learned":
        terms["P"] = cfg.max_seq_len
        expression += " + P*C"
    return Derivation(
        "Parameters",
        r"N = L\,N_\text{block} + V C\,(1 + [\text{untied}]) + n_\text{final}",
        expression,
        terms,
        p.total,
        "closed form, equal to the module's own count (built on the meta device) and to "
        "transformers' class for the family",
        "every parameter once; a tied lm_head shares the embedding matrix",
        meaning=meaning,
        alternatives=(("non-embedding (Kaplan et al. 2020)", params_non_embedding(cfg)),),
    )


def params_per_block(cfg: ModelConfig) -> Derivation:
    expr, terms = _block_terms(cfg, cfg.moe_layer_flags[0], cfg.linear_layer_flags[0])
    return Derivation(
        "Per block (block 0)",
        r"N_\text{block} = \underbrace{C H D + 2 C G D + H D C}_"
        r"{q,\,k,\,v,\,o} + \underbrace{n_\text{FFN}\, C F}_{\text{FFN}} + 2\,n_\text{norm}",
        expr,
        terms,
        count_params(cfg).per_layer,
        "closed form; the module's own count on the meta device agrees",
        "GQA/MQA: k and v have G < H heads; SwiGLU has three FFN matrices (n_FFN = 3), the "
        "2017 FFN two; a LayerNorm has γ and β (n_norm = 2C), RMSNorm γ only",
        meaning={"n_norm": "one norm's parameters", "n_ffn": "FFN matrices"},
    )


def params_non_embedding(cfg: ModelConfig) -> Derivation:
    p = count_params(cfg)
    terms = {"N": p.total, "V": cfg.vocab_size, "C": cfg.d_model, "N_pos": p.by_component["positional"]}
    return Derivation(
        "Non-embedding parameters",
        r"N_\text{non-emb} = N - V C - N_\text{pos}",
        "N - V*C - N_pos",
        terms,
        p.non_embedding,
        "Kaplan et al. 2020, Scaling Laws for Neural Language Models, §2.1",
        "the token embedding (and a learned position table) left out; an untied lm_head stays in",
    )


def forward_flops(cfg: ModelConfig, seq_len: int, batch: int, per_token: bool = False) -> Derivation:
    """One forward over B×T tokens (``per_token``: divided by B·T), 2 FLOPs per multiply-add,
    scores over the full T×T; the causal half as the alternative."""
    f = count_flops(cfg, seq_len, batch)
    delta = f.by_component.get("delta_rule", 0)  # Gated DeltaNet's convolution and delta rule
    matmul = f.forward - f.by_component["attention_scores"] - delta
    s = Shapes.of(cfg)
    pair = 2 * s.H * (s.D + s.Dv)  # FLOPs per query-key pair, every head: QKᵀ over D, AV over Dv
    terms = {
        "B": batch,
        "T": seq_len,
        "N_mm": matmul // (2 * batch * seq_len),
        "H": s.H,
        "D": s.D,
        "S": f.by_component["attention_scores"] // pair,
    }
    # S: query-key pairs summed over blocks (B·T·T per block without a window)
    meaning = {
        "N_mm": "multiply-adds per token in the weight matmuls (q, k, v, o, FFN, lm_head, router)",
        "S": "query-key pairs, summed over the blocks",
    }
    expression, formula = (
        "2*B*T*N_mm + 4*H*D*S",
        (
            r"F = 2\,B T N_\text{mm} + 4\,H D\,\sum_"
            r"\ell (\text{query-key pairs})_\ell"
        ),
    )
    if s.Dv != s.D:  # MLA: value heads of another width
        terms["D_v"] = s.Dv
        expression = "2*B*T*N_mm + 2*H*(D + D_v)*S"
        formula = formula.replace(r"4\,H D", r"2\,H (D + D_v)")
        meaning["D_v"] = "a value head's width (MLA)"
    if delta:
        terms["F_delta"] = delta
        expression += " + F_delta"
        formula += r" + F_\Delta"
        meaning["F_delta"] = "Gated DeltaNet blocks: the causal convolution and the chunked delta rule"
    if per_token:
        expression, formula = f"({expression})/(B*T)", formula + r"\quad \div\; B T"
    tokens = batch * seq_len if per_token else 1
    full = Derivation(
        "Forward FLOPs" + (" per token" if per_token else ""),
        formula,
        expression,
        terms,
        f.forward / tokens if per_token else f.forward,
        "counted per matmul; equal to PyTorch's FlopCounterMode on a real forward and to fvcore",
        "scores over the full T×T (what a naive implementation multiplies)",
        meaning,
    )
    causal_terms = dict(terms, S=f.attention_scores_causal // pair)
    causal = Derivation(
        "Forward FLOPs (causal)",
        full.formula,
        full.expression,
        causal_terms,
        f.forward_causal / tokens if per_token else f.forward_causal,
        "FlashAttention skips the masked blocks: T(T+1)/2 pairs per sequence",
        "only the pairs a causal mask keeps",
        meaning,
    )
    return Derivation(
        full.title,
        full.formula,
        full.expression,
        terms,
        full.value,
        full.source,
        full.convention,
        meaning,
        (("causal half (T(T+1)/2 pairs)", causal),),
    )


def training_flops(cfg: ModelConfig, seq_len: int, batch: int) -> Derivation:
    """A training step: 3 × the forward (backward = 2 × forward); the 6N estimates as
    alternatives, with and without the embeddings in N."""
    f = count_flops(cfg, seq_len, batch)
    p = count_params(cfg)
    tokens = batch * seq_len
    exact = Derivation(
        "Training step FLOPs",
        r"F_\text{step} = 3\,F_\text{fwd}",
        "3*F_fwd",
        {"F_fwd": f.forward},
        f.training_step,
        "backward = 2 × forward: one matmul for the input's gradient, one for the "
        "weight's (Kaplan et al. 2020, §2.1)",
        "the forward's count, scores over T×T",
    )
    six = [
        (
            f"6N, N {label}",
            Derivation(
                "6N estimate",
                r"F_\text{step} \approx 6\,N\,B T",
                "6*N*B*T",
                {"N": n, "B": batch, "T": seq_len},
                6 * n * tokens,
                "Kaplan et al. 2020: C ≈ 6N per token, N non-embedding",
                f"N {label}; attention scores left out",
            ),
        )
        for label, n in (("without the embeddings", p.non_embedding), ("with the embeddings", p.total))
    ]
    return Derivation(
        exact.title,
        exact.formula,
        exact.expression,
        exact.terms,
        exact.value,
        exact.source,
        exact.convention,
        alternatives=tuple(six),
    )


def head_bytes(kv_dtype: str, width: int, term: str, symbol: str = "D") -> Derivation:
    """One token's vector of ``width`` elements in the KV cache at ``kv_dtype`` (a K or V head,
    MLA's latent or its RoPE key): elements × bytes each (int4 packs two per byte), plus the
    fp16 scale int8 and int4 keep per token and vector; ``term`` names it in the derivation it
    belongs to, ``symbol`` names its width."""
    scale = kv_scale_bytes(kv_dtype)  # checks the name first
    bits = BITS[kv_dtype]
    terms: dict[str, float] = {symbol: width}
    if width * bits % 8:  # an odd width at 4 bits: the last byte half full
        expression, terms["n_bits"] = f"ceil_div({symbol}*n_bits, 8)", bits
    else:
        expression, terms["b"] = f"{symbol}*b", bits // 8 if bits % 8 == 0 else bits / 8
    if scale:
        expression, terms["s"] = expression + " + s", scale
    return Derivation(
        f"Bytes of a {width}-wide vector per token ({kv_dtype})",
        "",
        expression,
        terms,
        kv_head_bytes(kv_dtype, width),
        "elements × bytes per element" + (" + the fp16 scale of the row" if scale else ""),
        meaning={"b": f"bytes per element at {kv_dtype}", "s": "its fp16 scale", "n_bits": "bits each"},
        term=term,
    )


MLA_SYMBOLS = {"R_kv": "d_c", "D_r": "d_h^R", "D_v": "D_v"}  # DeepSeek-V2's names


def kv_bytes_per_token(cfg: ModelConfig, kv_dtype: str) -> Derivation:
    s = Shapes.of(cfg)
    if cfg.is_mla:
        scale = " + an fp16 scale each" if kv_scale_bytes(kv_dtype) else ""
        latent = head_bytes(kv_dtype, s.Rkv, "b_latent", "R_kv")
        rope = head_bytes(kv_dtype, s.Dr, "b_rope", "D_r")
        return Derivation(
            f"KV cache per token ({kv_dtype})",
            r"L \cdot (b_\text{latent} + b_\text{rope})",
            "L*(b_latent + b_rope)",
            {"L": s.L, "b_latent": latent.value, "b_rope": rope.value},
            kv_cache_bytes_per_token(cfg, kv_dtype),
            "what MLA caches (as transformers 5 and serving engines store it): each block's latent "
            "and its one RoPE key, shared by every head",
            f"b_latent = kv_lora_rank · bytes per element, b_rope = qk_rope_head_dim · bytes per "
            f"element{scale} ({kv_dtype})",
            meaning={
                "b_latent": f"bytes of the latent (kv_lora_rank = {s.Rkv}) at {kv_dtype}",
                "b_rope": f"bytes of the shared RoPE key (qk_rope_head_dim = {s.Dr}) at {kv_dtype}",
            },
            lhs=r"\text{KV bytes/token}",
            where=(replace(latent, symbols=MLA_SYMBOLS), replace(rope, symbols=MLA_SYMBOLS)),
        )
    head = head_bytes(kv_dtype, s.D, "b_head")
    # Gated DeltaNet blocks cache no K, V: only the attention blocks count
    layers = "L_attn" if cfg.has_linear_attention else "L"
    return Derivation(
        f"KV cache per token ({kv_dtype})",
        r"2\,(K, V) \cdot L \cdot G \cdot b_\text{head}",
        f"2*{layers}*G*b_head",
        {layers: cfg.full_attention_layers, "G": s.G, "b_head": head.value},
        kv_cache_bytes_per_token(cfg, kv_dtype),
        "what a decoder caches: each block's K and V of every KV head",
        f"b_head = D · bytes per element{' + an fp16 scale' if kv_scale_bytes(kv_dtype) else ''} "
        f"({kv_dtype}); GQA/MQA cut G",
        meaning={
            "b_head": f"bytes of one KV head's vector at {kv_dtype} (D = {s.D})",
            "L_attn": f"attention blocks ({sum(cfg.linear_layer_flags)} Gated DeltaNet blocks cache no K, V)",
        },
        lhs=r"\text{KV bytes/token}",
        where=(head,),
    )


def linear_state(cfg: ModelConfig, kv_dtype: str) -> Derivation:
    """One sequence's fixed state in every Gated DeltaNet block (``kv.state_bytes``)."""
    parts = linear_state_bytes(cfg, kv_dtype)
    terms = {
        "L_lin": sum(cfg.linear_layer_flags),
        "C_conv": cfg.linear_conv_dim,
        "K_c": cfg.linear_conv_kernel,
        "b_a": parts["conv"] // (cfg.linear_conv_dim * cfg.linear_conv_kernel),
        "H_v": cfg.linear_v_heads,
        "d_k": cfg.linear_k_head_dim,
        "d_v": cfg.linear_v_head_dim,
    }
    return Derivation(
        "Gated DeltaNet state per sequence",
        r"L_\text{lin}\,(C_\text{conv} K_c\, b_a + 4\,H_v d_k d_v)",
        "L_lin*(C_conv*K_c*b_a + 4*H_v*d_k*d_v)",
        terms,
        state_bytes(cfg, kv_dtype),
        "transformers' cache tensors: the convolution's last K_c inputs and the delta rule's "
        "float32 state per value head",
        "the same at any context length",
        meaning={
            "L_lin": "Gated DeltaNet blocks",
            "C_conv": "the convolution's channels",
            "K_c": "the convolution's kernel",
            "b_a": "bytes per activation element",
            "H_v": "value heads",
            "d_k": "key head width",
            "d_v": "value head width",
        },
        term="S",
    )


def kv_cache(cfg: ModelConfig, seq_len: int, batch: int, kv_dtype: str) -> Derivation:
    """The cache of B sequences of T tokens: every attention block T tokens per sequence (a
    sliding-window block at most W), every Gated DeltaNet block its fixed state."""
    per = kv_bytes_per_token(cfg, kv_dtype)
    local = sum(cfg.local_layer_flags)
    terms: dict[str, float] = {"b_tok": per.value, "B": batch, "T": seq_len}
    expression, formula = "b_tok*B*T", r"b_\text{tok}\,B\,T"
    where = [replace(per, term="b_tok")]
    meaning = {"b_tok": "KV bytes per token, every attention block"}
    if local and seq_len > cfg.sliding_window:  # past W a window block stops growing
        layers = cfg.full_attention_layers
        block = Derivation(
            "KV bytes per token and block",
            "",
            "b_tok/L_attn",
            {"b_tok": per.value, "L_attn": layers},
            layer_token_bytes(cfg, kv_dtype),
            "every attention block caches alike",
            where=(where[0],),
            term="b_block",
            symbols={"b_tok": r"\text{bytes/token}"},
        )
        terms = {"B": batch, "b_block": block.value, "L_w": local, "W": cfg.sliding_window}
        terms.update(L_attn=layers, T=seq_len)
        expression = "B*b_block*(L_w*W + (L_attn - L_w)*T)"
        formula = r"B\,b_\text{block}\,\big(L_w W + (L - L_w)\,T\big)"
        where = [block]
        meaning.update(L_w="blocks with a sliding window", L_attn="attention blocks")
    if cfg.has_linear_attention:  # their fixed state, whatever T
        state = linear_state(cfg, kv_dtype)
        terms["S"] = state.value
        formula, expression = formula + r" + B\,S", expression + " + B*S"
        where.append(state)
        meaning.update(S="one sequence's state in every Gated DeltaNet block")
    return Derivation(
        f"KV cache at B×T ({kv_dtype})",
        formula,
        expression,
        terms,
        kv_cache_bytes(cfg, seq_len, batch, kv_dtype),
        "bytes per token × tokens held"
        + (
            " + the Gated DeltaNet blocks' states (transformers' cache tensors)"
            if cfg.has_linear_attention
            else ""
        ),
        "a sliding-window block holds at most W tokens",
        meaning=meaning,
        lhs=r"\text{cache}",
        where=tuple(where),
        symbols={"b_tok": r"\text{bytes/token}"},
    )


def weights_stored(cfg: ModelConfig, weights) -> Derivation:
    stored = weights_bytes(cfg, weights)
    quant = as_weight_quant(weights)
    # scales: with their zero points and a checkpoint layout's per-module extras (GPTQ's g_idx)
    terms = {
        "data": stored.quantised,
        "scales": stored.scales + stored.zero_points + stored.other,
        "kept": stored.kept,
    }
    extras = " + zero points" if quant.zero_point else ""
    extras += r" + g\_idx, quant state" if stored.other else ""  # GPTQ's
    return Derivation(
        f"Weights at {quant.dtype}",
        r"\text{data} + \text{scales} + \text{kept}",
        "data + scales + kept",
        terms,
        weight_bytes(cfg, weights),
        "equal to the bytes of real quantised tensors (llama_lab.model.quant)",
        f"{quant.dtype}: group size {quant.group_size}, {quant.scale_dtype} scales; "
        f"kept in bf16: {', '.join(quant.keep) if quant.quantised else 'everything'}",
        lhs=r"\text{bytes}",
        labels={  # what each number is, under it
            "data": rf"\text{{{quant.dtype} data}}",
            "scales": rf"\text{{{quant.scale_dtype} scales{extras}, {group_label(quant.group_size)}}}",
            "kept": rf"\text{{kept in {quant.keep_dtype}}}",
        },
    )


def longest_context(cfg: ModelConfig, gpu, batch: int, weights, kv_dtype: str) -> Derivation:
    g = checked_gpu(gpu)
    terms = {
        "M": g.usable_bytes,
        "W_bytes": weight_bytes(cfg, weights),
        "B": batch,
        "b_tok": kv_cache_bytes_per_token(cfg, kv_dtype),
    }
    value = max_context_that_fits(cfg, g, batch, weights, kv_dtype)
    formula = r"\left\lfloor \frac{M - W_\text{bytes}}{B\,b_\text{tok}} \right\rfloor"
    expression, note = (
        "max(0, (M - W_bytes)//(B*b_tok))",
        ("weights + KV cache ≤ GPU memory; decoding's activations are small and not reserved"),
    )
    if cfg.has_linear_attention:  # every sequence's Gated DeltaNet state first
        terms["S"] = state_bytes(cfg, kv_dtype)
        formula = r"\left\lfloor \frac{M - W_\text{bytes} - B\,S}{B\,b_\text{tok}} \right\rfloor"
        expression = "max(0, (M - W_bytes - B*S)//(B*b_tok))"
        note += "; S: one sequence's fixed Gated DeltaNet state"
    local = sum(cfg.local_layer_flags)
    free = terms["M"] - terms["W_bytes"]
    if (
        local and free >= kv_cache_bytes(cfg, cfg.sliding_window, batch, kv_dtype) and local < cfg.n_layers
    ):  # past W only the global blocks grow
        terms.update(
            W=cfg.sliding_window,
            C_W=kv_cache_bytes(cfg, cfg.sliding_window, batch, kv_dtype),
            b_glob=layer_token_bytes(cfg, kv_dtype) * (cfg.full_attention_layers - local),
        )
        formula = (
            r"W + \left\lfloor \frac{M - W_\text{bytes} - C_W}{B\,b_\text{glob}}"
            r"\right\rfloor"
        )
        expression = "W + (M - W_bytes - C_W)//(B*b_glob)"
        note = (
            "sliding-window blocks stop growing at W tokens (C_W: the cache at W); past it "
            "only the other blocks grow, b_glob per token"
        )
    elif local == cfg.n_layers and free >= kv_cache_bytes(cfg, cfg.sliding_window, batch, kv_dtype):
        terms["T_max"] = value
        expression, note = "T_max", "every block holds at most W tokens: the cache stops growing"
    note += (
        f"; M: {g.name}'s memory as the device reports it ({g.memory_bytes:,} bytes) less the CUDA "
        f"context ({CUDA_CONTEXT_BYTES:,} bytes)"
    )
    source = f"{g.source}; memory: {g.memory_source}"
    return Derivation(f"Longest context on {g.name}", formula, expression, terms, value, source, note)


# a live pass's measured figures, defined (each derivation below writes its numbers)
TOKENS_PER_S = r"\frac{B\,T}{t_\text{step}}"
ACHIEVED_FLOPS = r"\frac{3\,F_\text{fwd}}{t_\text{step}}"
MFU_DENSE = r"\text{MFU} = \frac{F_s}{P_\text{dense}}"


def live_definitions() -> str:
    """The Live pass page's definitions of what it measures, as LaTeX."""
    return (
        rf"\text{{tokens/s}} = {TOKENS_PER_S} \qquad \text{{achieved FLOP/s}}\; F_s = {ACHIEVED_FLOPS}"
        rf" \qquad {MFU_DENSE}"
    )


def mfu(achieved_flops_per_s: float, peak: float, peak_source: str, sparse_quoted: bool = True) -> Derivation:
    """``sparse_quoted``: the peak is a data sheet's dense figure, beside which it quotes a 2:4
    sparse one at twice the rate (not for a peak measured on this machine)."""
    terms = {"F_s": achieved_flops_per_s, "P": peak}
    sparse = Derivation(
        "MFU against the sparse peak",
        r"\text{MFU} = F_s / (2P)",
        "F_s/(2*P)",
        terms,
        achieved_flops_per_s / (2 * peak),
        "data sheets quote 2:4 structured sparsity at twice the dense rate",
        "the sparsity figure: dense matmuls never reach it",
    )
    return Derivation(
        "MFU",
        MFU_DENSE,
        "F_s/P",
        terms,
        achieved_flops_per_s / peak,
        peak_source,
        "the dense peak: what a dense matmul can reach (Chowdhery et al. 2022, PaLM §B)",
        alternatives=(("sparse peak (data sheet's 2:4 figure)", sparse),) if sparse_quoted else (),
    )


def initial_loss(vocab: int) -> Derivation:
    return Derivation(
        "Initial loss ≈ ln V",
        r"\mathcal{L}_0 \approx \ln V",
        "ln(V)",
        {"V": vocab},
        math.log(vocab),
        "a freshly initialised model predicts nearly uniformly over V tokens: −ln(1/V)",
        "natural log (nats)",
        lhs=r"\mathcal{L}_0 \approx",
    )


def throughput(batch: int, seq_len: int, step_ms: float, tokens_per_s: float) -> Derivation:
    return Derivation(
        "Tokens per second",
        TOKENS_PER_S,
        "B*T/t_step",
        {"B": batch, "T": seq_len, "t_step": step_ms / 1e3},
        tokens_per_s,
        "measured: the median of the timed steps (the warm-up step excluded)",
        "t_step in seconds, forward + backward + AdamW",
        {"t_step": "seconds per training step"},
    )


def achieved_flops(training_flops: float, step_ms: float, achieved: float) -> Derivation:
    return Derivation(
        "Achieved FLOP/s",
        ACHIEVED_FLOPS,
        "F_step/t_step",
        {"F_step": training_flops, "t_step": step_ms / 1e3},
        achieved,
        "the analysis' training-step FLOPs over the measured step time",
        MFU_CONVENTION + "; the optimizer's element-wise work not counted",
        {"F_step": "FLOPs of one training step", "t_step": "seconds per step"},
    )


def attention_kept(
    cfg: ModelConfig, seq_len: int, batch: int, dtype: str, path: str, per_block: bool = False
) -> Derivation:
    """What attention keeps for backward in one forward, every attending block (``per_block``:
    one): ``path`` naive or flash (``flash.naive_layer_bytes``, ``flash_layer_bytes``)."""
    s = Shapes.of(cfg)
    r = attention_memory(cfg, seq_len, batch, dtype)  # checks the dtype
    b = int(DTYPE_BYTES[dtype])
    # Gated DeltaNet blocks keep no scores; MLA's value heads are D_v wide
    layers = "L_attn" if cfg.has_linear_attention else "L"
    terms: dict[str, float] = {
        layers: cfg.full_attention_layers,
        "B": batch,
        "H": s.H,
        "T": seq_len,
        "D": s.D,
    }
    qkv, heads = ("3*T*D", "D*(2*H + 2*G)") if s.Dv == s.D else ("T*(2*D + D_v)", "(H + G)*(D + D_v)")
    if s.Dv != s.D:
        terms["D_v"] = s.Dv
    terms["b"] = b
    meaning = {
        "D_v": "a value head's width (MLA)",
        "L_attn": "attention blocks",
        "b": f"bytes each ({dtype})",
    }
    block = "" if per_block else f"{layers}*"
    if path == "naive":
        return Derivation(
            "Kept for backward, naive" + (" (one block)" if per_block else ""),
            r"L\,\big(b\,B H (3 T D + T^2) + T^2\big)",
            f"{block}(b*B*H*({qkv} + T*T) + T*T)",
            terms,
            r.naive_layer_bytes if per_block else r.naive_bytes,
            "saved-tensor hooks on reference_attention agree (test_flash)",
            "Q, K, V at H heads and the T×T probabilities at b bytes, plus the bool mask",
            meaning,
            lhs=r"\text{naive/block}" if per_block else r"\text{naive}",
        )
    terms.update(G=s.G, s_stat=STATS_BYTES)
    return Derivation(
        "Kept for backward, fused" + (" (one block)" if per_block else ""),
        r"L\,\big(b\,B T D\,(2H + 2G) + s\,B H T\big)",
        f"{block}(b*B*T*{heads} + s_stat*B*H*T)",
        terms,
        r.flash_layer_bytes if per_block else r.flash_bytes,
        "Dao et al. 2022: the output and the log-sum-exp; saved-tensor hooks on "
        "scaled_dot_product_attention agree (test_flash)",
        "Q, O at H heads, K, V at G, and one fp32 statistic per query and head",
        {**meaning, "s_stat": "bytes of the log-sum-exp per query and head"},
        lhs=r"\text{fused/block}" if per_block else r"\text{fused}",
    )


def hbm_ratio(cfg: ModelConfig, seq_len: int, batch: int, dtype: str, gpu) -> Derivation:
    """Dao et al. 2022, Theorem 2: one head's HBM accesses, standard over FlashAttention."""
    r = attention_memory(cfg, seq_len, batch, dtype, gpu)
    terms = {"N": seq_len, "d": cfg.head_dim, "B_c": r.block_cols}
    return Derivation(
        "HBM traffic, naive ÷ fused",
        r"\frac{4 N d + 4 N^2}{2 N d + \lceil N / B_c \rceil\,(3 N d + 4 N)}",
        "(4*N*d + 4*N*N)/(2*N*d + ceil_div(N, B_c)*(3*N*d + 4*N))",
        terms,
        r.naive_hbm_bytes / r.flash_hbm_bytes,
        f"Dao et al. 2022, Algorithm 1 and Theorem 2, with {r.gpu}'s {r.sram_bytes:,} bytes of "
        f"shared memory per SM",
        f"elements read and written in one forward; B_c = ⌈M / 4d⌉ "
        f"columns per block (M: the shared memory in elements of {dtype})",
        {"N": "sequence length", "d": "head_dim", "B_c": "key/value block size"},
    )


def speculative_speedup(
    measured: float,
    greedy_s: float,
    speculative_s: float,
    alpha: float,
    gamma: int,
    cost_ratio: float,
    predicted: float,
) -> Derivation:
    """A live run's speedup — the target alone's time over speculative decoding's — and
    Leviathan et al.'s prediction at the measured α and c as the alternative."""
    formula = _speculative("Predicted speedup (Leviathan et al. 2023)", alpha, gamma, cost_ratio, predicted)
    formula = replace(
        formula, meaning={"alpha": "measured acceptance rate", "c": "measured draft step ÷ target step"}
    )
    return Derivation(
        "Measured speedup",
        r"\frac{t_\text{greedy}}{t_\text{speculative}}",
        "t_greedy/t_spec",
        {"t_greedy": greedy_s, "t_spec": speculative_s},
        measured,
        "median wall times of the same decoding, the target alone and with the draft",
        "the same prompt and number of new tokens; the output checked identical",
        {"t_greedy": "seconds, the target alone", "t_spec": "seconds, speculatively"},
        (("Leviathan et al.'s formula at the measured α and c", formula),),
    )


def seed_median_ratio(ratios: list, shown: float, what: str) -> Derivation:
    """A Post/Pre ratio reported over seeds (``shown``): the median of the seeds' own ratios."""
    terms = {f"r_{i}": float(r) for i, r in enumerate(ratios)}
    return Derivation(
        "Post ÷ Pre over seeds",
        r"\operatorname{median}_s \frac{\lVert\nabla W\rVert_"
        r"\text{Post}}{\lVert\nabla W\rVert_\text{Pre}}",
        f"median({', '.join(terms)})",
        terms,
        shown,
        "measured: one forward/backward per arm and seed, the same weights and batch in both "
        "arms (Xiong et al. 2020, Theorem 1 for the expectation)",
        f"{what}; each seed's ratio first, then the median (a ratio of medians would mix seeds)",
        {name: f"seed {i}'s ratio" for i, name in enumerate(terms)},
    )


def quantised_share(measured: int, fp32: int, dtype: str) -> Derivation:
    return Derivation(
        "Bytes vs fp32",
        r"\frac{\text{bytes}_\text{quantised}}{\text{bytes}_\text{fp32}}",
        "bytes_q/bytes_fp32",
        {"bytes_q": measured, "bytes_fp32": fp32},
        measured / fp32,
        "measured: the storage of the live model's tensors (data, scales, kept tensors)",
        f"{dtype} data with its scales; embeddings, lm_head and norms kept in bf16",
    )


def mla_score_flops(cfg: ModelConfig, absorbed: bool) -> Derivation:
    """FLOPs per cached key and query head of MLA's scores: QKᵀ and AV over per-head K and V
    (naive, rebuilt), or over the latent itself (absorbed: W_UK folded into q, W_UV into the
    output; DeepSeek-V2 §2.1.2) — ``flops.pair_width``, 2 FLOPs per multiply-add."""
    s = Shapes.of(cfg)
    if absorbed:
        expression, terms = "2*(2*R_kv + D_r)", {"R_kv": s.Rkv, "D_r": s.Dr}
    else:
        expression, terms = "2*(D + D_v)", {"D": s.D, "D_v": s.Dv}
    return Derivation(
        "Score FLOPs per key and head, " + ("absorbed" if absorbed else "naive and rebuilt"),
        "",
        expression,
        terms,
        2 * pair_width(cfg, absorbed),
        "counted per matmul (analysis.flops.pair_width)",
        "QKᵀ over a key's width, AV over a value's; absorbed: both over the latent (and the RoPE key)",
        {"R_kv": "kv_lora_rank", "D_r": "qk_rope_head_dim", "D_v": "v_head_dim"},
        symbols=MLA_SYMBOLS,
    )


def _speculative(
    title: str,
    alpha: float,
    gamma: int,
    cost_ratio: float | None,
    value: float,
    gamma_symbol: str = r"\gamma",
) -> Derivation:
    """Leviathan et al. 2023: a target step's expected tokens E, or (with ``cost_ratio``) its
    speedup E / (γc + 1); E = γ + 1 when every draft is accepted."""
    terms: dict[str, float] = {"alpha": alpha, "gamma": gamma}
    expected = "(1 - alpha**(gamma + 1))/(1 - alpha)" if alpha < 1 else "gamma + 1"
    expression = expected
    if cost_ratio is not None:
        terms["c"] = cost_ratio
        expression = (
            "(1 - alpha**(gamma + 1))/((1 - alpha)*(gamma*c + 1))"
            if alpha < 1
            else "(gamma + 1)/(gamma*c + 1)"
        )
    return Derivation(
        title,
        r"\frac{1 - \alpha^{\gamma+1}}{(1 - \alpha)(\gamma c + 1)}",
        expression,
        terms,
        value,
        "Leviathan et al. 2023, Fast Inference from Transformers via Speculative Decoding, "
        "Theorem 3.8 and Corollary 3.9",
        "a verification of γ + 1 tokens costs one target step",
        {"alpha": "acceptance rate", "c": "a draft step's time ÷ a target step's"},
        symbols={"gamma": gamma_symbol},
    )


def speculative_gains(
    alpha: float, gamma: int, cost_ratio: float
) -> tuple[Derivation, Derivation, Derivation]:
    """The Inference systems page's three figures (``analysis.speculation``): E at γ, the
    speedup at γ and the speedup at the best γ*."""
    s = speculation(alpha, gamma, cost_ratio)  # checks the arguments
    expected = replace(
        _speculative("Expected tokens per target step", alpha, gamma, None, s.expected_tokens_per_step),
        lhs="E",
    )
    at_gamma = replace(_speculative("Speedup", alpha, gamma, cost_ratio, s.speedup), lhs=r"\text{speedup}")
    best = _speculative("Speedup at the best γ", alpha, s.best_gamma, cost_ratio, s.best_speedup, r"\gamma^*")
    best = replace(best, lhs=rf"\text{{speedup}}(\gamma^* = {s.best_gamma})")
    return expected, at_gamma, best


def training_bytes(cfg: ModelConfig, seq_len: int, batch: int, dtype: str) -> Derivation:
    """One GPU's training memory with AdamW, unsharded (``memory.training_memory``): weights and
    gradients at b bytes, the two moments, the fp32 master copy under mixed precision, and
    the activations."""
    m = training_memory(cfg, seq_len, batch, dtype)
    c = m.components
    P = count_params(cfg).total
    terms: dict[str, float] = {"b": c["weights"] // P, "Psi": P, "m": c["optimizer_moments"] // (2 * P)}
    expression = "b*Psi + b*Psi + 2*m*Psi"
    if c["master_weights"]:
        terms["w"] = c["master_weights"] // P
        expression += " + w*Psi"
    terms["A"] = c["activations"]
    return Derivation(
        "Training memory (one GPU, AdamW)",
        r"\underbrace{2\Psi + 2\Psi + 12\Psi}_{\text{mixed-precision AdamW (ZeRO)}} + A",
        expression + " + A",
        terms,
        m.total_bytes,
        "Rajbhandari et al. 2020 (ZeRO), §3: 2Ψ + 2Ψ + 12Ψ under mixed precision",
        "weights and gradients at the compute dtype; AdamW's m and v (and the master copy) in fp32 "
        "under mixed precision; activations as autograd saves them",
        {
            "Psi": "parameters",
            "b": f"bytes per weight and gradient ({dtype})",
            "m": "bytes per moment",
            "w": "bytes per master weight (fp32)",
            "A": f"activations at B={batch}, T={seq_len:,}",
        },
        lhs=r"\text{training bytes}",
    )


def palm_training_per_token(cfg: ModelConfig, seq_len: int) -> Derivation:
    """PaLM's per-token training FLOPs, 6N + 12·L·H·Q·T (Chowdhery et al. 2022, App. B):
    ``flops.palm_training_per_token``; the keys the last query attends, summed over the blocks,
    are L·T without windows or Gated DeltaNet blocks."""
    f = count_flops(cfg, seq_len, 1)
    s = Shapes.of(cfg)
    local = sum(cfg.local_layer_flags)
    terms: dict[str, float] = {"N": f.palm_params, "H": s.H, "D": s.D}
    plain = not local and not cfg.has_linear_attention
    keys = "L*T" if plain else "K"
    if plain:
        terms.update(L=s.L, T=seq_len)
    else:
        window = min(seq_len, cfg.sliding_window or seq_len)
        terms["K"] = local * window + (cfg.full_attention_layers - local) * seq_len
    head = "12*H*D" if s.Dv == s.D else "6*H*(D + D_v)"
    if s.Dv != s.D:
        terms["D_v"] = s.Dv
    return Derivation(
        "PaLM's training FLOPs per token",
        r"6N + 12\,L H Q T",
        f"6*N + {head}*{keys}",
        terms,
        f.palm_training_per_token,
        "Chowdhery et al. 2022, PaLM, App. B (nanoGPT's estimate_mfu)",
        "N: every parameter in a matmul (embedding tables out, a tied head in, only the routed experts)",
        {"N": "parameters in a token's matmuls", "K": "keys the last query attends, summed over the blocks"},
    )


def score_flops_per_token(cfg: ModelConfig, seq_len: int) -> Derivation:
    """The attention scores' FLOPs per token of a forward over T tokens (QKᵀ over D, AV over
    D_v, full T×T): 4·H·D·L·T, L the attending blocks; with windows over the keys a query
    meets, summed over the blocks (K, a mean over the T queries)."""
    f = count_flops(cfg, seq_len, 1)
    s = Shapes.of(cfg)
    terms: dict[str, float] = {"H": s.H, "D": s.D}
    head = "4*H*D" if s.Dv == s.D else "2*H*(D + D_v)"
    if s.Dv != s.D:
        terms["D_v"] = s.Dv
    pairs = f.by_component["attention_scores"] // pair_width(cfg) // (2 * s.H)  # per forward
    if sum(cfg.local_layer_flags):  # a window's blocks meet at most W keys
        terms.update(K=pairs / seq_len)
        keys = "K"
    else:  # every attending block meets T keys (Gated DeltaNet blocks none)
        layers = "L_attn" if cfg.has_linear_attention else "L"
        terms.update({layers: cfg.full_attention_layers, "T": seq_len})
        keys = f"{layers}*T"
    return Derivation(
        "Score FLOPs per token",
        "",
        f"{head}*{keys}",
        terms,
        f.by_component["attention_scores"] / seq_len,
        "counted per matmul (analysis.flops), 2 FLOPs per multiply-add",
        "every key of the full T×T (a window's at most W)",
        {"K": "keys a query meets, summed over the blocks (mean over the T queries)"},
    )
