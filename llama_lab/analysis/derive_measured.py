"""The derivations of what a run measures, written out as ``derive.Derivation``s: a live pass's
tokens per second, achieved FLOP/s and MFU (and the page's definitions of them), speculative
decoding's speedup measured and predicted (Leviathan et al. 2023), a Post/Pre ratio over seeds,
quantised bytes against fp32."""

from __future__ import annotations

from dataclasses import replace

from .derive import Derivation
from .flops import MFU_CONVENTION
from .speculative import speculation

# a live pass's measured figures, defined (each derivation below writes its numbers)
TOKENS_PER_S = r"\frac{B\,T}{t_\text{step}}"


ACHIEVED_FLOPS = r"\frac{3\,F_\text{fwd}}{t_\text{step}}"


MFU_DENSE = r"\text{MFU} = \frac{F_s}{P_\text{dense}}"


def live_definitions() -> str:
    """The Live pass page's definitions of what it measures, as LaTeX."""
    return (
        rf"\text{{tokens/s}} = {TOKENS_PER_S} \qquad \text{{achieved FLOP/s}}\; F_s = {ACHIEVED_FLOPS}"
        rf" \qquad {MFU_DENSE}"
    )


def mfu(achieved_flops_per_s: float, peak: float, peak_source: str, sparse_quoted: bool = True) -> Derivation:
    """``sparse_quoted``: the peak is a data sheet's dense figure, beside which it quotes a 2:4
    sparse one at twice the rate (not for a peak measured on this machine)."""
    terms = {"F_s": achieved_flops_per_s, "P": peak}
    sparse = Derivation(
        "MFU against the sparse peak",
        r"\text{MFU} = F_s / (2P)",
        "F_s/(2*P)",
        terms,
        achieved_flops_per_s / (2 * peak),
        "data sheets quote 2:4 structured sparsity at twice the dense rate",
        "the sparsity figure: dense matmuls never reach it",
    )
    return Derivation(
        "MFU",
        MFU_DENSE,
        "F_s/P",
        terms,
        achieved_flops_per_s / peak,
        peak_source,
        "the dense peak: what a dense matmul can reach (Chowdhery et al. 2022, PaLM §B)",
        alternatives=(("sparse peak (data sheet's 2:4 figure)", sparse),) if sparse_quoted else (),
    )


def throughput(batch: int, seq_len: int, step_ms: float, tokens_per_s: float) -> Derivation:
    return Derivation(
        "Tokens per second",
        TOKENS_PER_S,
        "B*T/t_step",
        {"B": batch, "T": seq_len, "t_step": step_ms / 1e3},
        tokens_per_s,
        "measured: the median of the timed steps (the warm-up step excluded)",
        "t_step in seconds, forward + backward + AdamW",
        {"t_step": "seconds per training step"},
    )


def achieved_flops(training_flops: float, step_ms: float, achieved: float) -> Derivation:
    return Derivation(
        "Achieved FLOP/s",
        ACHIEVED_FLOPS,
        "F_step/t_step",
        {"F_step": training_flops, "t_step": step_ms / 1e3},
        achieved,
        "the analysis' training-step FLOPs over the measured step time",
        MFU_CONVENTION + "; the optimizer's element-wise work not counted",
        {"F_step": "FLOPs of one training step", "t_step": "seconds per step"},
    )


def speculative_speedup(
    measured: float,
    greedy_s: float,
    speculative_s: float,
    alpha: float,
    gamma: int,
    cost_ratio: float,
    predicted: float,
) -> Derivation:
    """A live run's speedup — the target alone's time over speculative decoding's — and
    Leviathan et al.'s prediction at the measured α and c as the alternative."""
    formula = _speculative("Predicted speedup (Leviathan et al. 2023)", alpha, gamma, cost_ratio, predicted)
    formula = replace(
        formula, meaning={"alpha": "measured acceptance rate", "c": "measured draft step ÷ target step"}
    )
    return Derivation(
        "Measured speedup",
        r"\frac{t_\text{greedy}}{t_\text{speculative}}",
        "t_greedy/t_spec",
        {"t_greedy": greedy_s, "t_spec": speculative_s},
        measured,
        "median wall times of the same decoding, the target alone and with the draft",
        "the same prompt and number of new tokens; the output checked identical",
        {"t_greedy": "seconds, the target alone", "t_spec": "seconds, speculatively"},
        (("Leviathan et al.'s formula at the measured α and c", formula),),
    )


def seed_median_ratio(ratios: list, shown: float, what: str) -> Derivation:
    """A Post/Pre ratio reported over seeds (``shown``): the median of the seeds' own ratios."""
    terms = {f"r_{i}": float(r) for i, r in enumerate(ratios)}
    return Derivation(
        "Post ÷ Pre over seeds",
        r"\operatorname{median}_s \frac{\lVert\nabla W\rVert_"
        r"\text{Post}}{\lVert\nabla W\rVert_\text{Pre}}",
        f"median({', '.join(terms)})",
        terms,
        shown,
        "measured: one forward/backward per arm and seed, the same weights and batch in both "
        "arms (Xiong et al. 2020, Theorem 1 for the expectation)",
        f"{what}; each seed's ratio first, then the median (a ratio of medians would mix seeds)",
        {name: f"seed {i}'s ratio" for i, name in enumerate(terms)},
    )


def quantised_share(measured: int, fp32: int, dtype: str) -> Derivation:
    return Derivation(
        "Bytes vs fp32",
        r"\frac{\text{bytes}_\text{quantised}}{\text{bytes}_\text{fp32}}",
        "bytes_q/bytes_fp32",
        {"bytes_q": measured, "bytes_fp32": fp32},
        measured / fp32,
        "measured: the storage of the live model's tensors (data, scales, kept tensors)",
        f"{dtype} data with its scales; embeddings, lm_head and norms kept in bf16",
    )


def _speculative(
    title: str,
    alpha: float,
    gamma: int,
    cost_ratio: float | None,
    value: float,
    gamma_symbol: str = r"\gamma",
) -> Derivation:
    """Leviathan et al. 2023: a target step's expected tokens E, or (with ``cost_ratio``) its
    speedup E / (γc + 1); E = γ + 1 when every draft is accepted."""
    terms: dict[str, float] = {"alpha": alpha, "gamma": gamma}
    expected = "(1 - alpha**(gamma + 1))/(1 - alpha)" if alpha < 1 else "gamma + 1"
    expression = expected
    if cost_ratio is not None:
        terms["c"] = cost_ratio
        expression = (
            "(1 - alpha**(gamma + 1))/((1 - alpha)*(gamma*c + 1))"
            if alpha < 1
            else "(gamma + 1)/(gamma*c + 1)"
        )
    return Derivation(
        title,
        r"\frac{1 - \alpha^{\gamma+1}}{(1 - \alpha)(\gamma c + 1)}",
        expression,
        terms,
        value,
        "Leviathan et al. 2023, Fast Inference from Transformers via Speculative Decoding, "
        "Theorem 3.8 and Corollary 3.9",
        "a verification of γ + 1 tokens costs one target step",
        {"alpha": "acceptance rate", "c": "a draft step's time ÷ a target step's"},
        symbols={"gamma": gamma_symbol},
    )


def speculative_gains(
    alpha: float, gamma: int, cost_ratio: float
) -> tuple[Derivation, Derivation, Derivation]:
    """The Inference systems page's three figures (``analysis.speculation``): E at γ, the
    speedup at γ and the speedup at the best γ*."""
    s = speculation(alpha, gamma, cost_ratio)  # checks the arguments
    expected = replace(
        _speculative("Expected tokens per target step", alpha, gamma, None, s.expected_tokens_per_step),
        lhs="E",
    )
    at_gamma = replace(_speculative("Speedup", alpha, gamma, cost_ratio, s.speedup), lhs=r"\text{speedup}")
    best = _speculative("Speedup at the best γ", alpha, s.best_gamma, cost_ratio, s.best_speedup, r"\gamma^*")
    best = replace(best, lhs=rf"\text{{speedup}}(\gamma^* = {s.best_gamma})")
    return expected, at_gamma, best
