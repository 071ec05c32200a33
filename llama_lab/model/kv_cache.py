"""A preallocated KV cache of every layer (gpt-fast style). A sliding-window layer keeps at
most its window: its buffer of W slots is a ring (position p in slot p mod W), so memory stays
W per layer however long the sequence grows. A one-token decode step allocates nothing in the
cache: the new K and V are copied into their slot and the attention reads views of the
buffers (a full window's slots out of order: RoPE has already rotated each key by its own
position and a window of W keys is exactly what the new token may see, so the order does not
matter). Only a chunk of several tokens after a window has filled needs the held keys in
order (one concatenation). A chunked layer (Llama 4) keeps the tokens of the current chunk of
W positions, position p in slot p mod W: in order, slots 0.. of the chunk; a chunk boundary
starts over from slot 0. A windowed layer with a sparse pattern (``config.sparse``) keeps what
its later queries can see: the first G positions in slots 0..G-1 and a ring of the dilated
window's span after them (position p ≥ G in slot G + (p − G) mod span), or every token when
BigBird's random blocks may reach any earlier block; it returns the held keys with their
positions (``key_positions``), for the mask. A Gated DeltaNet layer (Qwen3-Next, Qwen3.5) keeps no per-token
cache: its convolution's last K inputs (B, conv_dim, K) and its state (B, Hv, dk, dv) in
float32, as transformers' cache holds them, whatever the sequence's length. A DSA layer
(DeepSeek-V3.2) also keeps its indexer's key of every token, (B, S, index_head_dim), as
transformers' ``DynamicIndexedLayer`` does.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from ..config import ModelConfig


class KVCache(nn.Module):
    """Keys and values of every layer: (B, G, S_l, D) each, S_l = max_len, or min(W, max_len)
    for a layer with a sliding window W (under a sparse pattern: ``ModelConfig.local_cache_tokens``).
    MLA keeps its latent (B, 1, S, kv_lora_rank) and its RoPE key (B, 1, S, qk_rope_head_dim) in
    the two slots instead."""

    def __init__(
        self, cfg: ModelConfig, batch_size: int, max_len: int | None = None, device=None, dtype=None
    ):
        super().__init__()
        self.max_len = max_len or cfg.max_seq_len
        self.windows = [cfg.window_of(i) for i in range(cfg.n_layers)]
        # the tokens each layer keeps at most (None: all of them)
        self.kept = [cfg.local_cache_tokens if w else None for w in self.windows]
        self.sparse = cfg.sparse_pattern
        self.chunked = cfg.chunked_attention
        self.linear = cfg.linear_layer_flags
        for i in range(cfg.n_layers):
            if self.linear[i]:
                self._add_state(cfg, i, batch_size, device, dtype)
                continue
            kept = self.kept[i]
            slots = min(kept, self.max_len) if kept else self.max_len
            widths = (
                (1, cfg.kv_lora_rank, cfg.qk_rope_head_dim)
                if cfg.is_mla
                else (cfg.n_kv_heads, cfg.head_dim, cfg.head_dim)
            )
            heads, *width = widths
            for name, w in zip(("k", "v"), width):
                self.register_buffer(
                    f"{name}{i}",
                    torch.zeros((batch_size, heads, slots, w), device=device, dtype=dtype),
                    persistent=False,
                )
            if cfg.has_indexer:
                self.register_buffer(
                    f"index{i}",
                    torch.zeros((batch_size, self.max_len, cfg.index_head_dim), device=device, dtype=dtype),
                    persistent=False,
                )
        self.length = 0  # tokens seen so far (cached or evicted from a window)

    def _add_state(self, cfg: ModelConfig, i: int, batch_size: int, device, dtype) -> None:
        """A linear layer's two states: the convolution's inputs and the delta rule's S."""
        state = (batch_size, cfg.linear_v_heads, cfg.linear_k_head_dim, cfg.linear_v_head_dim)
        shapes = {
            f"conv{i}": ((batch_size, cfg.linear_conv_dim, cfg.linear_conv_kernel), dtype),
            f"state{i}": (state, torch.float32),
        }
        for name, (shape, kind) in shapes.items():
            self.register_buffer(name, torch.zeros(shape, device=device, dtype=kind), persistent=False)

    def conv_state(self, layer: int) -> torch.Tensor:
        """Linear layer ``layer``'s last K convolution inputs (B, conv_dim, K), updated in place."""
        return getattr(self, f"conv{layer}")

    def recurrent_state(self, layer: int) -> torch.Tensor:
        """Linear layer ``layer``'s delta-rule state S (B, Hv, dk, dv), float32, updated in place."""
        return getattr(self, f"state{layer}")

    def _buffers_of(self, layer: int) -> tuple[torch.Tensor, ...]:
        """The per-token buffers of ``layer``: K and V (MLA: the latent and the RoPE key), and
        DSA's indexer keys."""
        kv = getattr(self, f"k{layer}"), getattr(self, f"v{layer}")
        return kv + ((getattr(self, f"index{layer}"),) if hasattr(self, f"index{layer}") else ())

    def update_index_keys(self, layer: int, keys: torch.Tensor) -> torch.Tensor:
        """Store DSA's indexer keys (B, T, Di) of positions [length, length+T); return all so far."""
        buffer = getattr(self, f"index{layer}")
        buffer[:, self.length : self.length + keys.shape[1]] = keys
        return buffer[:, : self.length + keys.shape[1]]

    def held(self, layer: int) -> int:
        """Tokens layer ``layer`` holds now."""
        kept = self.kept[layer]
        return min(self.length, kept) if kept else self.length

    def chunk_start(self, layer: int) -> int:
        """A chunked layer's first position of the chunk the next token falls in."""
        window = self.windows[layer]
        assert window is not None and self.chunked
        return self.length // window * window

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store k, v (B, G, T, D) of positions [length, length+T); return the keys/values the
        new queries may attend: all so far, or for a window layer the held ones and the new
        ones (the attention masks what lies outside each query's window), or for a chunked layer
        those of the current chunk and the new ones, from position ``chunk_start``."""
        keys, values = self._buffers_of(layer)[:2]
        held, T = self.held(layer), k.shape[2]
        if self.windows[layer] is not None and self.chunked:
            return self._update_chunked(layer, k, v)
        if self.kept[layer] is None:  # every token (random blocks reach any earlier block)
            keys[:, :, held : held + T] = k
            values[:, :, held : held + T] = v
            return keys[:, :, : held + T], values[:, :, : held + T]
        if self.windows[layer] is not None and self.sparse is not None:
            return self._update_sparse(layer, k, v)
        slots = keys.shape[2]
        in_order = None
        if T > 1 and self.length + T > slots:  # a chunk once the window has filled: the
            oldest = self.length % slots if held == slots else 0  # held keys in order first
            index = torch.tensor([*range(oldest, held), *range(oldest)], dtype=torch.long, device=k.device)
            in_order = (
                torch.cat((keys.index_select(2, index), k), dim=2),  # (B, G, held+T, D)
                torch.cat((values.index_select(2, index), v), dim=2),
            )
        for buffer, new in ((keys, k), (values, v)):
            self._write_ring(buffer, new)
        if in_order is not None:
            return in_order
        n = min(self.length + T, slots)  # otherwise the ring's slots themselves
        return keys[:, :, :n], values[:, :, :n]

    def _update_chunked(
        self, layer: int, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``update`` of a chunked layer: the current chunk's keys lie in order in slots 0.. ."""
        keys, values = self._buffers_of(layer)[:2]
        window, T = self.windows[layer], k.shape[2]
        assert window is not None
        start = self.chunk_start(layer)
        held, end = self.length - start, self.length + T
        last = (end - 1) // window * window  # where the last new token's chunk begins
        if last == start:  # the new tokens stay in the current chunk: views of the buffers
            keys[:, :, held : held + T] = k
            values[:, :, held : held + T] = v
            return keys[:, :, : held + T], values[:, :, : held + T]
        attended = torch.cat((keys[:, :, :held], k), dim=2), torch.cat((values[:, :, :held], v), dim=2)
        tail = end - last  # the new tokens of the last chunk, kept from slot 0
        keys[:, :, :tail] = k[:, :, T - tail :]
        values[:, :, :tail] = v[:, :, T - tail :]
        return attended

    def _update_sparse(
        self, layer: int, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``update`` of a sparse-pattern layer: the held keys (in slot order, positions
        ``key_positions``) and the new ones; the new tokens are then written to their slots,
        the global ones kept and the others on the ring of the window's span."""
        keys, values = self._buffers_of(layer)
        held, T = self.held(layer), k.shape[2]
        assert self.sparse is not None
        attended = torch.cat((keys[:, :, :held], k), dim=2), torch.cat((values[:, :, :held], v), dim=2)
        new = torch.arange(self.length, self.length + T, device=k.device)
        G, span, end = self.sparse.global_tokens, self.sparse.span, self.length + T
        keep = (new < G) | (new >= end - span)  # older new tokens fall out of the ring at once
        slots = torch.where(new < G, new, G + (new - G) % span)[keep]
        index = keep.nonzero()[:, 0]
        keys.index_copy_(2, slots, k.index_select(2, index))
        values.index_copy_(2, slots, v.index_select(2, index))
        return attended

    def key_positions(self, layer: int, T: int) -> torch.Tensor | None:
        """The positions of the keys ``update`` returned to T new tokens (None: 0, 1, … in
        order): a sparse-pattern layer's held slots, then the new tokens."""
        if self.kept[layer] is None or self.sparse is None:
            return None
        G, span, L = self.sparse.global_tokens, self.sparse.span, self.length
        device = self._buffers_of(layer)[0].device
        slot = torch.arange(self.held(layer), device=device)
        ring = slot - G  # slot G + r holds the latest position G + r + span·n before L
        held = torch.where(
            slot < G, slot, G + ring + span * torch.div(L - 1 - G - ring, span, rounding_mode="floor")
        )
        return torch.cat((held, torch.arange(L, L + T, device=device)))

    def _write_ring(self, buffer: torch.Tensor, new: torch.Tensor) -> None:
        """Copy the new tokens (the last ``slots`` of them) into slots position mod ``slots``."""
        slots, T = buffer.shape[2], new.shape[2]
        first = self.length + max(0, T - slots)  # positions older than that fall out
        new = new[:, :, T - min(T, slots) :]
        start = first % slots
        head = min(new.shape[2], slots - start)
        buffer[:, :, start : start + head] = new[:, :, :head]
        if head < new.shape[2]:  # wrapped past the last slot
            buffer[:, :, : new.shape[2] - head] = new[:, :, head:]

    def truncate(self, length: int) -> None:
        """Forget the tokens from position ``length`` on (a rejected speculation): the slots
        past it are overwritten by the next update. A window layer that has already shifted
        tokens out cannot go back (ValueError)."""
        if not 0 <= length <= self.length:
            raise ValueError(f"length={length} must be between 0 and the {self.length} tokens seen")
        if any(self.linear) and length < self.length:
            raise ValueError(
                f"a Gated DeltaNet layer folds every token into its state: the cache cannot go "
                f"back to {length}"
            )
        for window, kept in zip(self.windows, self.kept):
            if window and self.chunked:  # only back within the chunk of the last token
                if length < self.length and length < (self.length - 1) // window * window:
                    raise ValueError(
                        f"a chunked layer (chunks of {window}) has started a new chunk: the cache "
                        f"cannot go back to {length}"
                    )
            elif kept and self.length > kept and length < self.length:
                keeping = "" if kept == window else f", keeping {kept} tokens"
                raise ValueError(
                    f"a sliding-window layer (window {window}{keeping}) has shifted out "
                    f"tokens: the cache cannot go back to {length}"
                )
        self.length = length

    def allocated_bytes(self) -> int:
        """Bytes of storage the K and V tensors really hold (every slot)."""
        return sum(b.untyped_storage().nbytes() for b in self.buffers())

    def nbytes(self) -> int:
        """Bytes of the cache tensors holding the tokens cached so far."""
        total = 0
        for layer in range(len(self.windows)):
            if self.linear[layer]:  # a fixed state once the first token is in
                states = (self.conv_state(layer), self.recurrent_state(layer))
                total += sum(b.numel() * b.element_size() for b in states) if self.length else 0
                continue
            per_token = sum(b.select(-2, 0).numel() * b.element_size() for b in self._buffers_of(layer))
            total += per_token * self.held(layer)
        return total
