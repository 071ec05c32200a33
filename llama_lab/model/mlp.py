"""The feed-forward block: SwiGLU (LLaMA) or a ReLU/GELU MLP (2017), and the mixture of
experts of Mixtral, Qwen3-MoE and DeepSeek (a router picks the top-k SwiGLU experts of each
token; DeepSeekMoE adds shared experts every token passes, expert groups, sigmoid scores with a
correction bias that steers the choice, and a scale on the routed experts' weights), and
gpt-oss's (a router with a bias, experts with biases and a clamped SwiGLU), and Llama 4's (σ
of the chosen router logits scales each expert's input, beside one shared expert).
Expert weights are stored fused, as transformers ≥ 5 stores them: ``experts.gate_up_proj``
(E, 2F, C) and ``experts.down_proj`` (E, C, F); gpt-oss's transposed, gate and up interleaved;
Llama 4's transposed, gate and up in halves."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..config import ModelConfig
from .fused import FusedLinear, keep_part_keys
from .kernels import gated, swiglu


def ungated_activation(ffn_type: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """An ungated FFN's activation: relu, gelu (the exact erf GELU, transformers' "gelu") or
    silu (x·σ(x), ungated: Marian's "swish")."""
    activations: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"gelu": F.gelu, "silu": F.silu}
    return activations.get(ffn_type, F.relu)


class MLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) ⊙ up(x)), gate and up in one GEMM (checkpoints keep
    gate_proj and up_proj; ``kernels.gated`` keeps only their output for backward); GeGLU
    (Gemma) the same with tanh-approximated GELU for silu; ReLU/GELU: down(act(up(x)))."""

    def __init__(self, cfg: ModelConfig, hidden: int | None = None):
        super().__init__()
        self.gated = cfg.gated_ffn
        C, F_ = cfg.d_model, hidden or cfg.ffn_hidden  # hidden: DeepSeek's shared experts' width
        if self.gated:
            self.gate_up_proj = FusedLinear(C, (("gate_proj", F_), ("up_proj", F_)), bias=cfg.mlp_bias)
            if not cfg.fused_keys:  # Phi-3's checkpoints keep gate_up_proj itself
                keep_part_keys(self, "gate_up_proj")
        else:
            self.up_proj = nn.Linear(C, F_, bias=cfg.mlp_bias)
        self.down_proj = nn.Linear(F_, cfg.d_model, bias=cfg.mlp_bias)
        self.gate_activation = "gelu_tanh" if cfg.ffn_type == "geglu" else "silu"  # gated
        self.act = ungated_activation(cfg.ffn_type)  # (a gated FFN never calls it)

    def forward(self, x):
        if self.gated:
            return self.down_proj(gated(self.gate_up_proj(x), self.gate_activation))  # gate/up: (..., 2F)
        return self.down_proj(self.act(self.up_proj(x)))


class ExpertLoop(nn.Module, ABC):
    """E experts (``expert``: one expert on its tokens), each run on the tokens routed to it.
    The stacked weights are split into per-expert views once per forward (``unbind``: its
    backward writes every expert's gradient into one tensor, where indexing each expert would
    fill a zero tensor of all E experts per expert used)."""

    gate_up_proj: nn.Parameter  # every expert's gate and up, stacked (E, ·, ·)
    down_proj: nn.Parameter
    scales_input = False  # the routing weight scales the expert's output (Llama 4: its input)
    transposed = False  # weights stored (E, out, in); gpt-oss and Llama 4: (E, in, out)

    def __init__(self, n_experts: int):
        super().__init__()
        self.n_experts = n_experts

    def _run(self, weights: tuple[torch.Tensor, ...], x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """One expert on its tokens x (n, C) with their routing weights w (n, 1), weighted."""
        if self.scales_input:
            return self.expert(weights, x * w.to(x.dtype))
        return self.expert(weights, x) * w

    @abstractmethod
    def expert(self, weights: tuple[torch.Tensor, ...], x: torch.Tensor) -> torch.Tensor:
        """One expert, its tensors ``weights`` (``per_expert``'s e-th), on its tokens x (n, C)."""

    def per_expert(self) -> list[tuple[torch.Tensor, ...]]:
        """Each expert's tensors, in the order of the module's parameters."""
        return list(zip(*(p.unbind(0) for p in self.parameters(recurse=False))))

    def forward(self, x: torch.Tensor, experts: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """x (N, C); experts, weights (N, k): each token's chosen experts and their weights."""
        out = torch.zeros_like(x)
        tensors = self.per_expert()
        if x.is_meta:  # shapes only (counting): spread the N·k slots evenly
            return self._meta_forward(x, weights, tensors)
        for e in torch.unique(experts).tolist():  # only the experts some token chose
            token, slot = torch.where(experts == e)
            y = self._run(tensors[e], x[token], weights[token, slot, None])  # (n_e, C)
            out.index_add_(0, token, y.to(out.dtype))
        return out

    def _meta_forward(self, x: torch.Tensor, weights: torch.Tensor, tensors) -> torch.Tensor:
        """On the meta device routing is unknown: the same matmuls as any routing would run
        (N·k token-slots in all) spread evenly over the experts, their outputs weighted and
        summed per token so that a tracer keeps every one of them."""
        N, k = weights.shape
        E, slots = self.n_experts, weights.numel()
        if self.scales_input:  # the weights meet the inputs: (N·k, C) scaled copies
            inputs = (x[:, None] * weights[..., None].to(x.dtype)).reshape(slots, x.shape[1])
            sizes = [slots // E + (e < slots % E) for e in range(E)]
            outputs = [self.expert(tensors[e], part) for e, part in enumerate(inputs.split(sizes))]
            return torch.cat(outputs).view(N, k, -1).sum(dim=1)
        outputs = [
            self.expert(tensors[e], x.new_empty(slots // E + (e < slots % E), x.shape[1])) for e in range(E)
        ]
        return (torch.cat(outputs).view(N, k, -1) * weights[..., None]).sum(dim=1)


class Experts(ExpertLoop):
    """E SwiGLU experts of width F: gate and up fused in one (E, 2F, C) tensor."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg.n_experts)
        E, C, F_ = cfg.n_experts, cfg.d_model, cfg.expert_ffn_hidden
        self.gate_up_proj = nn.Parameter(torch.empty(E, 2 * F_, C))
        self.down_proj = nn.Parameter(torch.empty(E, C, F_))

    def expert(self, weights: tuple[torch.Tensor, ...], x: torch.Tensor) -> torch.Tensor:
        gate_up, down = weights
        return F.linear(swiglu(F.linear(x, gate_up)), down)


class GptOssExperts(ExpertLoop):
    """gpt-oss's E experts as its checkpoints store them: (E, C, 2F) with gate and up
    interleaved (gate the even columns, up the odd), (E, F, C) down, each with a bias; the
    clamped SwiGLU (up.clamp(±limit) + 1) · g·σ(α·g), g = gate.clamp(max=limit)."""

    transposed = True

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg.n_experts)
        E, C, F_ = cfg.n_experts, cfg.d_model, cfg.expert_ffn_hidden
        self.gate_up_proj = nn.Parameter(torch.empty(E, C, 2 * F_))
        self.gate_up_proj_bias = nn.Parameter(torch.empty(E, 2 * F_))
        self.down_proj = nn.Parameter(torch.empty(E, F_, C))
        self.down_proj_bias = nn.Parameter(torch.empty(E, C))
        self.limit, self.alpha = cfg.swiglu_limit, cfg.swiglu_alpha

    def expert(self, weights: tuple[torch.Tensor, ...], x: torch.Tensor) -> torch.Tensor:
        gate_up_proj, gate_up_bias, down_proj, down_bias = weights
        gate_up = x @ gate_up_proj + gate_up_bias  # (n, 2F)
        gate = gate_up[..., ::2].clamp(max=self.limit)
        up = gate_up[..., 1::2].clamp(-self.limit, self.limit)
        hidden = (up + 1) * (gate * torch.sigmoid(gate * self.alpha))
        return hidden @ down_proj + down_bias


class Llama4Experts(ExpertLoop):
    """Llama 4's E SwiGLU experts as its checkpoints store them: (E, C, 2F) with gate and up in
    halves, (E, F, C) down, no biases; each token's routing weight scales its input."""

    scales_input = transposed = True

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg.n_experts)
        E, C, F_ = cfg.n_experts, cfg.d_model, cfg.expert_ffn_hidden
        self.gate_up_proj = nn.Parameter(torch.empty(E, C, 2 * F_))
        self.down_proj = nn.Parameter(torch.empty(E, F_, C))

    def expert(self, weights: tuple[torch.Tensor, ...], x: torch.Tensor) -> torch.Tensor:
        gate_up, down = weights
        return swiglu(x @ gate_up) @ down


class MoE(nn.Module, ABC):
    """A mixture of experts: each token's k experts (``route``), weighted and summed."""

    experts: ExpertLoop

    @abstractmethod
    def route(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(the k weights, the k expert ids), (N, k) each, for tokens x (N, C)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        flat = x.reshape(B * T, C)
        weights, experts = self.route(flat)
        return self.experts(flat, experts, weights).reshape(B, T, C)


class GptOssMoE(MoE):
    """gpt-oss: ``router`` (C → E logits, with a bias), the top-k logits' softmax as the
    weights (the same as softmax, top-k, renormalise), then the experts."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.top_k = cfg.experts_per_token
        self.router = nn.Linear(cfg.d_model, cfg.n_experts, bias=True)
        self.experts = GptOssExperts(cfg)

    def route(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        top, experts = self.router(x).topk(self.top_k, dim=-1)
        return top.softmax(dim=-1), experts


class SparseMoE(MoE):
    """Router (``gate``: C → E scores), top-k, optionally renormalised, then each token's k
    experts weighted by their scores and summed. Scores: softmax in float32 (Mixtral, Qwen3-MoE,
    DeepSeek-V2), or the sigmoid of float32 logits (DeepSeek-V3) whose top-k is chosen on the
    scores plus ``gate.e_score_correction_bias`` while the weights stay the unbiased scores.
    With expert groups a token chooses only among the experts of its best ``moe_topk_groups``
    groups (a group ranked by its best score, or by the sum of its two best under sigmoid and in
    Mistral 4);
    the weights are then × ``routed_scaling``, and the shared experts are added (Qwen3-Next's
    one shared expert scaled per token by σ(``shared_expert_gate``(x)))."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.top_k, self.renormalize = cfg.experts_per_token, cfg.moe_renormalize
        self.gate = nn.Linear(cfg.d_model, cfg.n_experts, bias=False)
        if cfg.moe_scoring == "sigmoid":  # a buffer: it steers the choice, no gradient trains it
            self.gate.register_buffer("e_score_correction_bias", torch.zeros(cfg.n_experts))
        self.experts = Experts(cfg)
        if cfg.shared_expert_gate:  # Qwen2-MoE / Qwen3-Next: one shared expert, gated per token
            self.shared_expert = MLP(cfg, hidden=cfg.expert_ffn_hidden)
            self.shared_expert_gate = nn.Linear(cfg.d_model, 1, bias=False)
        elif cfg.n_shared_experts:
            self.shared_experts = MLP(cfg, hidden=cfg.n_shared_experts * cfg.expert_ffn_hidden)

    def route(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        sigmoid = self.cfg.moe_scoring == "sigmoid"
        if sigmoid:
            scores = F.linear(x.float(), self.gate.weight.float()).sigmoid()  # (N, E)
            choice = scores + self.gate.get_buffer("e_score_correction_bias").float()
        else:
            scores = choice = self.gate(x).softmax(dim=-1, dtype=torch.float32)  # (N, E)
        with torch.no_grad():  # the choice needs no gradient; only the chosen scores do
            if self.cfg.moe_groups > 1:
                choice = self._within_best_groups(choice, sigmoid)
            experts = choice.topk(self.top_k, dim=-1).indices
        weights = scores.gather(-1, experts)
        if self.renormalize:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        if self.cfg.routed_scaling != 1.0:
            weights = weights * self.cfg.routed_scaling
        return weights.to(x.dtype), experts

    def _within_best_groups(self, choice: torch.Tensor, sigmoid: bool) -> torch.Tensor:
        """``choice`` (N, E) with the experts outside each token's best groups ruled out."""
        N, E = choice.shape
        grouped = choice.view(N, self.cfg.moe_groups, E // self.cfg.moe_groups)
        top2 = sigmoid or self.cfg.moe_group_top2  # DeepSeek-V3, Mistral 4: the two best; V2: the best
        ranks = grouped.topk(2, dim=-1).values.sum(-1) if top2 else grouped.max(dim=-1).values
        best = ranks.topk(self.cfg.moe_topk_groups, dim=-1).indices  # (N, topk_groups)
        keep = F.one_hot(best, self.cfg.moe_groups).amax(dim=1).bool()  # (N, groups)
        # DeepSeek-V2 zeroes the softmax scores outside (never above a kept one), V3 rules them out
        return grouped.masked_fill(~keep[..., None], float("-inf") if sigmoid else 0.0).view(N, E)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = super().forward(x)
        if self.cfg.shared_expert_gate:  # σ(w·x) · shared_expert(x)
            return out + torch.sigmoid(self.shared_expert_gate(x)) * self.shared_expert(x)
        return out + self.shared_experts(x) if self.cfg.n_shared_experts else out


class Llama4MoE(MoE):
    """Llama 4: ``router`` (C → E logits), each token's top-k logits through a sigmoid as the
    weights of its experts' inputs (transformers runs every expert on every token, the others
    scaled by σ(−∞) = 0: the same sum), plus one ``shared_expert`` every token passes."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.top_k = cfg.experts_per_token
        self.router = nn.Linear(cfg.d_model, cfg.n_experts, bias=False)
        self.experts = Llama4Experts(cfg)
        self.shared_expert = MLP(cfg, hidden=cfg.expert_ffn_hidden)

    def route(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        top, experts = self.router(x).topk(self.top_k, dim=-1)
        return torch.sigmoid(top.float()).to(x.dtype), experts

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.shared_expert(x) + super().forward(x)
