"""Gradient norms, Post-LN vs Pre-LN: per-layer gradient norms of the same weights arranged both
ways, one forward/backward each on the same batch (Xiong et al. 2020, "On Layer Normalization
in the Transformer Architecture").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Mapping, Sequence

import pandas as pd
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from ..config import ModelConfig, arrangement, require_decoder_only
from ..errors import ExperimentError
from ..figures.common import ARRANGEMENT_COLORS, ARRANGEMENT_LABELS, Figure, Table, band_traces, layout_figure
from ..model import CausalLM, build_model, part_tensors
from ..model.decoder import DecoderLayer
from ..model.mlp import MoE
from ..runtime.devices import pick_device
from ..runtime.memory import check_memory
from ..train.budgets import check_sizes, random_batch, training_bytes_needed
from ..train.data import TokenData
from ..train.measure import layer_grad_norms, norm_of
from ..train.step import next_token_loss
from ..units import Progress, plain, plain_fields, plural
from .registry import ExperimentKind, register
from .seeds import band, median_list, median_of, over_seeds

PARAM_GROUPS = {  # module name inside a block (an expert tensor's own name) → group
    "q_proj": "q",
    "k_proj": "k",
    "v_proj": "v",
    "o_proj": "o",
    "gate_proj": "gate",
    "up_proj": "up",
    "down_proj": "down",
    "gate": "router",
    "router": "router",
    "gate_up_proj": "gate_up",
    "gate_up_proj_bias": "gate_up",  # gpt-oss's expert biases
    "down_proj_bias": "down",
    "q_a_proj": "q",  # MLA: q's bottleneck, the latent and its up-projection to K and V
    "q_b_proj": "q",
    "kv_a_proj_with_mqa": "kv_latent",
    "kv_b_proj": "kv_latent",
    "q_a_layernorm": "norms",
    "kv_a_layernorm": "norms",
    "sinks": "sinks",  # gpt-oss: each head's sink logit
    "experts": "experts",
    "input_layernorm": "norms",
    "post_attention_layernorm": "norms",
    "pre_feedforward_layernorm": "norms",  # sandwich (Gemma)
    "post_feedforward_layernorm": "norms",
    "q_norm": "norms",
    "k_norm": "norms",
}


GROUP_ORDER = ("q", "k", "v", "kv_latent", "o", "sinks", "gate", "up", "down", "router", "gate_up", "norms")


def _group(name: str) -> str:
    """The group of a block's parameter: its module's, or for the fused experts the tensor's
    (gate_up_proj: "gate_up", down_proj: "down"), for an attention's own tensor (gpt-oss's
    sinks) its name."""
    parts = name.split(".")
    return PARAM_GROUPS[parts[-1] if parts[-2] in ("experts", "self_attn") else parts[-2]]


def _down_weight(layer: DecoderLayer) -> torch.Tensor:
    """The FFN's output projection: down_proj, or every expert's (E, C, F) tensor."""
    ffn = layer.ffn
    return ffn.experts.down_proj if isinstance(ffn, MoE) else ffn.down_proj.weight


def _grad(weight: torch.Tensor) -> torch.Tensor:
    """``weight``'s gradient after the backward (each weight on the loss's path has one)."""
    if weight.grad is None:
        raise ExperimentError(f"a weight of shape {tuple(weight.shape)} has no gradient after backward")
    return weight.grad


def group_grad_norms(model: CausalLM) -> dict[str, list[float]]:
    groups: dict[str, list[list[torch.Tensor]]] = {}
    n_layers = len(model.model.layers)
    for i, layer in enumerate(model.model.layers):
        for name, grad in part_tensors(layer, grads=True):  # q, k, v; gate, up apart
            groups.setdefault(_group(name), [[] for _ in range(n_layers)])[i].append(grad)
    return {g: [norm_of(ts) for ts in groups[g]] for g in GROUP_ORDER if g in groups}


@dataclass(frozen=True)
class GradNorms:
    norm_position: str
    loss: float
    layer_grad_norm: Sequence[float | None]  # per block, index 0 = nearest the input
    ffn_out_grad_norm: Sequence[float | None]  # ‖∇W_down‖ per block
    residual_grad_norm: Sequence[float | None]  # ‖∂L/∂x_l‖ at each block's input
    group_grad_norm: Mapping[str, Sequence[float | None]]  # group → per-block list
    embedding_grad_norm: float
    total_grad_norm: float
    # the forward pass: RMS of each block's input x_l and of its two branches' outputs, and of
    # the input of the last norm before lm_head (Pre-LN: the final norm's, the whole residual
    # stream; Post-LN: the last block's second norm's, x + FFN(x)): a norm divides the gradient
    # through it by that RMS
    residual_rms: Sequence[float | None]
    attn_out_rms: Sequence[float | None]
    ffn_out_rms: Sequence[float | None]
    last_norm_input_rms: float

    def to_dict(self) -> dict:
        """The ``gradnorms --json`` shape: loss and the per-layer lists (the arm is the key above it)."""
        return plain_fields(self, exclude=("norm_position",))


def _rms(x: torch.Tensor) -> float:
    return x.detach().float().pow(2).mean().sqrt().item()


def measure_grad_norms(model: CausalLM, inputs: torch.Tensor, targets: torch.Tensor) -> GradNorms:
    """One forward/backward; block inputs are caught by forward pre-hooks and their gradients
    by tensor hooks, the branches' outputs by forward hooks."""
    layers = model.model.blocks
    n_layers = len(layers)
    residual: list[float | None] = [None] * n_layers
    seen: dict[str, list[float | None]] = {
        name: [None] * n_layers for name in ("residual_rms", "attn_out_rms", "ffn_out_rms")
    }
    final = [0.0]

    def catch_input(index: int):
        def pre_hook(module, args):
            x = args[0]  # (B, T, C) block input
            seen["residual_rms"][index] = _rms(x)
            if x.requires_grad:
                x.register_hook(lambda grad: residual.__setitem__(index, norm_of([grad])))

        return pre_hook

    def catch_output(name: str, index: int):
        def hook(module, args, output):
            seen[name][index] = _rms(output)

        return hook

    handles = [layer.register_forward_pre_hook(catch_input(i)) for i, layer in enumerate(layers)]
    handles += [
        layer.self_attn.register_forward_hook(catch_output("attn_out_rms", i))
        for i, layer in enumerate(layers)
    ]
    handles += [
        layer.ffn.register_forward_hook(catch_output("ffn_out_rms", i)) for i, layer in enumerate(layers)
    ]
    last_norm = layers[-1].post_attention_layernorm if model.cfg.norm_position == "post" else model.model.norm
    handles.append(
        last_norm.register_forward_pre_hook(lambda module, args: final.__setitem__(0, _rms(args[0])))
    )
    try:
        model.zero_grad(set_to_none=True)
        loss = next_token_loss(model(inputs), targets)
        loss.backward()
    finally:
        for handle in handles:
            handle.remove()
    return GradNorms(
        norm_position=model.cfg.norm_position,
        loss=loss.item(),
        layer_grad_norm=layer_grad_norms(model),
        ffn_out_grad_norm=[norm_of([_grad(_down_weight(layer))]) for layer in layers],
        residual_grad_norm=residual,
        group_grad_norm=group_grad_norms(model),
        embedding_grad_norm=norm_of([_grad(model.model.embed_tokens.weight)]),
        total_grad_norm=norm_of(p.grad for p in model.parameters() if p.grad is not None),
        residual_rms=seen["residual_rms"],
        attn_out_rms=seen["attn_out_rms"],
        ffn_out_rms=seen["ffn_out_rms"],
        last_norm_input_rms=final[0],
    )


@dataclass(frozen=True)
class GradNormComparison:
    post: GradNorms
    pre: GradNorms
    seq_len: int
    batch: int
    seed: int

    def to_dict(self) -> dict:
        """The ``gradnorms --json`` shape: {"post": R, "pre": R}."""
        return {"post": self.post.to_dict(), "pre": self.pre.to_dict()}


def _same_weights(post: torch.nn.Module, pre: torch.nn.Module) -> bool:
    """Every tensor the arms share is equal, and they differ only by Pre-LN's final norm."""
    sa, sb = post.state_dict(), pre.state_dict()
    extra = set(sb) - set(sa)
    return (
        set(sa) <= set(sb)
        and all(k.startswith("model.norm.") for k in extra)
        and all(torch.equal(sa[k], sb[k]) for k in sa)
    )


def gradnorms(
    cfg: ModelConfig,
    seq_len: int,
    batch: int,
    seed: int = 0,
    data: TokenData | None = None,
    device: str = "cpu",
    progress: Progress | None = None,
) -> GradNormComparison:
    """The config built as Post-LN and as Pre-LN — same shapes, so the same seed gives the
    same weights (checked) — one forward/backward each on the same batch (random ids unless
    ``data``), fp32."""
    require_decoder_only(cfg, "the gradient norms")
    check_sizes(cfg, seq_len, batch)
    dev = pick_device(device)
    check_memory(
        2 * training_bytes_needed(cfg, seq_len, batch, "fp32", optimizer=False),
        dev,
        f"two forward/backward passes (Post-LN and Pre-LN, B={batch}, T={seq_len})",
    )
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
    return GradNormComparison(
        post=results["post"], pre=results["pre"], seq_len=seq_len, batch=batch, seed=seed
    )


LIST_FIELDS = (
    "layer_grad_norm",
    "ffn_out_grad_norm",
    "residual_grad_norm",
    "residual_rms",
    "attn_out_rms",
    "ffn_out_rms",
)
SCALAR_FIELDS = ("loss", "embedding_grad_norm", "total_grad_norm", "last_norm_input_rms")


def _ratio(a: float | None, b: float | None) -> float:
    if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)) or b == 0:
        return math.nan
    return a / b


def _median_or_nan(values: Sequence[float | None]) -> float:
    """The median of the finite values; NaN if none is (null in JSON, as None was)."""
    median = median_of(values)
    return math.nan if median is None else median


def median_arm(arms: Sequence[GradNorms]) -> GradNorms:
    """One arm's measurements over seeds: each number the median of the seeds'."""
    groups = arms[0].group_grad_norm
    lists = {f: median_list([getattr(a, f) for a in arms]) for f in LIST_FIELDS}
    scalar = {f: _median_or_nan([getattr(a, f) for a in arms]) for f in SCALAR_FIELDS}
    return GradNorms(
        norm_position=arms[0].norm_position,
        loss=scalar["loss"],
        layer_grad_norm=lists["layer_grad_norm"],
        ffn_out_grad_norm=lists["ffn_out_grad_norm"],
        residual_grad_norm=lists["residual_grad_norm"],
        group_grad_norm={g: median_list([a.group_grad_norm[g] for a in arms]) for g in groups},
        embedding_grad_norm=scalar["embedding_grad_norm"],
        total_grad_norm=scalar["total_grad_norm"],
        residual_rms=lists["residual_rms"],
        attn_out_rms=lists["attn_out_rms"],
        ffn_out_rms=lists["ffn_out_rms"],
        last_norm_input_rms=scalar["last_norm_input_rms"],
    )


@dataclass(frozen=True)
class GradNormSeeds:
    """Post-LN vs Pre-LN at initialisation, once per seed (weights and batch both follow the
    seed); ``post`` and ``pre`` are the medians."""

    runs: list[GradNormComparison]  # per seed
    seeds: list[int]
    seq_len: int
    batch: int
    data: str  # "random token ids" or the text's name

    @cached_property
    def post(self) -> GradNorms:
        return median_arm([run.post for run in self.runs])

    @cached_property
    def pre(self) -> GradNorms:
        return median_arm([run.pre for run in self.runs])

    def arms(self, position: str) -> list[GradNorms]:
        return [getattr(run, position) for run in self.runs]

    def by_seed(self, position: str, name: str) -> list:
        return [getattr(arm, name) for arm in self.arms(position)]

    def band(self, position: str, name: str) -> tuple[list, list]:
        return band(self.by_seed(position, name))

    def last_ratio_by_seed(self, name: str = "ffn_out_grad_norm") -> list[float]:
        """Post/Pre of the last block's ``name``, seed by seed (NaN where a norm is 0 or not
        finite)."""
        return [_ratio(getattr(run.post, name)[-1], getattr(run.pre, name)[-1]) for run in self.runs]

    def last_ratio(self, name: str = "ffn_out_grad_norm") -> float:
        """The median of the seeds' Post/Pre ratios (as the depth sweep's), NaN if none."""
        return _median_or_nan(self.last_ratio_by_seed(name))

    def to_dict(self, by_seed: bool | None = None) -> dict:
        """The ``gradnorms --json`` shape: without ``by_seed`` (default: only for several seeds) exactly
        as ``GradNormComparison``; with it each list the median, with its ``<name>_by_seed``
        twin (and ``loss_by_seed``, ``seeds``)."""
        if not (len(self.runs) > 1 if by_seed is None else by_seed):
            return self.runs[0].to_dict()
        out = {}
        for position in ("post", "pre"):
            arm = getattr(self, position).to_dict()
            for name in (*LIST_FIELDS, "loss"):
                arm[f"{name}_by_seed"] = plain(self.by_seed(position, name))
            arm["seeds"] = list(self.seeds)
            out[position] = arm
        return out

    def to_frame(self):
        """One row per (seed, norm position, block): the per-block lists and every group."""
        rows = []
        for seed, run in zip(self.seeds, self.runs):
            for result in (run.post, run.pre):
                for i in range(len(result.layer_grad_norm)):
                    row = {"seed": seed, "norm_position": result.norm_position, "layer": i}
                    row.update({name: getattr(result, name)[i] for name in LIST_FIELDS})
                    row.update({f"grad_{g}": v[i] for g, v in result.group_grad_norm.items()})
                    rows.append(row)
        return pd.DataFrame(rows)


def gradnorms_over_seeds(
    cfg: ModelConfig,
    seq_len: int,
    batch: int,
    seeds: Sequence[int] = (0,),
    data: TokenData | None = None,
    device: str = "cpu",
    progress: Progress | None = None,
) -> GradNormSeeds:
    """``gradnorms`` once per seed."""
    seeds, runs = over_seeds(
        seeds,
        progress,
        lambda seed, part: gradnorms(cfg, seq_len, batch, seed=seed, data=data, device=device, progress=part),
    )
    return GradNormSeeds(
        runs=runs,
        seeds=seeds,
        seq_len=seq_len,
        batch=batch,
        data=data.source if data is not None else RANDOM_TOKENS,
    )


RANDOM_TOKENS = "random token ids"


# ---- figures and tables --------------------------------------------------------------------
GRADNORM_METRICS = {  # field of GradNorms → axis title
    "layer_grad_norm": "‖∇θ_l‖ (all parameters of block l)",
    "ffn_out_grad_norm": "‖∇W_down‖ (FFN output projection)",
    "residual_grad_norm": "‖∂L/∂x_l‖ (residual stream at block input)",
}


def gradnorm_profile(result: GradNormSeeds) -> go.Figure:
    """The three per-layer norms of ``gradnorms --json``, Post-LN vs Pre-LN, log y: the median
    over seeds with the min–max band."""
    fig = make_subplots(
        rows=1, cols=3, subplot_titles=list(GRADNORM_METRICS.values()), horizontal_spacing=0.07
    )
    n_layers = len(result.post.layer_grad_norm)
    for col, metric in enumerate(GRADNORM_METRICS, start=1):
        for position in ("post", "pre"):
            arm = getattr(result, position)
            low, high = result.band(position, metric)
            label = ARRANGEMENT_LABELS[position]
            for trace in band_traces(
                list(range(n_layers)),
                getattr(arm, metric),
                low,
                high,
                name=f"{label} (loss {arm.loss:.3f})",
                color=ARRANGEMENT_COLORS[position],
                legendgroup=position,
                showlegend=col == 1,
                hover="block %{x}: %{y:.3e}",
            ):
                fig.add_trace(trace, row=1, col=col)
        fig.update_xaxes(
            title_text="block (0 = nearest the input)", dtick=max(1, n_layers // 8), row=1, col=col
        )
        fig.update_yaxes(type="log", row=1, col=col)
    fig.update_annotations(font_size=12)
    seeds = (
        f"median of {len(result.seeds)} seeds, band min–max"
        if len(result.seeds) > 1
        else f"seed {result.seeds[0]}"
    )
    return layout_figure(
        fig,
        f"Gradient norms at initialisation, {plural(n_layers, 'block')}, "
        f"B={result.batch}, T={result.seq_len}, {result.data} ({seeds})",
        height=440,
    )


def group_table(result: GradNormSeeds) -> pd.DataFrame:
    """One row per (norm position, parameter group); one column per block (medians)."""
    rows = []
    for arm in (result.post, result.pre):
        for group, values in arm.group_grad_norm.items():
            row: dict[str, Any] = {"norm_position": arm.norm_position, "group": group}
            row.update({f"block {i}": value for i, value in enumerate(values)})
            rows.append(row)
    return pd.DataFrame(rows)


def gradnorm_summary(result: GradNormSeeds) -> pd.DataFrame:
    """Loss and whole-model norms of both arrangements (medians); the last-over-first ratio of
    each per-layer list says which way the gradient grows through depth."""
    rows = []
    for arm in (result.post, result.pre):
        row = {
            "norm_position": arm.norm_position,
            "loss": arm.loss,
            "total_grad_norm": arm.total_grad_norm,
            "embedding_grad_norm": arm.embedding_grad_norm,
            "last_norm_input_rms": arm.last_norm_input_rms,
        }
        for metric in GRADNORM_METRICS:
            values = getattr(arm, metric)
            row[f"{metric}_last_over_first"] = values[-1] / values[0] if values[0] else None
        rows.append(row)
    return pd.DataFrame(rows)


def seed_table(result: GradNormSeeds) -> pd.DataFrame:
    """Per seed: both arms' loss and last block's ‖∇W_down‖, and their ratio."""
    return pd.DataFrame(
        [
            {
                "seed": seed,
                "post_loss": run.post.loss,
                "pre_loss": run.pre.loss,
                "post_last_ffn_grad_norm": run.post.ffn_out_grad_norm[-1],
                "pre_last_ffn_grad_norm": run.pre.ffn_out_grad_norm[-1],
                "post_over_pre": ratio,
            }
            for seed, run, ratio in zip(result.seeds, result.runs, result.last_ratio_by_seed())
        ]
    )


def tables(result: GradNormSeeds, section: str, config: ModelConfig | None = None) -> list[Table]:
    return [
        Table(
            "gradnorms_summary",
            "Loss and whole-model gradient norms (medians over seeds)",
            section,
            gradnorm_summary(result),
        ),
        Table("gradnorms_by_seed", "The last block's ‖∇W_down‖, seed by seed", section, seed_table(result)),
        Table("gradnorms_per_layer", "Per-block measurements, every seed", section, result.to_frame()),
        Table(
            "gradnorms_by_group",
            "Per-group gradient norms (medians; one column per block)",
            section,
            group_table(result),
        ),
    ]


def figures(result: GradNormSeeds, section: str) -> list[Figure]:
    return [Figure("gradnorms_profile", "Gradient norms per block", section, gradnorm_profile(result))]


KIND = register(
    ExperimentKind(
        name="gradnorms",
        title="Gradient norms: Post-LN vs Pre-LN",
        result_type=GradNormSeeds,
        run=gradnorms_over_seeds,
        tables=tables,
        figures=figures,
        panel="gradnorms",
        order=10,
    )
)
