"""Scaling laws: L(N, D) = E + A/N^α + B/D^β (Hoffmann et al. 2022, approach 3), the published fits,
the compute-optimal model for a budget C = 6·N·D, where the famous models sit against it, and the
fits a ladder of measured (N, D, loss) points gets by approach 3 (Huber on log-loss, L-BFGS from a
grid of starts) and approach 2 (a parabola per IsoFLOP budget).

N is the total parameter count (as Hoffmann et al. count it), D the training tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence, Union

import numpy as np
import torch

from ..config import get_preset
from ..errors import AnalysisError
from .flops import decode_flops
from .params import count_params

Numbers = Union[Sequence[float], np.ndarray]  # sizes, tokens or losses, one per point

FLOPS_PER_PARAM_TOKEN = 6  # C = 6·N·D: 2 FLOPs per weight per token forward, 4 backward (Kaplan et al. 2020)
HUBER_DELTA = 1e-3  # Hoffmann et al. 2022, §3.3 (approach 3)


@dataclass(frozen=True)
class ScalingFit:
    """L(N, D) = E + A/N^α + B/D^β."""

    E: float
    A: float
    B: float
    alpha: float
    beta: float
    source: str = ""

    def loss(self, n_params: float, tokens: float) -> float:
        check_positive(n_params=n_params, tokens=tokens)
        return self.E + self.A / n_params**self.alpha + self.B / tokens**self.beta

    @property
    def a(self) -> float:
        """N_opt ∝ C^a (Hoffmann eq. 4)."""
        return self.beta / (self.alpha + self.beta)

    @property
    def b(self) -> float:
        """D_opt ∝ C^b."""
        return self.alpha / (self.alpha + self.beta)

    @property
    def G(self) -> float:
        return (self.alpha * self.A / (self.beta * self.B)) ** (1 / (self.alpha + self.beta))

    def compute_optimal(self, compute: float) -> tuple[float, float]:
        """(N_opt, D_opt) minimising L on 6·N·D = C: N_opt = G·(C/6)^a, D_opt = G⁻¹·(C/6)^b."""
        check_positive(compute=compute)
        c6 = compute / FLOPS_PER_PARAM_TOKEN
        return self.G * c6**self.a, c6**self.b / self.G

    def to_dict(self) -> dict:
        return {"E": self.E, "A": self.A, "B": self.B, "alpha": self.alpha, "beta": self.beta}


PUBLISHED_FITS: dict[str, ScalingFit] = {
    # Hoffmann et al. 2022, "Training Compute-Optimal Large Language Models", eq. 10 (approach 3),
    # the rounded values printed in the paper body (issue 42 quotes the same figures).
    "hoffmann": ScalingFit(1.69, 406.4, 410.7, 0.34, 0.28, "Hoffmann et al. 2022, eq. 10 (approach 3)"),
    # Besiroglu, Erdil, Barnett, You 2024, "Chinchilla Scaling: A replication attempt"
    # (arXiv 2404.10102v2): their refit of approach 3 on 240 points read off Hoffmann's Fig. 4,
    # L = 1.8172 + 482.01/N^0.3478 + 2085.43/D^0.3658. Figures as quoted from the paper in a stored
    # literature note found with the search tool (the stored arXiv HTML excerpts did not show the
    # table itself). They differ because Hoffmann's L-BFGS stopped early (Huber losses averaged,
    # not summed) and the printed values are rounded; the refit gives ~20 tokens per parameter at
    # Chinchilla's scale, as Chinchilla was trained, where Hoffmann's printed fit gives ~70.
    "besiroglu": ScalingFit(
        1.8172, 482.01, 2085.43, 0.3478, 0.3658, "Besiroglu et al. 2024 (arXiv 2404.10102)"
    ),
}


@dataclass(frozen=True)
class PublishedExponents:
    """A published N_opt ∝ C^a, D_opt ∝ C^b with its 10th–90th percentile interval."""

    source: str
    a: float
    a_interval: tuple[float, float]
    b: float
    b_interval: tuple[float, float]


# Hoffmann et al. 2022, Table 2 (10th and 90th percentiles of a bootstrap in parentheses there),
# as reproduced at https://personal-wiki-ddd.pages.dev/ai-ml/Training-Compute-Optimal-Large-Language-
# Models/ch-03-optimal-scaling ("Approach 2 — IsoFLOP Profiles … N_opt ∝ C^0.49, D_opt ∝ C^0.51")
# and, with the intervals, in stored notes on the paper found with the search tool ("2. IsoFLOP
# profiles | 0.49 (0.462, 0.534) | 0.51 (0.483, 0.529)").
HOFFMANN_TABLE_2: dict[str, PublishedExponents] = {
    "approach 2": PublishedExponents(
        "Hoffmann et al. 2022, Table 2, approach 2 (IsoFLOP profiles)",
        0.49,
        (0.462, 0.534),
        0.51,
        (0.483, 0.529),
    ),
    "approach 3": PublishedExponents(
        "Hoffmann et al. 2022, Table 2, approach 3 (parametric fit)",
        0.46,
        (0.454, 0.455),
        0.54,
        (0.542, 0.543),
    ),
}


def get_fit(name: str) -> ScalingFit:
    try:
        return PUBLISHED_FITS[name]
    except KeyError:
        raise AnalysisError(f"unknown fit {name!r}; known fits: {', '.join(PUBLISHED_FITS)}") from None


def check_positive(**values: float) -> None:
    for name, value in values.items():
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise AnalysisError(f"{name} must be a positive finite number, got {value!r}")


def training_compute(n_params: float, tokens: float) -> float:
    return FLOPS_PER_PARAM_TOKEN * n_params * tokens


def isoflop_losses(fit: ScalingFit, compute: float, n_params: Numbers) -> list[float]:
    """L along the IsoFLOP curve 6·N·D = C at the given model sizes."""
    return [fit.loss(n, compute / (FLOPS_PER_PARAM_TOKEN * n)) for n in n_params]


@dataclass(frozen=True)
class TrainedModel:
    """A published model's size and training tokens (with where the tokens come from)."""

    name: str
    params: float
    tokens: float
    source: str
    preset: str | None = None  # the lab's preset of it: its parameters and decode cost are counted here


TRAINED_MODELS: tuple[TrainedModel, ...] = (
    # Brown et al. 2020 (GPT-3), §2.2: every size trained on 300B tokens (also Hoffmann et al. 2022,
    # Table 1); the paper's own line was not in the stored pages, a stored textbook page
    # (book-ai.org, "The Chinchilla Scaling Laws") quotes 175B on 300B tokens.
    TrainedModel("GPT-3 175B", 175e9, 300e9, "Brown et al. 2020, §2.2; Hoffmann et al. 2022, Table 1"),
    # Hoffmann et al. 2022: Chinchilla, 70B parameters on 1.4T tokens.
    TrainedModel("Chinchilla 70B", 70e9, 1.4e12, "Hoffmann et al. 2022, Table 1"),
    # Touvron et al. 2023 (Llama 2), Table 1, "Llama 1" rows: 7B on 1.0T, 65B on 1.4T tokens.
    TrainedModel("LLaMA-1 7B", 0, 1.0e12, "Llama 2 paper, Table 1 (Llama 1 rows)", "llama-7b"),
    # LLaMA-65B has no preset here: 65.2B parameters (Epoch AI's database entry for it)
    TrainedModel("LLaMA-1 65B", 65.2e9, 1.4e12, "Llama 2 paper, Table 1 (Llama 1 rows)"),
    # Touvron et al. 2023 (Llama 2), Table 1: every size on 2.0T tokens.
    TrainedModel("Llama 2 7B", 0, 2.0e12, "Llama 2 paper, Table 1", "llama-2-7b"),
    TrainedModel("Llama 2 70B", 0, 2.0e12, "Llama 2 paper, Table 1", "llama-2-70b"),
    # Meta's Llama 3 model card: pretrained on "over 15T tokens" (the Llama 3 Herd paper: 15.6T
    # for 405B); 15T taken for 8B and 70B.
    TrainedModel("Llama 3 8B", 0, 15e12, "Llama 3 model card (over 15T tokens)", "llama-3-8b"),
    TrainedModel("Llama 3 70B", 0, 15e12, "Llama 3 model card (over 15T tokens)", "llama-3-70b"),
    # --- today's families (read 2026-12-07 from stored pages, found with the search tool) ---------
    # Qwen3 Technical Report (arXiv 2505.09388), §1: "a large-scale dataset containing approximately
    # 36T tokens" for the whole series; quoted at https://news.han.ihouse.idv.tw/en/article/266 and
    # https://api.emergentmind.com/papers/2505.09388 ("approximately 36 trillion tokens").
    TrainedModel(
        "Qwen3 8B", 0, 36e12, "Qwen3 Technical Report (arXiv 2505.09388), §1: ~36T tokens", "qwen3-8b"
    ),
    TrainedModel(
        "Qwen3 30B-A3B (MoE)",
        0,
        36e12,
        "Qwen3 Technical Report (arXiv 2505.09388), §1: ~36T tokens",
        "qwen3-30b-a3b",
    ),
    # DeepSeek-V3 Technical Report (arXiv 2412.19437), abstract: "We pre-train DeepSeek-V3 on 14.8
    # trillion diverse and high-quality tokens"; stored at https://www.scilynk.com/paper/W4405903187.
    TrainedModel(
        "DeepSeek-V3 (MoE)",
        0,
        14.8e12,
        "DeepSeek-V3 Technical Report (arXiv 2412.19437), abstract: 14.8T",
        "deepseek-v3",
    ),
    # OLMo 2 7B model card (allenai/OLMo-2-1124-7B README.md), the size table: "Training Tokens | 4
    # Trillion"; stored at https://phind.xodi.top/allenai/OLMo-2-1124-7B/resolve/main/README.md.
    TrainedModel(
        "OLMo 2 7B", 0, 4e12, "OLMo 2 7B model card (allenai/OLMo-2-1124-7B): 4 trillion", "olmo-2-7b"
    ),
    # Gemma 3 Technical Report (arXiv 2503.19786), §2.2: "27B model 14T" (1B 2T, 4B 4T, 12B 12T);
    # quoted at https://aisharenet.com/en/gemma-3-jishubaogao and
    # https://www.open-source-ai.tech/models/gemma-3-27b-it ("Pretraining tokens 14.0T").
    TrainedModel(
        "Gemma 3 27B", 0, 14e12, "Gemma 3 Technical Report (arXiv 2503.19786), §2.2: 14T", "gemma-3-27b"
    ),
    # SmolLM3 (Hugging Face blog "SmolLM3: smol, multilingual, long-context reasoner"): "Pretraining
    # Budget ≈ 11.2 Trillion tokens"; quoted at https://learnopencv.com/smollm3-explained.
    TrainedModel("SmolLM3 3B", 0, 11.2e12, "SmolLM3 blog (huggingface.co/blog/smollm3): 11.2T", "smollm3-3b"),
    # Left out: gpt-oss-20b/120b — their model card (arXiv 2508.10925) says only "trillions of text
    # tokens" (as quoted at https://lephongphu.site/?p=726): no count to place them by.
)
LEFT_OUT = {"gpt-oss": "its model card (arXiv 2508.10925) gives no token count, only 'trillions of tokens'"}

MOE_CAVEAT = (
    "Hoffmann et al.'s law is fitted on dense models; a mixture of experts is placed by its active "
    "parameters (the FLOPs per token it pays), which says nothing of what its idle experts add."
)


def model_params(model: TrainedModel) -> float:
    """The parameters the law takes: a preset's active parameters as the lab counts them (its total
    for a dense model; for a mixture of experts the routed top-k plus everything shared, see
    ``MOE_CAVEAT``), else the published size."""
    return float(count_params(get_preset(model.preset)).active) if model.preset else model.params


def total_params(model: TrainedModel) -> float:
    return float(count_params(get_preset(model.preset)).total) if model.preset else model.params


def decode_flops_per_token(n_params: float, model: TrainedModel, context_len: int = 2048) -> float:
    """Decode FLOPs of one token at ``context_len``: the lab's count for the preset, scaled by the
    parameter ratio for another size of the same shape (the weights' matmuls dominate); without a
    preset 2 FLOPs per parameter."""
    if model.preset is None:
        return 2.0 * n_params
    cfg = get_preset(model.preset)
    return decode_flops(cfg, context_len).forward * n_params / model_params(model)


def placement(fit: ScalingFit, model: TrainedModel) -> dict:
    """Where a trained model sits against the compute-optimal model of its own budget."""
    n = model_params(model)
    compute = training_compute(n, model.tokens)
    n_opt, d_opt = fit.compute_optimal(compute)
    return {
        "name": model.name,
        "params": n,
        "total_params": total_params(model),
        "moe": total_params(model) != n,
        "tokens": model.tokens,
        "compute": compute,
        "tokens_per_param": model.tokens / n,
        "loss": fit.loss(n, model.tokens),
        "n_opt": n_opt,
        "d_opt": d_opt,
        "tokens_per_param_opt": d_opt / n_opt,
        "loss_opt": fit.loss(n_opt, d_opt),
        "size_vs_opt": n / n_opt,  # < 1: smaller than compute-optimal (over-trained)
        "decode_flops": decode_flops_per_token(n, model),
        "decode_flops_opt": decode_flops_per_token(n_opt, model),
        "source": model.source,
    }


def placements(fit: ScalingFit) -> list[dict]:
    return [placement(fit, m) for m in TRAINED_MODELS]


# --- fitting measured points --------------------------------------------------------------------


def huber(residual: torch.Tensor, delta: float = HUBER_DELTA) -> torch.Tensor:
    small = residual.abs() <= delta
    return torch.where(small, 0.5 * residual**2, delta * (residual.abs() - 0.5 * delta))


def _log_loss_model(theta: torch.Tensor, log_n: torch.Tensor, log_d: torch.Tensor) -> torch.Tensor:
    """log L = LSE(a − α log N, b − β log D, e) with A = eᵃ, B = eᵇ, E = eᵉ (Hoffmann eq. 9)."""
    a, b, e, alpha, beta = theta.unbind(-1)
    model_term = a[..., None] - alpha[..., None] * log_n
    data_term = b[..., None] - beta[..., None] * log_d
    terms = torch.stack([model_term, data_term, e[..., None].expand_as(model_term)])
    return torch.logsumexp(terms, dim=0)


EXPONENT_GRID = np.linspace(0.05, 1.5, 59)  # the starts' α and β


def grid_starts(log_n: np.ndarray, log_d: np.ndarray, losses: np.ndarray, count: int) -> list[list[float]]:
    """The ``count`` best starts (a, b, e, α, β) of a grid over α and β: for each pair E, A and B
    are linear (L = E + A·N^-α + B·D^-β), solved by least squares on relative error; the pairs
    are ranked by the Huber objective on log-loss."""
    alpha, beta = (g.ravel() for g in np.meshgrid(EXPONENT_GRID, EXPONENT_GRID))
    x = np.stack(
        [np.ones((len(alpha), len(losses))), np.exp(-alpha[:, None] * log_n), np.exp(-beta[:, None] * log_d)],
        -1,
    )
    x = x / losses[None, :, None]  # rows weighted by 1/L: relative error ≈ log-loss residual
    coef = np.linalg.solve(
        x.transpose(0, 2, 1) @ x, x.transpose(0, 2, 1) @ np.ones((len(alpha), len(losses), 1))
    )[..., 0]
    e, a, b = (np.log(np.clip(coef[:, i], 1e-6, None)) for i in range(3))
    theta = torch.tensor(np.stack([a, b, e, alpha, beta], -1))
    objective = huber(
        _log_loss_model(theta, torch.tensor(log_n), torch.tensor(log_d)) - torch.tensor(np.log(losses))
    ).sum(-1)
    return theta[objective.argsort()[:count]].tolist()


def refine_lbfgs(objective, start: torch.Tensor) -> torch.Tensor:
    """L-BFGS (strong Wolfe line search) from ``start``."""
    theta = start.clone().requires_grad_(True)
    optimizer = torch.optim.LBFGS(
        [theta], max_iter=100, tolerance_grad=1e-10, tolerance_change=1e-14, line_search_fn="strong_wolfe"
    )

    def closure():
        optimizer.zero_grad()
        value = objective(theta)
        value.backward()
        return value

    optimizer.step(closure)
    return theta.detach()


def fit_approach3(n_params: Numbers, tokens: Numbers, losses: Numbers, refine: int = 3) -> ScalingFit:
    """Minimise Σ Huber_δ(log L̂ − log L) over (a, b, e, α, β) by L-BFGS from the best starts of a
    grid (Hoffmann et al.'s approach 3; the sum, not the mean: Besiroglu et al.)."""
    if not (len(n_params) == len(tokens) == len(losses)) or len(losses) < 5:
        raise AnalysisError(f"approach 3 needs ≥ 5 points (it fits 5 parameters), got {len(losses)}")
    log_n, log_d, log_l = (np.log(np.asarray(v, dtype=float)) for v in (n_params, tokens, losses))
    tn, td, tl = (torch.tensor(v) for v in (log_n, log_d, log_l))
    best, best_value = None, math.inf

    def objective(theta: torch.Tensor) -> torch.Tensor:  # the sum, not the mean (Besiroglu et al.)
        return huber(_log_loss_model(theta, tn, td) - tl).sum()

    for start in grid_starts(log_n, log_d, np.exp(log_l), refine):
        theta = refine_lbfgs(objective, torch.tensor(start, dtype=torch.float64))
        with torch.no_grad():
            value = float(objective(theta))
        if math.isfinite(value) and value < best_value:
            best, best_value = theta, value
    if best is None:
        raise AnalysisError("approach 3 found no finite fit")
    a, b, e, alpha, beta = best.tolist()
    return ScalingFit(math.exp(e), math.exp(a), math.exp(b), alpha, beta, "approach 3 fit")


def bootstrap_exponents(
    n_params: Sequence[float],
    tokens: Sequence[float],
    losses: Sequence[float],
    samples: int = 50,
    seed: int = 0,
) -> dict:
    """α, β and a = β/(α+β) refitted on points drawn with replacement: their 10th and 90th percentiles."""
    rng = np.random.default_rng(seed)
    n, d, loss = map(np.asarray, (n_params, tokens, losses))
    draws: dict[str, list[float]] = {"alpha": [], "beta": [], "a": []}
    for _ in range(samples):
        pick = rng.integers(0, len(loss), len(loss))
        if len(set(zip(n[pick], d[pick]))) < 5:
            continue
        fit = fit_approach3(n[pick], d[pick], loss[pick], refine=1)
        draws["alpha"].append(fit.alpha)
        draws["beta"].append(fit.beta)
        draws["a"].append(fit.a)
    return {k: [float(np.percentile(v, 10)), float(np.percentile(v, 90))] for k, v in draws.items()}


def fit_parabola(log_n: Numbers, losses: Numbers) -> tuple[float, float, float]:
    """Approach 2's curve for one budget: L ≈ c₂·x² + c₁·x + c₀ in x = ln N, by least squares."""
    c2, c1, c0 = np.polyfit(np.asarray(log_n, dtype=float), np.asarray(losses, dtype=float), 2)
    return float(c2), float(c1), float(c0)


def parabola_minimum(c2: float, c1: float, c0: float) -> tuple[float, float] | None:
    """(N_opt, L_min) of L = c₂·x² + c₁·x + c₀, x = ln N: dL/dx = 0 at x* = −c₁ / (2c₂), so
    N_opt = exp(x*) and L_min = c₀ − c₁² / (4c₂). None when the parabola opens downwards (c₂ ≤ 0)."""
    if c2 <= 0:
        return None
    return math.exp(-c1 / (2 * c2)), c0 - c1**2 / (4 * c2)


def isoflop_minima(budgets: Numbers, n_params: Numbers, losses: Numbers) -> list[dict]:
    """Approach 2 (Hoffmann et al. §3.2): the points grouped by their IsoFLOP budget (one budget
    per point, 6·N·D ≈ C), a parabola in ln N through each budget's losses, and its minimum
    N_opt (None where the parabola opens downwards); budgets with fewer than 3 sizes are left out."""
    rows = []
    for compute in sorted(set(budgets)):
        mine = [(n, loss) for c, n, loss in zip(budgets, n_params, losses) if c == compute]
        if len({n for n, _ in mine}) < 3:
            continue
        coefficients = fit_parabola([math.log(n) for n, _ in mine], [loss for _, loss in mine])
        minimum = parabola_minimum(*coefficients)
        rows.append(
            {
                "compute": float(compute),
                "params": [float(n) for n, _ in mine],
                "loss": [float(loss) for _, loss in mine],
                "parabola": list(coefficients),  # (c₂, c₁, c₀) in ln N
                "n_opt": None if minimum is None else minimum[0],
                "loss_opt": None if minimum is None else minimum[1],
            }
        )
    return rows


def isoflop_exponent(minima: Sequence[dict]) -> float | None:
    """a in N_opt ∝ C^a through the budgets' parabola minima (None below two minima)."""
    found = [m for m in minima if m["n_opt"] is not None]
    return power_law_exponent([m["compute"] for m in found], [m["n_opt"] for m in found])


def bootstrap_isoflop_exponent(
    budgets: Numbers, n_params: Numbers, losses: Numbers, samples: int = 200, seed: int = 0
) -> list[float]:
    """Approach 2's a refitted on points drawn with replacement within each budget (each seed's
    point is one point): its 10th and 90th percentiles. A draw with a budget left without a
    minimum (fewer than 3 sizes, or a parabola opening downwards) is dropped."""
    rng = np.random.default_rng(seed)
    budgets, n_params, losses = (np.asarray(v, dtype=float) for v in (budgets, n_params, losses))
    groups = [np.flatnonzero(budgets == c) for c in np.unique(budgets)]
    draws: list[float] = []
    for _ in range(samples):
        pick = np.concatenate([rng.choice(g, len(g)) for g in groups])
        minima = isoflop_minima(budgets[pick], n_params[pick], losses[pick])
        a = isoflop_exponent(minima)
        if a is not None and len(minima) == len(groups) and all(m["n_opt"] is not None for m in minima):
            draws.append(a)
    if not draws:
        raise AnalysisError("approach 2's bootstrap found no draw with a minimum at every budget")
    return [float(np.percentile(draws, 10)), float(np.percentile(draws, 90))]


def power_law_exponent(computes: Sequence[float], n_opts: Sequence[float]) -> float | None:
    """a in N_opt ∝ C^a, least squares in log–log (None below two points)."""
    if len(n_opts) < 2:
        return None
    return float(np.polyfit(np.log(computes), np.log(n_opts), 1)[0])
