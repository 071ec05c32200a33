"""Gradient norms, Post-LN vs Pre-LN: per-layer gradient norms of the same weights arranged both
ways, one forward/backward each on the same batch (Xiong et al. 2020, "On Layer Normalization
in the Transformer Architecture").
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from ..config import ModelConfig, arrangement
from ..figures.common import (ARRANGEMENT_COLORS, ARRANGEMENT_LABELS, Figure, Table,
                              layout_figure)
from ..model import CausalLM, build_model
from ..runtime.devices import pick_device
from ..runtime.memory import check_memory
from ..train.budgets import check_sizes, random_batch, training_bytes_needed
from ..train.data import TokenData
from ..train.measure import layer_grad_norms, norm_of
from ..train.step import next_token_loss
from ..units import Progress, plain_fields
from .registry import ExperimentKind, register


PARAM_GROUPS = {   # module name inside a block (an expert tensor's own name) → group
    "q_proj": "q", "k_proj": "k", "v_proj": "v", "o_proj": "o",
    "gate_proj": "gate", "up_proj": "up", "down_proj": "down",
    "gate": "router", "gate_up_proj": "gate_up", "experts": "experts",
    "input_layernorm": "norms", "post_attention_layernorm": "norms",
    "q_norm": "norms", "k_norm": "norms",
}


GROUP_ORDER = ("q", "k", "v", "o", "gate", "up", "down", "router", "gate_up", "norms")


def _group(name: str) -> str:
    """The group of a block's parameter: its module's, or for the fused experts the tensor's
    (gate_up_proj: "gate_up", down_proj: "down")."""
    parts = name.split(".")
    return PARAM_GROUPS[parts[-1] if parts[-2] == "experts" else parts[-2]]


def _down_weight(layer) -> torch.Tensor:
    """The FFN's output projection: down_proj, or every expert's (E, C, F) tensor."""
    return layer.mlp.experts.down_proj if hasattr(layer.mlp, "experts") else layer.mlp.down_proj.weight


def group_grad_norms(model: CausalLM) -> dict[str, list[float]]:
    groups: dict[str, list[list[torch.Tensor]]] = {}
    n_layers = len(model.model.layers)
    for i, layer in enumerate(model.model.layers):
        for name, p in layer.named_parameters():
            group = _group(name)
            if p.grad is not None:
                groups.setdefault(group, [[] for _ in range(n_layers)])[i].append(p.grad)
    return {g: [norm_of(ts) for ts in groups[g]] for g in GROUP_ORDER if g in groups}


@dataclass(frozen=True)
class GradNorms:
    norm_position: str
    loss: float
    layer_grad_norm: list                # per block, index 0 = nearest the input
    ffn_out_grad_norm: list              # ‖∇W_down‖ per block
    residual_grad_norm: list             # ‖∂L/∂x_l‖ at each block's input
    group_grad_norm: dict                # group → per-block list
    embedding_grad_norm: float
    total_grad_norm: float

    def to_dict(self) -> dict:
        """SPEC ``gradnorms``: loss and the per-layer lists (the arm is the key above it)."""
        return plain_fields(self, exclude=("norm_position",))


def measure_grad_norms(model: CausalLM, inputs: torch.Tensor, targets: torch.Tensor) -> GradNorms:
    """One forward/backward; block inputs are caught by forward pre-hooks and their gradients
    by tensor hooks."""
    n_layers = len(model.model.layers)
    residual: list[float | None] = [None] * n_layers

    def catch_input(index: int):
        def pre_hook(module, args):
            x = args[0]                                            # (B, T, C) block input
            if x.requires_grad:
                x.register_hook(lambda grad: residual.__setitem__(index, norm_of([grad])))
        return pre_hook

    handles = [layer.register_forward_pre_hook(catch_input(i))
               for i, layer in enumerate(model.model.layers)]
    try:
        model.zero_grad(set_to_none=True)
        loss = next_token_loss(model(inputs), targets)
        loss.backward()
    finally:
        for handle in handles:
            handle.remove()
    return GradNorms(
        norm_position=model.cfg.norm_position, loss=loss.item(),
        layer_grad_norm=layer_grad_norms(model),
        ffn_out_grad_norm=[norm_of([_down_weight(layer).grad]) for layer in model.model.layers],
        residual_grad_norm=residual, group_grad_norm=group_grad_norms(model),
        embedding_grad_norm=norm_of([model.model.embed_tokens.weight.grad]),
        total_grad_norm=norm_of(p.grad for p in model.parameters() if p.grad is not None))


@dataclass(frozen=True)
class GradNormComparison:
    post: GradNorms
    pre: GradNorms
    seq_len: int
    batch: int
    seed: int

    def to_dict(self) -> dict:
        """SPEC ``gradnorms``: {"post": R, "pre": R}."""
        return {"post": self.post.to_dict(), "pre": self.pre.to_dict()}

    def to_frame(self):
        """One row per (norm position, block): the three SPEC lists and every group."""
        import pandas as pd
        rows = []
        for result in (self.post, self.pre):
            for i in range(len(result.layer_grad_norm)):
                row = {"norm_position": result.norm_position, "layer": i,
                       "layer_grad_norm": result.layer_grad_norm[i],
                       "ffn_out_grad_norm": result.ffn_out_grad_norm[i],
                       "residual_grad_norm": result.residual_grad_norm[i]}
                row.update({f"grad_{g}": v[i] for g, v in result.group_grad_norm.items()})
                rows.append(row)
        return pd.DataFrame(rows)


def _same_weights(post: torch.nn.Module, pre: torch.nn.Module) -> bool:
    """Every tensor the arms share is equal, and they differ only by Pre-LN's final norm."""
    sa, sb = post.state_dict(), pre.state_dict()
    extra = set(sb) - set(sa)
    return (set(sa) <= set(sb) and all(k.startswith("model.norm.") for k in extra)
            and all(torch.equal(sa[k], sb[k]) for k in sa))


def gradnorms(cfg: ModelConfig, seq_len: int, batch: int, seed: int = 0,
              data: TokenData | None = None, device: str = "cpu",
              progress: Progress | None = None) -> GradNormComparison:
    """The config built as Post-LN and as Pre-LN — same shapes, so the same seed gives the
    same weights (checked) — one forward/backward each on the same batch (random ids unless
    ``data``), fp32."""
    check_sizes(cfg, seq_len, batch)
    dev = pick_device(device)
    check_memory(2 * training_bytes_needed(cfg, seq_len, batch, "fp32", optimizer=False), dev,
                 f"two forward/backward passes (Post-LN and Pre-LN, B={batch}, T={seq_len})")
    inputs, targets = (t.to(dev) for t in random_batch(cfg, seq_len, batch, seed, data))
    results = {}
    models = {}
    for i, position in enumerate(("post", "pre")):
        if progress:
            progress(i / 2, f"{position}-LN forward/backward")
        models[position] = build_model(arrangement(cfg, position), device=dev, seed=seed)
        results[position] = measure_grad_norms(models[position], inputs, targets)
        if i == 1 and not _same_weights(models["post"], models["pre"]):
            raise RuntimeError("Post-LN and Pre-LN models got different initial weights")
        models[position].zero_grad(set_to_none=True)
    if progress:
        progress(1.0, "done")
    return GradNormComparison(post=results["post"], pre=results["pre"], seq_len=seq_len,
                              batch=batch, seed=seed)


# ---- figures and tables --------------------------------------------------------------------
GRADNORM_METRICS = {  # field of GradNorms → axis title
    "layer_grad_norm": "‖∇θ_l‖ (all parameters of block l)",
    "ffn_out_grad_norm": "‖∇W_down‖ (FFN output projection)",
    "residual_grad_norm": "‖∂L/∂x_l‖ (residual stream at block input)",
}


def gradnorm_profile(comparison: GradNormComparison) -> go.Figure:
    """The three per-layer norms of SPEC's ``gradnorms``, Post-LN vs Pre-LN, log y."""
    fig = make_subplots(rows=1, cols=3, subplot_titles=list(GRADNORM_METRICS.values()),
                        horizontal_spacing=0.07)
    for col, metric in enumerate(GRADNORM_METRICS, start=1):
        for result in (comparison.post, comparison.pre):
            values = getattr(result, metric)                    # per block, 0 = nearest input
            position = result.norm_position
            fig.add_trace(go.Scatter(
                x=list(range(len(values))), y=values, mode="lines+markers",
                name=f"{ARRANGEMENT_LABELS[position]} (loss {result.loss:.3f})",
                legendgroup=position, showlegend=col == 1,
                line=dict(color=ARRANGEMENT_COLORS[position]),
                hovertemplate=f"{ARRANGEMENT_LABELS[position]} block %{{x}}: %{{y:.3e}}<extra></extra>"),
                row=1, col=col)
        fig.update_xaxes(title_text="block (0 = nearest the input)", dtick=max(1, len(values) // 8),
                         row=1, col=col)
        fig.update_yaxes(type="log", row=1, col=col)
    fig.update_annotations(font_size=12)
    n_layers = len(comparison.post.layer_grad_norm)
    return layout_figure(fig, f"Gradient norms at initialisation, {n_layers} blocks, "
                        f"B={comparison.batch}, T={comparison.seq_len} (same weights, same batch)",
                   height=420)


def group_table(comparison: GradNormComparison) -> pd.DataFrame:
    """One row per (norm position, parameter group); one column per block."""
    rows = []
    for result in (comparison.post, comparison.pre):
        for group, values in result.group_grad_norm.items():
            row = {"norm_position": result.norm_position, "group": group}
            row.update({f"block {i}": value for i, value in enumerate(values)})
            rows.append(row)
    return pd.DataFrame(rows)


def gradnorm_summary(comparison: GradNormComparison) -> pd.DataFrame:
    """Loss and whole-model norms of both arrangements; the last-over-first ratio of each
    per-layer list says which way the gradient grows through depth."""
    rows = []
    for result in (comparison.post, comparison.pre):
        row = {"norm_position": result.norm_position, "loss": result.loss,
               "total_grad_norm": result.total_grad_norm,
               "embedding_grad_norm": result.embedding_grad_norm}
        for metric in GRADNORM_METRICS:
            values = getattr(result, metric)
            row[f"{metric}_last_over_first"] = values[-1] / values[0] if values[0] else None
        rows.append(row)
    return pd.DataFrame(rows)


def tables(result: GradNormComparison, section: str, config: ModelConfig | None = None) -> list[Table]:
    return [Table("gradnorms_summary", "Loss and whole-model gradient norms", section,
                  gradnorm_summary(result)),
            Table("gradnorms_per_layer", "Per-block gradient norms", section, result.to_frame()),
            Table("gradnorms_by_group", "Per-group gradient norms (one column per block)",
                  section, group_table(result))]


def figures(result: GradNormComparison, section: str) -> list[Figure]:
    return [Figure("gradnorms_profile", "Gradient norms per block", section,
                   gradnorm_profile(result))]


KIND = register(ExperimentKind(
    name="gradnorms", title="Gradient norms: Post-LN vs Pre-LN", result_type=GradNormComparison,
    run=gradnorms, tables=tables, figures=figures, panel="gradnorms", order=10))
