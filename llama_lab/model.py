"""A configurable decoder-only Transformer: anything between the 2017 recipe and LLaMA-3.

Module and parameter names follow transformers' ``LlamaForCausalLM`` (``model.layers.{i}.
self_attn.q_proj`` ...), and RoPE uses its rotate-half convention, so a LLaMA state dict loads
either way and gives the same logits. Shapes: B batch, T new tokens, S cached + new tokens,
H query heads, G KV heads, D head dim, C = d_model.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import ConfigError, ModelConfig



def _sdpa_supports_gqa() -> bool:
    """Since torch 2.5 SDPA broadcasts KV heads itself (no repeated K/V tensor in memory)."""
    q, kv = torch.zeros(1, 2, 1, 2), torch.zeros(1, 1, 1, 2)
    try:
        F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True)
    except TypeError:
        return False
    return True


SDPA_HAS_GQA = _sdpa_supports_gqa()


class RMSNorm(nn.Module):
    """x / rms(x) · γ, computed in float32 and cast back (as LLaMA)."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def make_norm(cfg: ModelConfig) -> nn.Module:
    if cfg.norm_type == "rmsnorm":
        return RMSNorm(cfg.d_model, cfg.norm_eps)
    return nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps)


# ---- positions -----------------------------------------------------------------------------------
def rope_inv_freq(head_dim: int, theta: float) -> torch.Tensor:
    """θ_i = theta^(-2i/D) for i < D/2, as transformers computes it."""
    return 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))


def rope_cos_sin(positions: torch.Tensor, inv_freq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    angles = torch.outer(positions.float(), inv_freq)          # (T, D/2)
    angles = torch.cat((angles, angles), dim=-1)                # (T, D) rotate-half layout
    return angles.cos(), angles.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: (B, heads, T, D); cos/sin: (T, D)."""
    return (x * cos.to(x.dtype)) + (rotate_half(x) * sin.to(x.dtype))


def sinusoidal_table(n_positions: int, dim: int) -> torch.Tensor:
    """Vaswani et al. 2017, section 3.5: PE[p, 2i] = sin(p/10000^(2i/d)), PE[p, 2i+1] = cos(...)."""
    pos = torch.arange(n_positions, dtype=torch.float32)[:, None]
    div = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.zeros(n_positions, dim)
    table[:, 0::2] = torch.sin(pos * div)
    table[:, 1::2] = torch.cos(pos * div)[:, : dim // 2]
    return table


# ---- KV cache -----------------------------------------------------------------------------------
class KVCache(nn.Module):
    """Preallocated keys and values of every layer: (L, B, G, S_max, D) each."""

    def __init__(self, cfg: ModelConfig, batch_size: int, max_len: int | None = None,
                 device=None, dtype=None):
        super().__init__()
        max_len = max_len or cfg.max_seq_len
        shape = (cfg.n_layers, batch_size, cfg.n_kv_heads, max_len, cfg.head_dim)
        self.register_buffer("k", torch.zeros(shape, device=device, dtype=dtype), persistent=False)
        self.register_buffer("v", torch.zeros(shape, device=device, dtype=dtype), persistent=False)
        self.length = 0      # tokens already cached

    @property
    def max_len(self) -> int:
        return self.k.shape[3]

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store k, v (B, G, T, D) at positions [length, length+T); return all keys/values so far."""
        start, end = self.length, self.length + k.shape[2]
        self.k[layer, :, :, start:end] = k
        self.v[layer, :, :, start:end] = v
        return self.k[layer, :, :, :end], self.v[layer, :, :, :end]

    def allocated_bytes(self) -> int:
        """Bytes of storage the K and V tensors really hold (for all ``max_len`` positions)."""
        return self.k.untyped_storage().nbytes() + self.v.untyped_storage().nbytes()

    def nbytes(self) -> int:
        """Bytes of the cache tensors holding the tokens cached so far."""
        per_token = self.k[:, :, :, :1].numel() * self.k.element_size()
        return 2 * per_token * self.length


# ---- attention ----------------------------------------------------------------------------------
def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, n_rep: int) -> torch.Tensor:
    """q: (B, H, T, D); k, v: (B, G, S, D) with S ≥ T, the last T keys being the new tokens."""
    T, S = q.shape[2], k.shape[2]
    if T == S:
        mask, is_causal = None, True
    elif T == 1:
        mask, is_causal = None, False                       # one new token sees everything cached
    else:                                                   # a chunk after a cache: bottom-right causal
        mask = torch.ones(T, S, dtype=torch.bool, device=q.device).tril(diagonal=S - T)
        is_causal = False
    if n_rep > 1 and SDPA_HAS_GQA:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal,
                                              enable_gqa=True)
    if n_rep > 1:
        k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal)


def reference_attention(q, k, v, n_rep: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain-matmul causal attention that also returns the weights (B, H, T, S): for teaching
    and for tests of the fused path."""
    if n_rep > 1:
        k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)
    T, S = q.shape[2], k.shape[2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])           # (B, H, T, S)
    mask = torch.ones(T, S, dtype=torch.bool, device=q.device).tril(diagonal=S - T)
    weights = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)
    return weights @ v, weights


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig, layer_idx: int):
        super().__init__()
        self.cfg, self.layer_idx = cfg, layer_idx
        C, D = cfg.d_model, cfg.head_dim
        self.q_proj = nn.Linear(C, cfg.n_heads * D, bias=cfg.bias)
        self.k_proj = nn.Linear(C, cfg.n_kv_heads * D, bias=cfg.bias)   # fewer heads under GQA/MQA
        self.v_proj = nn.Linear(C, cfg.n_kv_heads * D, bias=cfg.bias)
        self.o_proj = nn.Linear(cfg.n_heads * D, C, bias=cfg.bias)

    def forward(self, x, rope: tuple[torch.Tensor, torch.Tensor] | None, cache: KVCache | None):
        B, T, _ = x.shape
        H, G, D = self.cfg.n_heads, self.cfg.n_kv_heads, self.cfg.head_dim
        q = self.q_proj(x).view(B, T, H, D).transpose(1, 2)       # (B, H, T, D)
        k = self.k_proj(x).view(B, T, G, D).transpose(1, 2)       # (B, G, T, D)
        v = self.v_proj(x).view(B, T, G, D).transpose(1, 2)       # (B, G, T, D)
        if rope is not None:                                      # RoPE rotates q and k, never v
            q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        if cache is not None:
            k, v = cache.update(self.layer_idx, k, v)             # (B, G, S, D)
        out = causal_attention(q, k, v, self.cfg.n_rep)           # (B, H, T, D)
        return self.o_proj(out.transpose(1, 2).reshape(B, T, H * D))


class MLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) ⊙ up(x)); ReLU/GELU: down(act(up(x)))."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.gated = cfg.ffn_type == "swiglu"
        if self.gated:
            self.gate_proj = nn.Linear(cfg.d_model, cfg.ffn_hidden, bias=cfg.bias)
        self.up_proj = nn.Linear(cfg.d_model, cfg.ffn_hidden, bias=cfg.bias)
        self.down_proj = nn.Linear(cfg.ffn_hidden, cfg.d_model, bias=cfg.bias)
        self.act = {"swiglu": F.silu, "relu": F.relu, "gelu": F.gelu}[cfg.ffn_type]

    def forward(self, x):
        if self.gated:
            return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))
        return self.down_proj(self.act(self.up_proj(x)))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig, layer_idx: int):
        super().__init__()
        self.pre_norm = cfg.norm_position == "pre"
        self.self_attn = Attention(cfg, layer_idx)
        self.mlp = MLP(cfg)
        self.input_layernorm = make_norm(cfg)            # the attention sublayer's norm
        self.post_attention_layernorm = make_norm(cfg)   # the FFN sublayer's norm

    def forward(self, x, rope=None, cache=None):
        if self.pre_norm:   # identity residual path: dx_{l+1}/dx_l = I + F'(LN(x_l))
            x = x + self.self_attn(self.input_layernorm(x), rope, cache)
            x = x + self.mlp(self.post_attention_layernorm(x))
        else:               # Post-LN: the norm sits on the residual path
            x = self.input_layernorm(x + self.self_attn(x, rope, cache))
            x = self.post_attention_layernorm(x + self.mlp(x))
        return x


class DecoderBody(nn.Module):
    """transformers' ``LlamaModel``: embeddings, blocks, final norm."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.d_model)
        if cfg.pos_encoding == "learned":
            self.embed_positions = nn.Embedding(cfg.max_seq_len, cfg.d_model)
        self.layers = nn.ModuleList(DecoderLayer(cfg, i) for i in range(cfg.n_layers))
        if cfg.final_norm:
            self.norm = make_norm(cfg)

    @property
    def rope_inv_freq(self) -> torch.Tensor:
        """RoPE frequencies, always float32 (a buffer would be rounded by ``model.to(bf16)``)."""
        return rope_inv_freq(self.cfg.head_dim, self.cfg.rope_theta).to(self.embed_tokens.weight.device)

    def forward(self, input_ids, cache: KVCache | None = None, final_norm: bool = True):
        B, T = input_ids.shape
        start = cache.length if cache is not None else 0
        if start + T > self.cfg.max_seq_len:
            raise ValueError(f"sequence of {start + T} tokens exceeds max_seq_len={self.cfg.max_seq_len}")
        positions = torch.arange(start, start + T, device=input_ids.device)
        x = self.embed_tokens(input_ids)                                   # (B, T, C)
        rope = None
        if self.cfg.pos_encoding == "rope":
            rope = rope_cos_sin(positions, self.rope_inv_freq)
        elif self.cfg.pos_encoding == "learned":
            x = x + self.embed_positions(positions)
        elif self.cfg.pos_encoding == "sinusoidal":
            x = x + sinusoidal_table(start + T, self.cfg.d_model).to(x)[start:]
        for layer in self.layers:
            x = layer(x, rope, cache)
        if cache is not None:
            cache.length += T
        return self.norm(x) if self.cfg.final_norm and final_norm else x


class CausalLM(nn.Module):
    """forward(input_ids (B, T)) -> logits (B, T, vocab); state-dict keys as LlamaForCausalLM."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.model = DecoderBody(cfg)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, input_ids: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        return self.lm_head(self.model(input_ids, cache))

    def logits_without_final_norm(self, input_ids: torch.Tensor) -> torch.Tensor:
        """What the seed's "forgot the final norm" bug computes: lm_head on the raw last block."""
        return self.lm_head(self.model(input_ids, final_norm=False))

    def new_cache(self, batch_size: int, max_len: int | None = None) -> KVCache:
        p = self.lm_head.weight
        return KVCache(self.cfg, batch_size, max_len, device=p.device, dtype=p.dtype)

    @torch.no_grad()
    def generate(self, input_ids: torch.Tensor, max_new_tokens: int,
                 cache: KVCache | None = None) -> torch.Tensor:
        """Greedy decoding with the KV cache: one prefill, then one token at a time."""
        B, T = input_ids.shape
        cache = cache or self.new_cache(B, T + max_new_tokens)
        tokens = [input_ids]
        logits = self(input_ids, cache)                                     # prefill
        for step in range(max_new_tokens):
            tokens.append(logits[:, -1:].argmax(-1))                        # (B, 1)
            if step + 1 < max_new_tokens:
                logits = self(tokens[-1], cache)                            # one token
        return torch.cat(tokens, dim=1)


def init_weights(model: CausalLM, cfg: ModelConfig, generator: torch.Generator | None = None) -> None:
    """normal: every matrix N(0, 0.02) (GPT-2/LLaMA); xavier: Glorot-uniform (2017).
    Biases 0, norm gains 1."""
    for module in model.modules():
        if isinstance(module, (nn.Linear, nn.Embedding)):
            if module.weight.is_meta:
                continue
            if cfg.init == "normal":
                nn.init.normal_(module.weight, mean=0.0, std=0.02, generator=generator)
            else:
                nn.init.xavier_uniform_(module.weight, generator=generator)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, (RMSNorm, nn.LayerNorm)) and not module.weight.is_meta:
            nn.init.ones_(module.weight)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)


def build_model(cfg: ModelConfig, device=None, dtype=None, seed: int | None = 0) -> CausalLM:
    """Build and initialise the model. ``device="meta"`` allocates nothing (any size);
    ``seed`` makes the weights reproducible (None: torch's global RNG)."""
    if not isinstance(cfg, ModelConfig):
        raise TypeError(f"build_model needs a ModelConfig, got {type(cfg).__name__}")
    device = torch.device(device) if device is not None else torch.device("cpu")
    with torch.device(device):
        model = CausalLM(cfg)
    if device.type != "meta":
        generator = None
        if seed is not None:
            generator = torch.Generator(device=device).manual_seed(seed)
        init_weights(model, cfg, generator)
    if dtype is not None:
        model = model.to(dtype=dtype)
    return model


# ---- checkpoints --------------------------------------------------------------------------------
@dataclass
class LoadedCheckpoint:
    model: CausalLM
    config: ModelConfig
    notes: list[str]
    files: list[str]


def checkpoint_files(folder: Path) -> list[Path]:
    """The safetensors files of a HF folder: sharded (index json) or single. Never pickles."""
    index = folder / "model.safetensors.index.json"
    if index.exists():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError):
            raise ConfigError(f"{index} is not a valid safetensors index (needs a 'weight_map')") from None
        names = sorted(set(weight_map.values()))
        for name in names:
            if Path(name).name != name or not name.endswith(".safetensors"):
                raise ConfigError(f"{index} names shard {name!r}: shards must be .safetensors "
                                  f"files in the same folder")
        return [folder / name for name in names]
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        pickles = [p.name for p in folder.glob("*.bin")] + [p.name for p in folder.glob("*.pt")]
        hint = f" (found {', '.join(pickles)}: pickle checkpoints are never loaded)" if pickles else ""
        raise ConfigError(f"{folder} holds no .safetensors weights{hint}")
    return files


def load_checkpoint(folder: str | Path, device=None, dtype=None) -> LoadedCheckpoint:
    """Load a local HF-format folder (config.json + *.safetensors, sharded or not)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"checkpoint folder {str(folder)!r} does not exist")
    config_path = folder / "config.json"
    if not config_path.exists():
        raise ConfigError(f"{folder} has no config.json")
    from .config import load_config_file
    cfg, notes = load_config_file(config_path)
    files = checkpoint_files(folder)
    for path in files:
        if not path.exists():
            raise ConfigError(f"shard {path.name} named by the index is missing")
    # Refuse before reading a byte of weights if they cannot fit (ExperimentError is a ValueError).
    from .experiments import check_memory
    weight_bytes = sum(path.stat().st_size for path in files)
    if dtype is not None:   # the cast holds both copies of one tensor at a time, at most
        weight_bytes = int(weight_bytes * max(1.0, torch.finfo(dtype).bits / 16))
    check_memory(weight_bytes, torch.device(device or "cpu"), f"loading {folder.name}")
    model = build_model(cfg, device="meta")
    state: dict[str, torch.Tensor] = {}
    for path in files:
        try:
            state.update(load_file(str(path), device=str(device or "cpu")))
        except (SafetensorError, OSError, ValueError) as exc:
            raise ConfigError(f"{path.name} is not a readable safetensors file: {exc}") from None
    if cfg.tie_embeddings:
        state.pop("lm_head.weight", None)
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state) - ({"lm_head.weight"} if cfg.tie_embeddings else set()))
    unexpected = sorted(k for k in set(state) - set(expected) if not k.endswith("rotary_emb.inv_freq"))
    if missing:
        raise ConfigError(f"checkpoint lacks {len(missing)} tensor(s), e.g. {missing[:3]}")
    if unexpected:
        notes.append(f"{len(unexpected)} unexpected tensor(s) ignored, e.g. {unexpected[:3]}")
    for key, tensor in expected.items():
        if key in state and tuple(state[key].shape) != tuple(tensor.shape):
            raise ConfigError(f"tensor {key} has shape {tuple(state[key].shape)}, the config "
                              f"implies {tuple(tensor.shape)}")
    state = {k: v for k, v in state.items() if k in expected}
    model.load_state_dict(state, strict=False, assign=True)
    if cfg.tie_embeddings:
        model.lm_head.weight = model.model.embed_tokens.weight
    if dtype is not None:
        model = model.to(dtype=dtype)
    return LoadedCheckpoint(model, cfg, notes, [p.name for p in files])
