"""Speculative decoding, live (Leviathan et al. 2023, greedy): a small draft proposes γ tokens
with its own KV cache, the target checks all of them in one forward over its KV cache, keeps
the longest agreeing prefix plus its own next token, and both caches go back to the accepted
length. The output equals the target's own greedy decoding token for token (checked); the
measured acceptance rate α, tokens per target step and speedup stand next to the formula's
(``analysis.speculative``) at the measured cost ratio c. An untrained draft shows the other
side: α near 1/V, and decoding slower than the target alone.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, TypedDict, TypeVar

import pandas as pd
import plotly.graph_objects as go
import torch

from ..analysis.speculative import expected_tokens_per_step, speculation
from ..config import PRESETS, ModelConfig, live_config, require_decoder_only
from ..errors import ExperimentError
from ..figures.common import GROUP_PALETTE, Figure, Table, layout_figure
from ..model import CausalLM, KVCache, build_model
from ..runtime.devices import pick_device
from ..train.data import TokenData, decode_tokens, load_builtin
from ..train.loop import TrainSettings, train
from ..units import Progress, plural, sub_progress
from .registry import ExperimentKind, register


class SpeculativeDefaults(TypedDict):
    target: str
    draft: str
    target_d: int
    target_layers: int
    draft_d: int
    draft_layers: int
    steps: int
    lr: float
    seq_len: int
    batch: int
    prompt_len: int
    gamma: int
    new_tokens: int


# The default pair: the seed demo's recipe, a 4-block target of width 128 and a 1-block draft of
# width 64, each trained briefly on the built-in text (seconds on a CPU).
SPECULATIVE_DEFAULTS = SpeculativeDefaults(
    target="seed-demo",
    draft="seed-demo",
    target_d=128,
    target_layers=4,
    draft_d=64,
    draft_layers=1,
    steps=150,
    lr=3e-3,
    seq_len=64,
    batch=4,
    prompt_len=32,
    gamma=4,
    new_tokens=64,
)
D = SPECULATIVE_DEFAULTS


def pair_configs(target: str, draft: str, max_len: int) -> tuple[ModelConfig, ModelConfig]:
    """The live copies of the two presets' recipes (byte-level vocabulary 256 for both)."""
    for name in (target, draft):
        if name not in PRESETS:
            raise ExperimentError(f"preset {name!r} must be one of {', '.join(PRESETS)}")
        require_decoder_only(PRESETS[name], "speculative decoding")
    return (
        live_config(PRESETS[target], D["target_layers"], D["target_d"], max_len),
        live_config(PRESETS[draft], D["draft_layers"], D["draft_d"], max_len),
    )


def trained(
    cfg: ModelConfig,
    steps: int,
    data: TokenData,
    device: str,
    seed: int = 0,
    progress: Progress | None = None,
) -> CausalLM:
    """``cfg`` trained ``steps`` AdamW steps on ``data`` (0 steps: as initialised)."""
    if steps == 0:
        return build_model(cfg, device=pick_device(device), seed=seed).eval()
    kept: list[CausalLM] = []
    train(
        cfg,
        TrainSettings(
            steps=steps,
            lr=D["lr"],
            seq_len=D["seq_len"],
            batch=D["batch"],
            seed=seed,
            device=device,
            eval_batches=1,
        ),
        data=data,
        keep_model=kept,
        progress=progress,
    )
    return kept[0].eval()


def new_cache(model: CausalLM, length: int) -> KVCache:
    """A one-sequence cache of ``length`` tokens on the model's device, in its dtype."""
    weight = model.model.embed_tokens.weight
    return KVCache(model.cfg, 1, length, device=weight.device, dtype=weight.dtype)


@torch.no_grad()
def greedy(model: CausalLM, prompt: torch.Tensor, new_tokens: int) -> list[int]:
    """The target's own greedy decoding with its KV cache: ``new_tokens`` ids after ``prompt``."""
    cache = new_cache(model, prompt.shape[1] + new_tokens)
    logits = model(prompt, cache=cache)
    out = [int(logits[0, -1].argmax())]
    while len(out) < new_tokens:
        logits = model(torch.tensor([[out[-1]]], device=prompt.device), cache=cache)
        out.append(int(logits[0, -1].argmax()))
    return out


@dataclass
class SpecCounts:
    tokens: list[int]
    target_steps: int = 0  # the prefill and every verification
    drafted: int = 0
    accepted: int = 0
    rejections: int = 0
    verified: int = 0  # tokens the verifications yielded (before the cut at N)
    draft_s: float = 0.0  # wall time in the draft's forwards (argmax included)
    verify_s: float = 0.0  # in the target's prefill and verifications
    total_s: float = 0.0  # the whole call: the rest is the loop's own bookkeeping

    @property
    def tokens_per_verification(self) -> float:
        return self.verified / max(1, self.target_steps - 1)


@torch.no_grad()
def speculative(
    target: CausalLM, draft: CausalLM, prompt: torch.Tensor, new_tokens: int, gamma: int
) -> SpecCounts:
    """Greedy speculative decoding of ``new_tokens`` ids after ``prompt``."""
    clock = time.perf_counter
    start = clock()
    dev, room = prompt.device, prompt.shape[1] + new_tokens + gamma + 1
    t_cache, d_cache = new_cache(target, room), new_cache(draft, room)
    first = int(target(prompt, cache=t_cache)[0, -1].argmax())  # int(): waits for the device
    verified_at = clock()
    draft(prompt, cache=d_cache)[0, -1, 0].item()
    counts = SpecCounts(
        tokens=[first], target_steps=1, verify_s=verified_at - start, draft_s=clock() - verified_at
    )
    pending = [first]  # tokens the draft has not read yet
    while len(counts.tokens) < new_tokens:
        base = t_cache.length  # tokens both caches agree on
        proposals = []
        drafting = clock()
        for _ in range(gamma):
            logits = draft(torch.tensor([pending], device=dev), cache=d_cache)
            pending = [int(logits[0, -1].argmax())]
            proposals.append(pending[0])
        verifying = clock()
        checked = (
            target(torch.tensor([[counts.tokens[-1], *proposals]], device=dev), cache=t_cache)[0]
            .argmax(-1)
            .tolist()
        )  # γ + 1 predictions
        counts.draft_s += verifying - drafting
        counts.verify_s += clock() - verifying
        n = 0
        while n < gamma and proposals[n] == checked[n]:
            n += 1
        counts.target_steps += 1
        counts.drafted += gamma
        counts.accepted += n
        counts.rejections += n < gamma
        counts.verified += n + 1
        counts.tokens += [*proposals[:n], checked[n]]
        t_cache.truncate(base + 1 + n)  # the last token and the accepted proposals
        if n == gamma:  # the draft never read its last proposal
            pending = [proposals[-1], checked[n]]
            d_cache.truncate(base + gamma)
        else:
            pending = [checked[n]]
            d_cache.truncate(base + 1 + n)
    counts.tokens = counts.tokens[:new_tokens]
    counts.total_s = clock() - start
    return counts


_R = TypeVar("_R")


def _timed(fn: Callable[[], _R], repeats: int = 3) -> tuple[_R, float]:
    """``fn()``'s result and its median wall time over ``repeats`` runs (after one warm-up)."""
    result = fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return result, statistics.median(times)


@torch.no_grad()
def forward_time(model: CausalLM, prompt: torch.Tensor, new: int) -> float:
    """Median time of one forward over ``new`` tokens after the cached ``prompt`` (of 20)."""
    cache = new_cache(model, prompt.shape[1] + new)
    model(prompt, cache=cache)
    tokens = prompt[:, -new:]

    def step():
        cache.truncate(prompt.shape[1])
        model(tokens, cache=cache)

    return _timed(step, 20)[1]


@dataclass(frozen=True)
class DraftResult:
    label: str
    measured_alpha: float
    tokens_per_target_step: float
    predicted_tokens_per_step: float
    cost_ratio: float
    predicted_speedup: float  # Leviathan et al.: a verification costs one target step
    verify_cost: float  # measured: a verification of γ + 1 tokens ÷ a one-token step
    predicted_speedup_measured_costs: float  # E / (γ·c + verify_cost)
    measured_speedup: float
    identical_to_target_greedy: bool
    speculative_s: float
    # one timed call split: the draft's forwards, the target's, and the loop's own work
    # (tensors built from the proposals, comparisons, cache truncation, Python)
    draft_share: float
    verify_share: float
    overhead_share: float


@dataclass(frozen=True)
class SpeculativeRun:
    target: dict[str, Any]  # ModelConfig.to_dict()
    draft: dict[str, Any]
    gamma: int
    new_tokens: int
    greedy_s: float
    results: list[DraftResult]  # the trained draft, then the untrained one
    prompt_text: str = ""  # the validation prompt, and what the target decodes after it
    target_text: str = ""

    @property
    def distinct_tokens(self) -> int:
        """Different byte tokens in the target's continuation: a briefly trained byte model
        repeats itself, and a draft agrees easily with a model that repeats itself."""
        return len(set(self.target_text.encode("utf-8")))

    def to_dict(self) -> dict:
        trained_draft = self.results[0]
        return {
            **asdict(trained_draft),
            "gamma": self.gamma,
            "new_tokens": self.new_tokens,
            "greedy_s": self.greedy_s,
            "target": self.target,
            "draft": self.draft,
            "prompt_text": self.prompt_text,
            "target_text": self.target_text,
            "distinct_tokens": self.distinct_tokens,
            "speedup": trained_draft.predicted_speedup,
            "expected_tokens_per_step": trained_draft.predicted_tokens_per_step,
            "drafts": [asdict(r) for r in self.results],
        }

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([asdict(r) for r in self.results])


def _measure(
    label: str,
    target: CausalLM,
    draft: CausalLM,
    prompt: torch.Tensor,
    reference: list[int],
    greedy_s: float,
    gamma: int,
) -> DraftResult:
    counts, spec_s = _timed(lambda: speculative(target, draft, prompt, len(reference), gamma))
    split = speculative(target, draft, prompt, len(reference), gamma)  # warm: the split
    trials = counts.accepted + counts.rejections
    alpha = counts.accepted / trials if trials else 1.0  # accepted of the tokens tried
    one_step = forward_time(target, prompt, 1)
    c = forward_time(draft, prompt, 1) / one_step
    verify = forward_time(target, prompt, gamma + 1) / one_step
    expected = expected_tokens_per_step(alpha, gamma)
    return DraftResult(
        label=label,
        measured_alpha=alpha,
        tokens_per_target_step=counts.tokens_per_verification,
        predicted_tokens_per_step=expected,
        cost_ratio=c,
        predicted_speedup=speculation(alpha, gamma, c).speedup,
        verify_cost=verify,
        predicted_speedup_measured_costs=expected / (gamma * c + verify),
        measured_speedup=greedy_s / spec_s,
        identical_to_target_greedy=counts.tokens == reference,
        speculative_s=spec_s,
        draft_share=split.draft_s / split.total_s,
        verify_share=split.verify_s / split.total_s,
        overhead_share=1 - (split.draft_s + split.verify_s) / split.total_s,
    )


def speculative_run(
    target: str = D["target"],
    draft: str = D["draft"],
    gamma: int = D["gamma"],
    new_tokens: int = D["new_tokens"],
    steps: int = D["steps"],
    device: str = "cpu",
    data: TokenData | None = None,
    progress: Progress | None = None,
) -> SpeculativeRun:
    """Train the pair briefly, decode ``new_tokens`` after a validation prompt greedily with the
    target alone and speculatively with the trained and with an untrained draft."""
    if not 1 <= gamma <= 16 or not 1 <= new_tokens <= 512:
        raise ExperimentError(f"gamma={gamma} must be 1 … 16 and new_tokens={new_tokens} 1 … 512")
    data = data or load_builtin()
    t_cfg, d_cfg = pair_configs(target, draft, max(D["seq_len"], D["prompt_len"] + new_tokens + gamma + 1))
    for cfg in (t_cfg, d_cfg):
        require_decoder_only(cfg, "speculative decoding")
    part = sub_progress(progress, 0.0, 0.6, "training the target")
    target_model = trained(t_cfg, steps, data, device, progress=part)
    draft_model = trained(
        d_cfg, steps, data, device, progress=sub_progress(progress, 0.6, 0.8, "training the draft")
    )
    untrained = trained(d_cfg, 0, data, device, seed=1)
    dev = next(target_model.parameters()).device
    prompt = data.val[: D["prompt_len"]].reshape(1, -1).to(dev)
    if progress:
        progress(0.8, "decoding")
    reference, greedy_s = _timed(lambda: greedy(target_model, prompt, new_tokens))
    results = [
        _measure("trained draft", target_model, draft_model, prompt, reference, greedy_s, gamma),
        _measure("untrained draft", target_model, untrained, prompt, reference, greedy_s, gamma),
    ]
    if progress:
        progress(1.0, "done")
    return SpeculativeRun(
        target=t_cfg.to_dict(),
        draft=d_cfg.to_dict(),
        gamma=gamma,
        new_tokens=new_tokens,
        greedy_s=greedy_s,
        results=results,
        prompt_text=decode_tokens(prompt[0].cpu()),
        target_text=decode_tokens(torch.tensor(reference)),
    )


# ---- figures and tables --------------------------------------------------------------------
def speculative_figure(run: SpeculativeRun) -> go.Figure:
    """Measured against predicted, for the trained and the untrained draft."""
    fig = go.Figure()
    for i, (name, measured, predicted) in enumerate(
        (
            ("tokens per target step", "tokens_per_target_step", "predicted_tokens_per_step"),
            ("speedup", "measured_speedup", "predicted_speedup"),
        )
    ):
        labels = [r.label for r in run.results]
        fig.add_trace(
            go.Bar(
                x=labels,
                y=[getattr(r, measured) for r in run.results],
                name=f"{name}, measured",
                marker_color=GROUP_PALETTE[2 * i],
            )
        )
        fig.add_trace(
            go.Bar(
                x=labels,
                y=[getattr(r, predicted) for r in run.results],
                name=f"{name}, Leviathan et al.",
                marker_color=GROUP_PALETTE[2 * i + 1],
            )
        )
    fig.add_hline(y=1.0, line=dict(color="#7f7f7f", dash="dot"))
    return layout_figure(
        fig,
        f"Speculative decoding, γ={run.gamma}, {plural(run.new_tokens, 'token')}: measured vs predicted",
        height=420,
    )


def tables(result: SpeculativeRun, section: str, config: ModelConfig | None = None) -> list[Table]:
    return [Table("speculative", "Speculative decoding: measured and predicted", section, result.to_frame())]


def figures(result: SpeculativeRun, section: str) -> list[Figure]:
    return [Figure("speculative", "Speculative decoding", section, speculative_figure(result))]


KIND = register(
    ExperimentKind(
        name="speculative",
        title="Speculative decoding (Leviathan et al. 2023)",
        result_type=SpeculativeRun,
        run=speculative_run,
        tables=tables,
        figures=figures,
        panel="speculative",
        order=70,
    )
)
