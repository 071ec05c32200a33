"""The 2017 Transformer, an encoder-decoder (Vaswani et al. 2017, Fig. 1), with the state-dict
keys of transformers' ``MarianMTModel`` so that its weights load either way and the logits match:
an encoder of ``encoder_layers`` bidirectional Post-LN blocks over the source, a decoder of
``n_layers`` blocks each attending causally to the target, then cross-attending to the encoder's
output, then its FFN (each sublayer x → LN(x + f(x))); one embedding shared by the source, the
target and the tied head, × √d (``embed_scale``); a position table per stack (Marian's static
sinusoids, sines in the first half of a row and cosines in the second, or learned); the logits
plus ``final_logits_bias`` (a buffer, zero unless a checkpoint sets it).

Decoding keeps two caches (``EncoderDecoderCache``): the decoder's self-attention K and V, one
row per generated token (the lab's ``KVCache``), and each block's cross-attention K and V of
the source, computed once from the encoder's output and fixed for the whole generation. The
encoder caches nothing. Shapes: B batch, S source length, T target tokens, H heads, D head dim,
C = d_model.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..config import ModelConfig
from .attention import causal_attention
from .kv_cache import KVCache
from .mlp import ungated_activation
from .norms import make_norm


def marian_sinusoidal_table(n_positions: int, dim: int) -> torch.Tensor:
    """MarianSinusoidalPositionalEmbedding's table: the 2017 sinusoids (Vaswani et al. §3.5, as
    ``positions.sinusoidal_table``) with the sines in the first half of each row and the cosines
    in the second, computed in float64 as transformers does (numpy) and rounded once."""
    pos = torch.arange(n_positions, dtype=torch.float64)[:, None]
    angle = pos / 10000 ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)  # (n, ⌈dim/2⌉)
    return torch.cat((angle.sin(), angle.cos()[:, : dim // 2]), dim=-1).float()


class MultiHeadAttention(nn.Module):
    """MarianAttention: q from x, k and v from ``source`` (x itself for self-attention), every
    projection with a bias, the scores × 1/√D; the output through ``out_proj``. G < H KV heads
    (GQA, MQA: not Marian's, which MarianConfig cannot write) shrink k_proj and v_proj."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        C, self.H, self.G, self.D = cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        self.q_proj = nn.Linear(C, self.H * self.D, bias=True)
        self.k_proj = nn.Linear(C, self.G * self.D, bias=True)
        self.v_proj = nn.Linear(C, self.G * self.D, bias=True)
        self.out_proj = nn.Linear(self.H * self.D, C, bias=True)

    def heads(self, x: torch.Tensor, n: int) -> torch.Tensor:
        """(B, T, n·D) → (B, n, T, D)."""
        B, T, _ = x.shape
        return x.view(B, T, n, self.D).transpose(1, 2)

    def keys_values(self, source: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """K and V (B, G, S, D) of ``source`` (B, S, C): what a cross-attention cache holds."""
        return self.heads(self.k_proj(source), self.G), self.heads(self.v_proj(source), self.G)

    def forward(
        self,
        x: torch.Tensor,
        keys_values: tuple[torch.Tensor, torch.Tensor] | None = None,
        causal: bool = False,
        cache: KVCache | None = None,
        layer: int = 0,
    ) -> torch.Tensor:
        """x (B, T, C) attends to ``keys_values`` (cross-attention: the source's, fixed) or to
        itself (self-attention: bidirectional in the encoder; ``causal`` in the decoder, with
        the earlier tokens' K and V from ``cache``'s slot ``layer``)."""
        B, T, _ = x.shape
        q = self.heads(self.q_proj(x), self.H)  # (B, H, T, D)
        k, v = keys_values if keys_values is not None else self.keys_values(x)
        n_rep = self.H // self.G
        if causal:
            if cache is not None:
                k, v = cache.update(layer, k, v)  # (B, G, cached + T, D)
            out = causal_attention(q, k, v, n_rep)
        elif n_rep == 1:  # every query sees every key (the encoder; the decoder's cross-attention)
            out = F.scaled_dot_product_attention(q, k, v)
        else:
            out = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        return self.out_proj(out.transpose(1, 2).reshape(B, T, self.H * self.D))


class EncoderLayer(nn.Module):
    """x → LN(x + SelfAttn(x)) → LN(x + FFN(x)), attention bidirectional."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(cfg)
        self.self_attn_layer_norm = make_norm(cfg)
        self.fc1 = nn.Linear(cfg.d_model, cfg.ffn_hidden)
        self.fc2 = nn.Linear(cfg.ffn_hidden, cfg.d_model)
        self.final_layer_norm = make_norm(cfg)
        self.act = ungated_activation(cfg.ffn_type)

    def ffn(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.self_attn_layer_norm(x + self.self_attn(x))
        return self.final_layer_norm(x + self.ffn(x))


class DecoderLayer(EncoderLayer):
    """x → LN(x + CausalSelfAttn(x)) → LN(x + CrossAttn(x, source)) → LN(x + FFN(x))."""

    def __init__(self, cfg: ModelConfig, layer_idx: int):
        super().__init__(cfg)
        self.layer_idx = layer_idx
        self.encoder_attn = MultiHeadAttention(cfg)
        self.encoder_attn_layer_norm = make_norm(cfg)

    def forward(  # type: ignore[override]
        self, x: torch.Tensor, source_kv: tuple[torch.Tensor, torch.Tensor], cache: KVCache | None = None
    ) -> torch.Tensor:
        x = self.self_attn_layer_norm(x + self.self_attn(x, causal=True, cache=cache, layer=self.layer_idx))
        x = self.encoder_attn_layer_norm(x + self.encoder_attn(x, source_kv))
        return self.final_layer_norm(x + self.ffn(x))


class Stack(nn.Module):
    """MarianEncoder / MarianDecoder: the shared embedding × √d, plus positions, then the blocks."""

    def __init__(self, cfg: ModelConfig, shared: nn.Embedding, layers: list[nn.Module]):
        super().__init__()
        self.embed_tokens = shared  # the same module as model.shared (its key appears thrice)
        self.embed_positions = nn.Embedding(cfg.max_seq_len, cfg.d_model)
        if cfg.pos_encoding == "sinusoidal":  # static, as Marian's (a parameter all the same)
            self.embed_positions.weight.requires_grad_(False)
        self.layers = nn.ModuleList(layers)
        self.scale = math.sqrt(cfg.d_model) if cfg.embed_scale else 1.0
        self.max_len = cfg.max_seq_len

    def embed(self, ids: torch.Tensor, start: int = 0) -> torch.Tensor:
        """(B, T) token ids at positions start.. → (B, T, C)."""
        end = start + ids.shape[1]
        if end > self.max_len:
            raise ValueError(f"sequence of {end} tokens exceeds max_seq_len={self.max_len}")
        positions = torch.arange(start, end, device=ids.device)
        return self.embed_tokens(ids) * self.scale + self.embed_positions(positions)


class EncoderDecoderCache:
    """The decoder's two caches: its self-attention's K and V (``KVCache``, one row per target
    token, growing) and every block's cross-attention K and V of the source (B, G, S, D each,
    computed once from the encoder's output: ``source_kv``, fixed)."""

    def __init__(self, cfg: ModelConfig, batch_size: int, max_len: int | None, device, dtype):
        self.self_attention = KVCache(cfg, batch_size, max_len, device=device, dtype=dtype)
        self.cross_attention: list[tuple[torch.Tensor, torch.Tensor]] = []

    @property
    def length(self) -> int:
        return self.self_attention.length

    def nbytes(self) -> int:
        """Bytes held: the target tokens' self-attention K and V so far, and the source's."""
        cross = sum(t.numel() * t.element_size() for kv in self.cross_attention for t in kv)
        return self.self_attention.nbytes() + cross


class MarianBody(nn.Module):
    """MarianModel: ``shared``, ``encoder``, ``decoder``."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.shared = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.encoder = Stack(cfg, self.shared, [EncoderLayer(cfg) for _ in range(cfg.encoder_layers)])
        self.decoder = Stack(cfg, self.shared, [DecoderLayer(cfg, i) for i in range(cfg.n_layers)])


class EncoderDecoderLM(nn.Module):
    """forward(input_ids (B, S), decoder_input_ids (B, T)) → logits (B, T, V), as
    ``MarianMTModel(input_ids=…, decoder_input_ids=…).logits``; its state-dict keys."""

    final_logits_bias: torch.Tensor  # (1, V), a buffer

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.model = MarianBody(cfg)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.model.shared.weight
        self.register_buffer("final_logits_bias", torch.zeros(1, cfg.vocab_size))

    def reset_fixed(self) -> None:
        """What is not drawn: ``final_logits_bias`` 0, and Marian's static sinusoidal tables in
        both stacks (a learned table keeps its draw)."""
        with torch.no_grad():
            self.final_logits_bias.zero_()
            if self.cfg.pos_encoding != "sinusoidal":
                return
            table = marian_sinusoidal_table(self.cfg.max_seq_len, self.cfg.d_model)
            for stack in (self.model.encoder, self.model.decoder):
                stack.embed_positions.weight.copy_(table)

    def encode(self, input_ids: torch.Tensor) -> torch.Tensor:
        """The source (B, S) → the encoder's output (B, S, C)."""
        x = self.model.encoder.embed(input_ids)
        for layer in self.model.encoder.layers:
            x = layer(x)
        return x

    def source_kv(self, encoded: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Each decoder block's cross-attention K and V (B, G, S, D) of the encoder's output."""
        return [block.encoder_attn.keys_values(encoded) for block in self.decoder_blocks]

    @property
    def decoder_blocks(self) -> list[DecoderLayer]:
        """The decoder's blocks, typed (an nn.ModuleList hands each back as a plain Module)."""
        return [block for block in self.model.decoder.layers if isinstance(block, DecoderLayer)]

    def decode(
        self,
        decoder_input_ids: torch.Tensor,
        source_kv: list[tuple[torch.Tensor, torch.Tensor]],
        cache: EncoderDecoderCache | None = None,
    ) -> torch.Tensor:
        """The target tokens (B, T) after the ``cache``'s → logits (B, T, V)."""
        self_cache = cache.self_attention if cache is not None else None
        start = self_cache.length if self_cache is not None else 0
        x = self.model.decoder.embed(decoder_input_ids, start)
        for layer, kv in zip(self.decoder_blocks, source_kv):
            x = layer(x, kv, self_cache)
        if self_cache is not None:
            self_cache.length += decoder_input_ids.shape[1]
        return self.lm_head(x) + self.final_logits_bias

    def forward(
        self,
        input_ids: torch.Tensor,
        decoder_input_ids: torch.Tensor | None = None,
        cache: EncoderDecoderCache | None = None,
    ) -> torch.Tensor:
        """Logits (B, T, V) of the target ``decoder_input_ids`` given the source ``input_ids``
        (None: the source is its own target, as a causal model's single input). With a
        ``cache``, its cross-attention K and V are computed from the source once and reused."""
        target = input_ids if decoder_input_ids is None else decoder_input_ids
        if cache is None:
            return self.decode(target, self.source_kv(self.encode(input_ids)))
        if not cache.cross_attention:
            cache.cross_attention = self.source_kv(self.encode(input_ids))
        return self.decode(target, cache.cross_attention, cache)

    def loss(self, input_ids: torch.Tensor, decoder_input_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Mean next-token cross-entropy of the target (teacher forcing): positions 0..T-2 of
        ``decoder_input_ids`` predicting 1..T-1, given the source."""
        target = input_ids if decoder_input_ids is None else decoder_input_ids
        logits = self(input_ids, target[:, :-1])
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target[:, 1:].reshape(-1))

    def new_cache(self, batch_size: int, max_len: int | None = None) -> EncoderDecoderCache:
        p = self.lm_head.weight
        return EncoderDecoderCache(self.cfg, batch_size, max_len, p.device, p.dtype)

    @torch.no_grad()
    def generate(self, input_ids: torch.Tensor, start_ids: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
        """Greedy decoding of the source ``input_ids`` (B, S) from the target prefix
        ``start_ids`` (B, T0): the encoder runs once, the cross-attention K and V are cached
        once, then one target token at a time. Returns (B, T0 + max_new_tokens)."""
        cache = self.new_cache(input_ids.shape[0], start_ids.shape[1] + max_new_tokens)
        tokens = [start_ids]
        logits = self(input_ids, start_ids, cache)
        for step in range(max_new_tokens):
            tokens.append(logits[:, -1:].argmax(-1))  # (B, 1)
            if step + 1 < max_new_tokens:
                logits = self(input_ids, tokens[-1], cache)
        return torch.cat(tokens, dim=1)


__all__ = ["EncoderDecoderCache", "EncoderDecoderLM", "marian_sinusoidal_table"]
