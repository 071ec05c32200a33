"""The decoder: blocks (Pre-LN or Post-LN), the body (transformers' ``LlamaModel``) and the
causal LM head. Module and parameter names follow transformers' ``LlamaForCausalLM``
(``model.layers.{i}.self_attn.q_proj`` ...), so a LLaMA state dict loads either way and gives
the same logits. Shapes: B batch, T new tokens, C = d_model, V vocab.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from ..config import ModelConfig, require_decoder_only
from .attention import Attention
from .bert_keys import has_bert_keys, use_bert_keys
from .delta_net import GatedDeltaNet
from .kv_cache import KVCache
from .loss import linear_cross_entropy
from .mla import LatentAttention
from .mlp import MLP, GptOssMoE, Llama4MoE, MoE, SparseMoE
from .norms import make_norm
from .positions import PositionTables

# The model-width norms of one block, by module name, for each norm_position: Pre-LN and
# Post-LN's two (the attention's and the FFN's), Gemma's sandwich of four (post_attention_layernorm
# is then the attention output's), OLMo 2's two output norms.
BLOCK_NORMS = {
    "pre": ("input_layernorm", "post_attention_layernorm"),
    "post": ("input_layernorm", "post_attention_layernorm"),
    "sandwich": (
        "input_layernorm",
        "post_attention_layernorm",
        "pre_feedforward_layernorm",
        "post_feedforward_layernorm",
    ),
    "output": ("post_attention_layernorm", "post_feedforward_layernorm"),
}


class DecoderLayer(nn.Module):
    """A block: Pre-LN, Post-LN, sandwich (Gemma 2/3: Pre-LN plus a norm on each sublayer's
    output before the add; its modules named as Gemma's — post_attention_layernorm is then the
    attention output's norm, pre_feedforward_layernorm the FFN input's) or output norms only
    (OLMo 2: post_attention_layernorm and post_feedforward_layernorm on the sublayers' outputs)."""

    # the norms BLOCK_NORMS names for the block's norm_position (added by name in __init__)
    input_layernorm: nn.Module
    post_attention_layernorm: nn.Module
    pre_feedforward_layernorm: nn.Module
    post_feedforward_layernorm: nn.Module

    def __init__(self, cfg: ModelConfig, layer_idx: int):
        super().__init__()
        self.pre_norm = cfg.norm_position in ("pre", "sandwich")  # the sublayers read a norm
        self.sandwich = cfg.norm_position == "sandwich"
        self.output_norm = cfg.norm_position == "output"  # OLMo 2: x + norm(f(x))
        self.position = cfg.norm_position
        self.residual_multiplier = cfg.residual_multiplier  # Granite's µP scale; 1 elsewhere
        self.linear = cfg.linear_layer_flags[layer_idx]  # Gated DeltaNet mixes its tokens
        if self.linear:
            self.linear_attn = GatedDeltaNet(cfg, layer_idx)
        else:
            self.self_attn = LatentAttention(cfg, layer_idx) if cfg.is_mla else Attention(cfg, layer_idx)
        moe = {"gpt_oss": GptOssMoE, "llama4": Llama4MoE}.get(cfg.moe_style, SparseMoE)
        ffn = moe(cfg) if cfg.moe_layer_flags[layer_idx] else MLP(cfg)
        self.ffn_name = "feed_forward" if cfg.moe_style == "llama4" else "mlp"  # Llama 4's name
        self.add_module(self.ffn_name, ffn)
        for name in BLOCK_NORMS[cfg.norm_position]:  # Gemma's, OLMo 2's or LLaMA's names
            self.add_module(name, make_norm(cfg))

    @property
    def first_norm(self) -> nn.Module:
        """The block's first norm: the attention input's, or (OLMo 2) the attention output's."""
        return self.get_submodule(BLOCK_NORMS[self.position][0])

    @property
    def ffn(self) -> MLP | MoE:
        """The block's FFN (a dense one or a mixture of experts): ``mlp``, or Llama 4's
        ``feed_forward``."""
        ffn = self.get_submodule(self.ffn_name)
        if not isinstance(ffn, (MLP, MoE)):
            raise TypeError(f"{self.ffn_name} is a {type(ffn).__name__}, not an MLP or a MoE")
        return ffn

    @property
    def mixer(self) -> nn.Module:
        """The block's token mixer: self_attn, or (Qwen3-Next, Qwen3.5) linear_attn."""
        return self.linear_attn if self.linear else self.self_attn

    def forward(self, x, rope=None, cache=None):
        # x + m·f(…): each sublayer's output scaled by the residual multiplier m before the add
        # (Granite; 1 elsewhere), in one kernel: x.add(f, alpha=m)
        m = self.residual_multiplier
        if self.linear:  # Qwen3-Next's and Qwen3.5's blocks are Pre-LN
            x = x.add(self.linear_attn(self.input_layernorm(x), rope, cache), alpha=m)
            return x.add(self.ffn(self.post_attention_layernorm(x)), alpha=m)
        if self.output_norm:  # the sublayers read x itself; their outputs are normalised
            x = x.add(self.post_attention_layernorm(self.self_attn(x, rope, cache)), alpha=m)
            x = x.add(self.post_feedforward_layernorm(self.ffn(x)), alpha=m)
        elif self.sandwich:  # x + norm(f(norm(x))): the residual path stays the identity
            x = x.add(
                self.post_attention_layernorm(self.self_attn(self.input_layernorm(x), rope, cache)), alpha=m
            )
            x = x.add(self.post_feedforward_layernorm(self.ffn(self.pre_feedforward_layernorm(x))), alpha=m)
        elif self.pre_norm:  # identity residual path: dx_{l+1}/dx_l = I + F'(LN(x_l)) · LN'(x_l)
            x = x.add(self.self_attn(self.input_layernorm(x), rope, cache), alpha=m)
            x = x.add(self.ffn(self.post_attention_layernorm(x)), alpha=m)
        else:  # Post-LN: the norm sits on the residual path
            x = self.input_layernorm(x.add(self.self_attn(x, rope, cache), alpha=m))
            x = self.post_attention_layernorm(x.add(self.ffn(x), alpha=m))
        return x


def _block(layer: nn.Module) -> DecoderLayer:
    if not isinstance(layer, DecoderLayer):
        raise TypeError(f"model.layers holds a {type(layer).__name__}, not a DecoderLayer")
    return layer


class DecoderBody(nn.Module):
    """transformers' ``LlamaModel``: embeddings, blocks, final norm."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.d_model)
        if cfg.pos_encoding == "learned":
            self.embed_positions = nn.Embedding(cfg.max_seq_len, cfg.d_model)
        if cfg.type_vocab_size:  # BERT's segment embeddings (sentence A or B)
            self.embed_token_types = nn.Embedding(cfg.type_vocab_size, cfg.d_model)
        if cfg.embed_norm:  # BERT: a LayerNorm on the summed embeddings
            self.embed_norm = make_norm(cfg)
        self.layers = nn.ModuleList(DecoderLayer(cfg, i) for i in range(cfg.n_layers))
        if cfg.final_norm:
            self.norm = make_norm(cfg)
        self.position_tables = PositionTables(cfg)

    @property
    def blocks(self) -> list[DecoderLayer]:
        """``layers`` typed: an nn.ModuleList hands each block back as a plain Module."""
        return [_block(layer) for layer in self.layers]

    def forward(self, input_ids, cache: KVCache | None = None, final_norm: bool = True):
        B, T = input_ids.shape
        start = cache.length if cache is not None else 0
        if start + T > self.cfg.max_seq_len:
            raise ValueError(f"sequence of {start + T} tokens exceeds max_seq_len={self.cfg.max_seq_len}")
        if cache is not None and start + T > cache.max_len:
            raise ValueError(f"sequence of {start + T} tokens exceeds the cache's max_len={cache.max_len}")
        x = self.embed_tokens(input_ids)  # (B, T, C)
        if self.cfg.embed_scale:  # Vaswani et al. §3.4; √d rounded to the weights' dtype (Gemma)
            x = x * torch.tensor(math.sqrt(self.cfg.d_model), dtype=x.dtype).item()
        if self.cfg.embedding_multiplier != 1.0:  # Granite's µP scale of the embeddings
            x = x * self.cfg.embedding_multiplier
        ropes: tuple = (None, None)  # (global, windowed) layers' RoPE tables
        if self.cfg.pos_encoding in ("rope", "sinusoidal"):
            # a cache will hold up to its max_len tokens: build the tables for all of them once
            # (seen: the positions this forward reaches, which LongRoPE picks its factors by)
            end, seen, device = cache.max_len if cache is not None else start + T, start + T, input_ids.device
            tables = [t[start : start + T] for t in self.position_tables.get(end, device, seen=seen)]
            if self.cfg.pos_encoding == "rope":
                local = [t[start : start + T] for t in self.position_tables.get(end, device, True, seen)]
                ropes = (tables[0], tables[1]), (local[0], local[1])  # (T, D) each
            else:
                x = x + tables[0].to(x)  # (T, C)
        elif self.cfg.pos_encoding == "learned":
            x = x + self.embed_positions(torch.arange(start, start + T, device=input_ids.device))
        if self.cfg.type_vocab_size:  # every token of segment 0 (BertModel's default token_type_ids)
            x = x + self.embed_token_types.weight[0]
        if self.cfg.embed_norm:
            x = self.embed_norm(x)
        for layer, windowed, rotated in zip(
            self.layers, self.cfg.local_layer_flags, self.cfg.rope_layer_flags
        ):
            x = layer(x, ropes[windowed] if rotated else None, cache)  # NoPE blocks: none
        if cache is not None:
            cache.length += T
        return self.norm(x) if self.cfg.final_norm and final_norm else x


class CausalLM(nn.Module):
    """forward(input_ids (B, T)) -> logits (B, T, vocab); state-dict keys as LlamaForCausalLM.
    A bare encoder (``lm_head=False``: BertModel) returns the last hidden state (B, T, C)."""

    lm_head: nn.Linear

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.model = DecoderBody(cfg)
        if cfg.lm_head:
            self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
            if cfg.tie_embeddings:
                self.lm_head.weight = self.model.embed_tokens.weight
        if cfg.pooler:  # BERT: tanh(dense(h[CLS])), a biased C×C layer
            self.pooler = nn.Linear(cfg.d_model, cfg.d_model)
        if has_bert_keys(cfg):  # BertModel's state-dict keys
            use_bert_keys(self)

    def forward(
        self, input_ids: torch.Tensor, cache: KVCache | None = None, last_only: bool = False
    ) -> torch.Tensor:
        """Logits (B, T, V); ``last_only``: only the last position's (B, 1, V), as a prefill
        that is followed by decoding needs — T·V fewer multiply-adds and logits."""
        hidden = self.model(input_ids, cache)  # (B, T, C)
        if not self.cfg.lm_head:
            return hidden
        return self.cap(self.lm_head(self.head_input(hidden[:, -1:] if last_only else hidden)))

    def pooled(self, hidden: torch.Tensor) -> torch.Tensor:
        """BERT's pooler output (B, C): tanh of the dense layer on the first token's state."""
        return torch.tanh(self.pooler(hidden[:, 0]))

    def head_input(self, hidden: torch.Tensor) -> torch.Tensor:
        """What the LM head reads: the hidden states ÷ logits_scaling (Granite divides its logits
        by it; the head is linear, so dividing its input is the same), or as they are."""
        scaling = self.cfg.logits_scaling
        return hidden / scaling if scaling != 1.0 else hidden

    def cap(self, logits: torch.Tensor) -> torch.Tensor:
        """The logits soft-capped, cap · tanh(z / cap) (Gemma 2's final_logit_softcapping), or as
        they are."""
        cap = self.cfg.logit_softcap
        return torch.tanh(logits / cap) * cap if cap else logits

    def loss(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Mean next-token cross-entropy: positions 0..T-2 predicting 1..T-1 (transformers'
        ``labels=input_ids``). Causal attention: the first T-1 positions' hidden states do not
        depend on the last token, so this is ``loss_on`` of the first T-1 tokens."""
        require_decoder_only(self.cfg, "next-token loss")
        return self.loss_on(input_ids[:, :-1], input_ids[:, 1:])

    def loss_on(self, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy of ``inputs``' next-token predictions (B, T) against ``targets``
        (B, T), through the LM head in chunks (``model.loss``: never the B·T·V logits at
        once)."""
        require_decoder_only(self.cfg, "next-token loss")
        hidden = self.head_input(self.model(inputs))  # (B, T, C)
        return linear_cross_entropy(
            hidden.reshape(-1, hidden.shape[-1]), self.lm_head.weight, targets, softcap=self.cfg.logit_softcap
        )

    def logits_without_final_norm(self, input_ids: torch.Tensor) -> torch.Tensor:
        """What the seed's "forgot the final norm" bug computes: lm_head on the raw last block."""
        return self.cap(self.lm_head(self.head_input(self.model(input_ids, final_norm=False))))

    def new_cache(self, batch_size: int, max_len: int | None = None) -> KVCache:
        require_decoder_only(self.cfg, "decoding with a KV cache")
        p = self.model.embed_tokens.weight
        return KVCache(self.cfg, batch_size, max_len, device=p.device, dtype=p.dtype)

    @torch.no_grad()
    def generate(
        self, input_ids: torch.Tensor, max_new_tokens: int, cache: KVCache | None = None
    ) -> torch.Tensor:
        """Greedy decoding with the KV cache: one prefill (last position's logits only), then
        one token at a time."""
        B, T = input_ids.shape
        cache = cache or self.new_cache(B, T + max_new_tokens)
        tokens = [input_ids]
        logits = self(input_ids, cache, last_only=True)  # prefill: (B, 1, V)
        for step in range(max_new_tokens):
            tokens.append(logits[:, -1:].argmax(-1))  # (B, 1)
            if step + 1 < max_new_tokens:
                logits = self(tokens[-1], cache)  # one token
        return torch.cat(tokens, dim=1)
