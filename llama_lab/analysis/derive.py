"""Every headline number explained: its formula, the formula with the config's values put in,
the value that evaluates to (recomputed here from the terms, independently of the counters, and
checked equal to them in the tests), the counting convention — with the other conventions in
use elsewhere as alternatives, each with its own value — and the source.

A ``Derivation``'s ``expression`` is plain arithmetic over its ``terms`` (names → numbers); the
page shows it with the numbers substituted, and ``evaluate()`` computes it. This module holds the
class and the derivations of a model's parameters and FLOPs; ``derive_memory`` those of what it
holds in memory (KV cache, weights, the longest context, what attention keeps), and
``derive_measured`` those of what a run measures (throughput, MFU, speculative speedup).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..config import ModelConfig
from .equations import NEW_LINE, chain, evaluate, latex_symbol, number, render, side_by_side
from .flops import count_flops, last_query_keys, pair_width
from .params import count_params, cross_attention_detail, norm_params, norms_per_block
from .shapes import Shapes


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
        if cfg.has_indexer:  # DSA: wq_b, wk, weights_proj and the key's LayerNorm (γ, β)
            terms.update(H_i=s.Hi, D_i=s.Di)
            parts.append("R_q*H_i*D_i + C*D_i + C*H_i + 2*D_i")
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
        "untied": int(cfg.lm_head and not cfg.tie_embeddings),  # (a bare encoder has no head)
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
    if cfg.is_encoder_decoder:  # the encoder's blocks (a dense block each), every decoder block's
        # cross-attention and its norm, and two position tables (the encoder's and the decoder's)
        expr, block_terms = _block_terms(cfg, False)
        terms.update(L_enc=cfg.encoder_layers, N_enc=evaluate(expr, block_terms), P=cfg.max_seq_len)
        terms["N_cross"] = sum(cross_attention_detail(cfg).values())
        meaning.update(
            N_enc=f"an encoder block: {expr}", N_cross="a decoder block's cross-attention and norm"
        )
        expression += " + L_enc*N_enc + L_dense*N_cross + 2*P*C"
    elif cfg.pos_encoding == "learned":
        terms["P"] = cfg.max_seq_len
        expression += " + P*C"
    if cfg.type_vocab_size:  # BERT's segment table
        terms["S"] = cfg.type_vocab_size
        meaning["S"] = "segment (token type) rows"
        expression += " + S*C"
    if cfg.embed_norm:  # BERT's LayerNorm on the summed embeddings
        terms["n_emb"] = norm_params(cfg)
        meaning["n_emb"] = "the embedding norm's parameters"
        expression += " + n_emb"
    if cfg.pooler:  # BERT's pooler: dense C → C with its bias
        expression += " + C*C + C"
    if cfg.vision is not None:  # a multimodal model counted whole (analysis.vision)
        terms["N_vision"] = p.by_component["vision"]
        terms["N_proj"] = p.by_component["projector"]
        meaning["N_vision"] = f"the {cfg.vision.kind} vision tower"
        meaning["N_proj"] = f"the {cfg.vision.projector} projector into the text decoder"
        expression += " + N_vision + N_proj"
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
    if cfg.is_encoder_decoder:  # a decoder block: its cross-attention and norm too
        terms["N_cross"] = sum(cross_attention_detail(cfg).values())
        expr += " + N_cross"
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
    terms["V"] += cfg.type_vocab_size  # BERT's segment rows: embedding rows too
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
    index = f.by_component.get("indexer_scores", 0)  # DSA's indexer over every earlier key
    pooler = f.by_component.get("pooler", 0)  # BERT's pooler: the first token of each sequence
    matmul = f.forward - f.by_component["attention_scores"] - delta - index - pooler
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
    index_pair = 2 * s.Hi * (s.Di + 1)  # DSA: q_h·k over the indexer's heads, their weighted sum
    if index:
        terms.update(H_i=s.Hi, D_i=s.Di, S_I=index // index_pair)
        expression += " + 2*H_i*(D_i + 1)*S_I"
        formula += r" + 2\,H_I (D_I + 1) \sum_\ell (\text{indexer pairs})_\ell"
        meaning["S_I"] = "query-key pairs the DSA indexer scores (every earlier key), summed over the blocks"
    if pooler:
        terms["C"] = s.C
        expression += " + 2*B*C*C"
        formula += r" + 2\,B C^2"
        meaning["C"] = "d_model (BERT's pooler: a C×C matmul on each sequence's first token)"
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
    if index:  # the indexer's causal pairs: forward_causal less everything else's
        rest = f.forward_causal - (f.forward - f.by_component["attention_scores"] - index)
        causal_terms["S_I"] = (rest - f.attention_scores_causal) // index_pair
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


MLA_SYMBOLS = {"R_kv": "d_c", "D_r": "d_h^R", "D_v": "D_v"}  # DeepSeek-V2's names


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
        terms["K"] = last_query_keys(cfg, seq_len)
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
    if cfg.is_encoder_decoder:  # per target token: the encoder's, self- and cross-attention's keys
        terms.update(L_enc=cfg.encoder_layers, L=cfg.n_layers, T=seq_len)
        keys = "(L_enc + 2*L)*T"  # a source as long as the target (S = T)
    elif sum(cfg.local_layer_flags):  # a window's blocks meet at most W keys
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
