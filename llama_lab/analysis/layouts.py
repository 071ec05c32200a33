"""What fits on N GPUs: serving a model split by tensor and pipeline parallelism (the longest
context and the largest batch next to each GPU's share of the weights), and the training
layouts (TP × PP × DP, ZeRO, sequence parallel, recomputation) that fit N GPUs of a kind,
cheapest first by a stated step-time model.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..config import LIMITS, ModelConfig
from ..errors import AnalysisError
from ..runtime.hardware import GPU, link_bytes_per_s
from .common import check_count, checked_gpu, first_true
from .flops import count_flops
from .kv import kv_cache_bytes, kv_cache_bytes_per_token
from .parallel import Layout, check_layout, layers_of, parallel_memory, stage_layers, stage_tensors
from .params import count_params
from .quant import WeightQuant, as_weight_quant, buffer_tensors, check_unconverted, weights_bytes
from .scope import check_planned

# The step-time model that orders the search (an upper bound: nothing overlapped) takes each
# GPU's own links (``hardware.link_bytes_per_s``); tensor parallelism stays in one scale-up domain.
TP_CHOICES = (1, 2, 4, 8)
MAX_PIPELINE = 128  # the search's deepest pipeline (LLaMA-3.1-405B used 16 stages)


@dataclass(frozen=True)
class ServingFit:
    layout: str
    tp: int
    pp: int
    replicas: int  # data-parallel copies: gpus / (tp · pp)
    weights_bytes_per_gpu: int  # the fullest stage's TP piece, scales included
    kv_bytes_per_token_per_gpu: int  # the fullest stage's layers, its KV heads
    max_context_at_batch: int  # per sequence, at ``batch`` sequences per replica
    max_batch_at_seq_len: int  # per replica
    total_batch_at_seq_len: int  # × replicas

    def to_dict(self) -> dict:
        return asdict(self)


def gpu_weight_bytes(
    cfg: ModelConfig, weights: WeightQuant | str, layout: Layout, stage: int = 0
) -> dict[str, int]:
    """The weights one GPU of ``stage`` holds, by tensor, in ``weights``' format (scales
    included): its tensor-parallel piece of its blocks' tensors, of the embedding and of the
    head (``parallel.stage_tensors``: q/k/v and gate/up by rows, o/down by columns, KV heads
    G/tp or one replicated, the vocabulary padded to a multiple of tp, norms and MLA's latent
    projections whole), and its sparse blocks' float32 router buffers (whole). The one per-GPU
    rule of the Many GPUs page, ``predict decode`` and the vLLM fit; at tp = pp = 1 its total
    is ``quant.weights_bytes``' total."""
    quant = as_weight_quant(weights)
    if quant.layout and cfg.fused_keys:
        weights_bytes(cfg, quant)  # a layout it does not model: refused there, by name
    check_unconverted(cfg, quant)
    held: dict[str, int] = {}
    for group in stage_tensors(cfg, layout, stage):
        held[group.name] = held.get(group.name, 0) + sum(quant.tensor_bytes(group).values())
    sparse = sum(cfg.moe_layer_flags[i] for i in layers_of(cfg, layout, stage))
    for group in buffer_tensors(cfg) if sparse else ():  # float32, one per sparse block
        held[group.name] = 4 * group.rows * group.cols * sparse
    return held


def serving_fit(
    cfg: ModelConfig,
    gpu: GPU | str,
    layout: Layout,
    batch: int = 1,
    seq_len: int | None = None,
    weights="bf16",
    kv_dtype: str | None = None,
) -> ServingFit:
    """Serving on ``layout.gpus`` GPUs split TP × PP (the rest data-parallel replicas): each
    stage's GPU holds its weights and its layers' cache; the fullest stage decides."""
    check_layout(cfg, layout)
    tp, pp = layout.tp, layout.pp
    check_count("batch", batch, LIMITS["max_seq_len"])
    seq_len = seq_len or cfg.max_seq_len
    check_count("seq_len", seq_len, LIMITS["max_seq_len"])
    memory = checked_gpu(gpu).usable_bytes
    quant = as_weight_quant(weights)
    kv = kv_dtype or (quant.dtype if quant.dtype in ("bf16", "fp16", "fp32") else "bf16")
    stages = stage_layers(cfg, layout)
    weights_per = [sum(gpu_weight_bytes(cfg, quant, layout, s).values()) for s in range(pp)]

    def cache(stage: int, tokens: int, n: int) -> int:  # its layers' cache on one of its GPUs
        return kv_cache_bytes(cfg, tokens, n, kv, tp, stages[stage])

    def fits(stage: int, tokens: int, n: int) -> bool:
        return weights_per[stage] + cache(stage, tokens, n) <= memory

    def longest(stage: int) -> int:
        if not fits(stage, 1, batch):
            return 0
        last = first_true(lambda T: not fits(stage, T, batch), 1, LIMITS["max_seq_len"])
        return LIMITS["max_seq_len"] if last is None else last - 1

    def largest(stage: int) -> int:
        per_seq = cache(stage, seq_len, 1)
        return max(0, (memory - weights_per[stage]) // per_seq) if per_seq else 0

    context = min(longest(s) for s in range(pp))
    most = min(largest(s) for s in range(pp))
    per_token = max(kv_cache_bytes_per_token(cfg, kv, tp, layers) for layers in stages)
    return ServingFit(
        layout.label(), tp, pp, layout.dp, max(weights_per), per_token, context, most, most * layout.dp
    )


def serving_fits(
    cfg: ModelConfig,
    gpu: GPU | str,
    gpus: int,
    batch: int = 1,
    seq_len: int | None = None,
    weights="bf16",
    kv_dtype: str | None = None,
) -> list[ServingFit]:
    """Every TP × PP split of ``gpus`` GPUs the model allows (TP within a node), most context
    first (a multimodal config is refused by name: its tower is not split)."""
    check_planned(cfg, "Serving on several GPUs")
    rows = []
    for tp in TP_CHOICES:
        for pp in _divisors(gpus // tp if gpus % tp == 0 else 0, cfg.n_layers):
            try:
                rows.append(serving_fit(cfg, gpu, Layout(gpus, tp, pp), batch, seq_len, weights, kv_dtype))
            except AnalysisError:
                continue  # tp not dividing heads, and so on
    return sorted(rows, key=lambda r: (-r.max_context_at_batch, r.tp * r.pp))


def _divisors(n: int, upper: int) -> list[int]:
    return [p for p in range(1, min(n, upper) + 1) if n % p == 0]


@dataclass(frozen=True)
class LayoutCost:
    layout: str
    tp: int
    pp: int
    dp: int
    zero: int
    sequence_parallel: bool
    recompute: str
    micro_batches: int
    global_batch: int  # sequences per step
    total_bytes_per_gpu: int
    fits: bool
    comm_bytes_per_step: int
    bubble_fraction: float
    compute_s: float  # training FLOPs (with recomputation) ÷ (gpus × dense peak)
    comm_s: float
    tp_comm_s: float  # the tensor-parallel part of comm_s
    step_s: float  # compute_s / (1 − bubble) + comm_s: nothing overlapped

    def to_dict(self) -> dict:
        return asdict(self)


def step_flops(cfg: ModelConfig, seq_len: int, batch: int, recompute: str) -> int:
    """A training step's FLOPs as the modeled step counts them: 3 × forward (full T×T scores),
    plus what recomputation runs again (full: every block's forward; selective: the scores)."""
    flops = count_flops(cfg, seq_len, batch)
    extra = {"none": 0, "full": flops.forward, "selective": flops.by_component["attention_scores"]}
    return flops.training_step + extra[recompute]


def layout_cost(cfg: ModelConfig, layout: Layout, gpu: GPU, seq_len: int, dtype: str = "bf16") -> LayoutCost:
    """One layout's per-GPU memory, communication and modeled step time: the tensor-parallel
    traffic over the link a tp group crosses, the pipeline and data-parallel traffic over the link
    all ``layout.gpus`` span (``hardware.link_bytes_per_s``)."""
    est = parallel_memory(cfg, layout, seq_len, dtype)
    peak = gpu.peak_flops(dtype)
    compute = step_flops(cfg, seq_len, est.global_batch, layout.recompute) / (layout.gpus * peak)
    across = link_bytes_per_s(gpu, layout.gpus)
    tp_comm = est.comm_by_kind["tp"] / link_bytes_per_s(gpu, layout.tp)
    comm = tp_comm + (est.comm_by_kind["pp"] + est.comm_by_kind["dp"]) / across
    total = est.per_gpu["total_bytes"]
    return LayoutCost(
        layout.label(),
        layout.tp,
        layout.pp,
        layout.dp,
        layout.zero,
        layout.sequence_parallel,
        layout.recompute,
        layout.m,
        est.global_batch,
        total,
        total <= gpu.usable_bytes,
        est.comm_bytes_per_step,
        est.bubble_fraction,
        compute,
        comm,
        tp_comm,
        compute / (1 - est.bubble_fraction) + comm,
    )


def search_layouts(
    cfg: ModelConfig,
    gpus: int,
    gpu: GPU | str,
    seq_len: int | None = None,
    global_batch: int | None = None,
    dtype: str = "bf16",
    fitting_only: bool = True,
) -> list[LayoutCost]:
    """The training layouts of ``gpus`` GPUs: TP in 1, 2, 4, 8 (within a scale-up domain; sequence parallel
    with it), PP a divisor of the rest up to n_layers (and MAX_PIPELINE), ZeRO 0–3,
    recomputation none / selective /
    full, one sequence per micro-batch and ``global_batch`` sequences per step (default: one
    per GPU, at least 4·pp per pipeline); cheapest modeled step first."""
    check_count("gpus", gpus, 1_000_000)
    spec = checked_gpu(gpu)
    seq_len = seq_len or cfg.max_seq_len
    rows = []
    for tp in TP_CHOICES:
        if gpus % tp or tp > spec.links.scale_up_domain:
            continue
        for pp in _divisors(gpus // tp, min(cfg.n_layers, MAX_PIPELINE)):
            dp = gpus // (tp * pp)
            batch = global_batch or max(gpus, 4 * pp * dp)
            if batch % dp:
                continue
            for zero in (0, 1, 2, 3) if dp > 1 else (0,):  # ZeRO needs a DP group
                for recompute in ("none", "selective", "full"):
                    layout = Layout(gpus, tp, pp, zero, tp > 1, recompute, 1, batch // dp)
                    try:
                        rows.append(layout_cost(cfg, layout, spec, seq_len, dtype))
                    except AnalysisError:
                        break  # this tp/pp cannot split the model
    if fitting_only:
        rows = [r for r in rows if r.fits]
    return sorted(rows, key=lambda r: (r.step_s, r.total_bytes_per_gpu))


def search_assumptions(gpu: GPU | str) -> str:
    links = checked_gpu(gpu).links
    return (
        f"Modeled step time = FLOPs (with recomputation) at the data sheet's dense peak, "
        f"stretched by the pipeline bubble, plus communication at "
        f"{links.scale_up_bytes_per_s / 1e9:.0f} GB/s a direction within the GPU's scale-up domain "
        f"of {links.scale_up_domain} (tensor parallel; pipeline and data parallel too while N ≤ "
        f"{links.scale_up_domain}) and {links.scale_out_bytes_per_s / 1e9:.0f} GB/s between "
        f"domains (or the slower of the two); nothing overlapped: a bound-like ranking. "
        f"step_s_estimate: the same step with the shares calibrated on public measurements "
        f"(python -m llama_lab validate): the causal FLOPs' matmuls and attention scores and the "
        f"tensor-parallel traffic at their fitted shares, the bubble, the rest of the traffic as modeled; "
        f"step_s_low–step_s_high: the range the training rows' held-out errors give it."
    )


POWERS_OF_TWO = tuple(2**k for k in range(15))  # 1 … 16,384 GPUs


def states_floor_bytes(cfg: ModelConfig) -> int:
    """Weights, gradients and AdamW state of the whole model, 16Ψ (mixed precision 2 + 2 + 12,
    fp32 4 + 4 + 8): what the GPUs must hold between them even fully sharded."""
    return 16 * count_params(cfg).total


def gpus_for_states(cfg: ModelConfig, gpu: GPU | str, factor: int = 2, least: int = 8) -> int:
    """The fewest GPUs (a power of two, at least ``least``) holding ``factor`` × the states:
    a count where some layout likely fits, found without a search."""
    memory = checked_gpu(gpu).usable_bytes
    return next(
        (n for n in POWERS_OF_TWO if n >= least and n * memory >= factor * states_floor_bytes(cfg)),
        POWERS_OF_TWO[-1],
    )


def fewest_gpus(
    cfg: ModelConfig,
    gpu: GPU | str,
    seq_len: int | None = None,
    dtype: str = "bf16",
    serving: bool = False,
    batch: int = 1,
    weights="bf16",
) -> int | None:
    """The fewest GPUs (a power of two) on which some layout fits: for training, one of
    ``search_layouts``'; for ``serving``, a TP × PP split holding ``batch`` sequences of
    ``seq_len``. Starts from what the states need (16Ψ for training, the weights for serving)."""
    spec = checked_gpu(gpu)
    seq_len = seq_len or cfg.max_seq_len
    need = weights_bytes(cfg, weights).total if serving else states_floor_bytes(cfg)
    for n in POWERS_OF_TWO:
        if n * spec.usable_bytes < need:
            continue
        if serving:
            fits = serving_fits(cfg, spec, n, batch, seq_len, weights)
            if fits and fits[0].max_batch_at_seq_len >= batch:
                return n
        elif search_layouts(cfg, n, spec, seq_len, None, dtype):
            return n
    return None
