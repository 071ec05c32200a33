"""Gated DeltaNet (Yang, Kautz and Hatamizadeh 2024), the linear attention of Qwen3-Next and
Qwen3.5, with the module names of transformers' ``Qwen3NextGatedDeltaNet`` /
``Qwen3_5GatedDeltaNet``. Shapes: B batch, T new tokens, C = d_model, Hk q/k heads of dk,
Hv value heads of dv (Hv a multiple of Hk: each q/k head serves Hv/Hk value heads), K taps.

Per value head a state S (dk × dv) replaces the KV cache. With q and k L2-normalised, q scaled
by 1/√dk, a decay α_t = exp(g_t) ∈ (0, 1] and a write strength β_t ∈ (0, 1):

    S_t = α_t S_{t−1} + k_t ⊗ β_t (v_t − (α_t S_{t−1})ᵀ k_t)     (the gated delta rule)
    o_t = S_tᵀ q_t

g_t = −exp(A_log) · softplus(a_t + dt_bias) and β_t = σ(b_t), a and b one number per value
head from the token. q, k and v first pass a causal depthwise convolution of K taps and SiLU;
the output is normalised per head (RMSNorm, γ), gated by SiLU(z), and projected back to C.

``chunk_delta_rule`` computes the same S_t and o_t for a whole sequence in chunks of 64 (the
algorithm of transformers' ``torch_chunk_gated_delta_rule`` and the FLA kernels: within a chunk
the rule's rank-1 updates are solved as one triangular system, between chunks S is carried);
``recurrent_delta_rule`` steps it one token at a time (decoding). The cache keeps, per layer,
the last K inputs of the convolution and S (float32, as transformers' cache holds them).
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..config import ModelConfig
from .fused import FusedLinear, keep_part_keys
from .kv_cache import KVCache

CHUNK = 64  # tokens per chunk of the chunked form (FLA's and transformers' default)


def l2_normalize(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """x / sqrt(Σx² + eps) over the last dimension (FLA's l2norm)."""
    return x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + eps)


def _prepare(q, k, v, g, beta):
    """(B, T, heads, d) inputs as float32 (float64 stays float64) (B, Hv, T, d): q and k
    repeated to the value heads, L2-normalised, q scaled by 1/√dk; g and beta (B, Hv, T)."""
    rep = v.shape[2] // k.shape[2]
    if rep > 1:
        q, k = q.repeat_interleave(rep, dim=2), k.repeat_interleave(rep, dim=2)
    wide = torch.promote_types(v.dtype, torch.float32)
    # each its own contiguous (B, Hv, T, d) tensor, as transformers' rule takes them
    q, k, v = (x.transpose(1, 2).to(wide).contiguous() for x in (q, k, v))
    q, k = l2_normalize(q), l2_normalize(k)
    return q * q.shape[-1] ** -0.5, k, v, g.transpose(1, 2).to(wide), beta.transpose(1, 2).to(wide)


def recurrent_delta_rule(q, k, v, g, beta, state):
    """The rule one token at a time. q, k (B, T, Hk, dk), v (B, T, Hv, dv), g and beta
    (B, T, Hv), state (B, Hv, dk, dv) float32: (output (B, T, Hv, dv) in v's dtype, new state)."""
    dtype = v.dtype
    q, k, v, g, beta = _prepare(q, k, v, g, beta)
    state = state.to(v.dtype)
    outputs = []
    for t in range(q.shape[2]):
        state = state * g[:, :, t, None, None].exp()  # α_t S
        k_t = k[:, :, t, None]  # (B, Hv, 1, dk)
        recalled = k_t @ state  # (B, Hv, 1, dv): what S returns for k_t
        delta = (v[:, :, t, None] - recalled) * beta[:, :, t, None, None]
        state = state + k_t.transpose(-2, -1) @ delta  # k_t ⊗ β(v_t − Sᵀk_t)
        outputs.append(q[:, :, t, None] @ state)  # (B, Hv, 1, dv)
    return torch.cat(outputs, dim=2).transpose(1, 2).to(dtype), state


def chunk_delta_rule(q, k, v, g, beta, state, chunk: int = CHUNK):
    """The rule over T tokens in chunks of ``chunk`` (T padded to a multiple with zeros, which
    leave S unchanged: k = 0 writes nothing, g = 0 decays nothing). Same arguments and result
    as ``recurrent_delta_rule``.

    Within a chunk, with Γ_i = Σ_{j≤i} g_j (log decay from the chunk's start) and the chunk's
    initial state S₀, the rule's writes u_i = β_i (v_i − (decayed S before i)ᵀ k_i) satisfy the
    unit lower-triangular system (I + A) u = β ⊙ (v − e^Γ ⊙ K S₀), A_ij = β_i e^{Γ_i−Γ_j} k_i·k_j
    (j < i); the outputs are e^Γ ⊙ Q S₀ + (Q Kᵀ ⊙ e^{Γ_i−Γ_j}, j ≤ i) u and the state carried to
    the next chunk e^{Γ_c} S₀ + Σ_j e^{Γ_c−Γ_j} k_j ⊗ u_j."""
    dtype, T = v.dtype, q.shape[1]
    q, k, v, g, beta = _prepare(q, k, v, g, beta)
    state = state.to(v.dtype)
    pad = -T % chunk
    q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
    g, beta = (F.pad(x, (0, pad)) for x in (g, beta))
    B, Hv, Tp, dk = k.shape
    n = Tp // chunk
    q, k, v = (x.view(B, Hv, n, chunk, -1) for x in (q, k, v))
    g, beta = g.view(B, Hv, n, chunk), beta.view(B, Hv, n, chunk)
    gamma = g.cumsum(-1)  # (B, Hv, n, c)
    causal = torch.ones(chunk, chunk, dtype=torch.bool, device=q.device).tril()
    # e^{Γ_i − Γ_j} for j ≤ i, 0 above the diagonal
    decay = (gamma[..., :, None] - gamma[..., None, :]).masked_fill(~causal, float("-inf")).exp()
    k_beta = k * beta[..., None]
    system = (k_beta @ k.transpose(-2, -1) * decay).tril(-1)  # A: strictly lower
    eye = torch.eye(chunk, dtype=q.dtype, device=q.device)
    e_gamma = gamma.exp()  # e^Γ: the decay from the chunk's start
    # (I + A)⁻¹ applied to β ⊙ v and to β ⊙ e^Γ ⊙ k: the writes' two parts (solved once per chunk)
    rhs = torch.cat((v * beta[..., None], k_beta * e_gamma[..., None]), dim=-1)
    solved = torch.linalg.solve_triangular(system + eye, rhs, upper=False, unitriangular=True)
    writes, k_decayed = solved.split([v.shape[-1], dk], dim=-1)
    scores = q @ k.transpose(-2, -1) * decay  # (B, Hv, n, c, c), j ≤ i
    q_decayed = q * e_gamma[..., None]
    k_to_end = k * (gamma[..., -1:] - gamma).exp()[..., None]  # e^{Γ_c − Γ_j} k_j
    outputs = []
    for i in range(n):
        u = writes[:, :, i] - k_decayed[:, :, i] @ state  # (B, Hv, c, dv)
        outputs.append(q_decayed[:, :, i] @ state + scores[:, :, i] @ u)
        state = state * e_gamma[:, :, i, -1, None, None] + k_to_end[:, :, i].transpose(-2, -1) @ u
    out = torch.cat(outputs, dim=2)[:, :, :T]  # (B, Hv, T, dv)
    return out.transpose(1, 2).to(dtype).contiguous(), state


class GatedRMSNorm(nn.Module):
    """RMSNorm over a value head (γ, from 1), then × SiLU(z) in float32 (``Qwen3NextRMSNormGated``)."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        wide = torch.promote_types(x.dtype, torch.float32)  # float32 (float64 stays)
        xf = x.to(wide)
        x_hat = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)
        # z copied in float32 whatever its dtype (autograd then keeps that copy, never the whole
        # in_proj output z is a view of)
        return (self.weight * x_hat * F.silu(z.to(wide, copy=True))).to(x.dtype)


def projection_parts(cfg: ModelConfig) -> tuple[tuple[str, int], ...]:
    """The input projections of a linear layer as (name, rows): Qwen3.5's in_proj_qkv (q, k, v),
    in_proj_z (the output gate), in_proj_b (β), in_proj_a (the decay); Qwen3-Next's the same
    rows as in_proj_qkvz and in_proj_ba (grouped per q/k head)."""
    key, value, Hv = cfg.linear_key_dim, cfg.linear_value_dim, cfg.linear_v_heads
    if cfg.linear_grouped_proj:
        return (("in_proj_qkvz", 2 * key + 2 * value), ("in_proj_ba", 2 * Hv))
    return (("in_proj_qkv", 2 * key + value), ("in_proj_z", value), ("in_proj_b", Hv), ("in_proj_a", Hv))


class GatedDeltaNet(nn.Module):
    def __init__(self, cfg: ModelConfig, layer_idx: int):
        super().__init__()
        self.cfg, self.layer_idx = cfg, layer_idx
        self.Hk, self.Hv = cfg.linear_k_heads, cfg.linear_v_heads
        self.dk, self.dv = cfg.linear_k_head_dim, cfg.linear_v_head_dim
        self.conv_dim = cfg.linear_conv_dim  # q, k and v are convolved
        self.in_proj = FusedLinear(cfg.d_model, projection_parts(cfg), bias=False)  # one GEMM
        keep_part_keys(self, "in_proj")
        K = cfg.linear_conv_kernel
        # the weight as transformers' Conv1d keeps it, (conv_dim, 1, K); run causally by _convolve
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, K, groups=self.conv_dim, bias=False)
        self.dt_bias = nn.Parameter(torch.ones(self.Hv))
        self.A_log = nn.Parameter(torch.zeros(self.Hv))
        self.norm = GatedRMSNorm(self.dv, cfg.norm_eps)
        self.out_proj = nn.Linear(self.Hv * self.dv, cfg.d_model, bias=False)

    def _split(self, x: torch.Tensor):
        """The projections of x (B, T, C): q|k|v (B, T, conv_dim) in the convolution's channel
        order, z (B, T, Hv, dv), b and a (B, T, Hv)."""
        B, T, _ = x.shape
        Hk, Hv, dk, dv = self.Hk, self.Hv, self.dk, self.dv
        if not self.cfg.linear_grouped_proj:
            qkv, z, b, a = self.in_proj.split(self.in_proj(x))
            return qkv, z.reshape(B, T, Hv, dv), b, a
        # Qwen3-Next: per q/k head [q, k, its value heads' v, their z] and [their b, their a]
        qkvz, ba = self.in_proj.split(self.in_proj(x))
        r = Hv // Hk
        q, k, v, z = qkvz.view(B, T, Hk, -1).split([dk, dk, r * dv, r * dv], dim=-1)
        b, a = ba.view(B, T, Hk, 2 * r).split([r, r], dim=-1)
        qkv = torch.cat((q.reshape(B, T, -1), k.reshape(B, T, -1), v.reshape(B, T, -1)), dim=-1)
        return qkv, z.reshape(B, T, Hv, dv), b.reshape(B, T, Hv), a.reshape(B, T, Hv)

    def _convolve(self, qkv: torch.Tensor, cache: KVCache | None) -> torch.Tensor:
        """The causal depthwise convolution and SiLU over (B, T, conv_dim): each output reads
        its own input and the K − 1 before it (zeros before the first token; after a prefill,
        the inputs the cache kept), T outputs."""
        K = self.cfg.linear_conv_kernel
        x = qkv.transpose(1, 2)  # (B, conv_dim, T)
        if cache is None:
            earlier = x.new_zeros(x.shape[0], self.conv_dim, K - 1)
        else:
            kept = cache.conv_state(self.layer_idx)  # (B, conv_dim, K): the last K inputs
            earlier = kept[..., 1:].to(x.dtype)
        x = torch.cat((earlier, x), dim=-1)  # (B, conv_dim, K − 1 + T)
        if cache is not None:
            kept.copy_(x[..., -K:])
        return F.silu(F.conv1d(x, self.conv1d.weight, groups=self.conv_dim)).transpose(1, 2)

    def forward(self, x, rope=None, cache: KVCache | None = None):
        B, T, _ = x.shape
        qkv, z, b, a = self._split(x)
        qkv = self._convolve(qkv, cache)
        key = self.Hk * self.dk
        q, k, v = qkv.split([key, key, self.Hv * self.dv], dim=-1)
        q, k = q.reshape(B, T, self.Hk, self.dk), k.reshape(B, T, self.Hk, self.dk)
        v = v.reshape(B, T, self.Hv, self.dv)
        beta = b.sigmoid()
        wide = torch.promote_types(x.dtype, torch.float32)
        g = -self.A_log.to(wide).exp() * F.softplus(a.to(wide) + self.dt_bias)  # (B, T, Hv), ≤ 0
        if cache is None:
            state = q.new_zeros(B, self.Hv, self.dk, self.dv, dtype=wide)
        else:
            state = cache.recurrent_state(self.layer_idx)
        if cache is not None and T == 1 and cache.length > 0:  # a decode step
            out, new_state = recurrent_delta_rule(q, k, v, g, beta, state)
        else:
            out, new_state = chunk_delta_rule(q, k, v, g, beta, state)
        if cache is not None:
            state.copy_(new_state)
        out = self.norm(out, z)  # (B, T, Hv, dv)
        return self.out_proj(out.reshape(B, T, self.Hv * self.dv))
