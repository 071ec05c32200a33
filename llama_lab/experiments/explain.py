"""What the gradient-norm measurements show, in sentences computed from them: each comparison
word ("larger", "grows", "agrees") is chosen by the measured numbers, never written in advance,
so the page and the report say only what this run measured."""

from __future__ import annotations

import math
from typing import Sequence

from ..units import plural, significant
from .depth import DepthSweep
from .gradient_norms import GradNormSeeds

SLOPE_TOLERANCE = 0.15  # a fitted slope within this of the theorem's "agrees" with it
FLAT = 1.1  # a ratio within [1/FLAT, FLAT] is "about the same"


def _x(value: float) -> str:
    return f"×{significant(value, 3)}"


def _n(value: float | None) -> str:
    return significant(math.nan if value is None else value, 3)  # None (no seed finite): "—"


def _values(values: Sequence[float | None]) -> list[float]:
    """A per-block median list with NaN where no seed measured a finite value (None)."""
    return [math.nan if v is None else v for v in values]


def _compare(ratio: float, larger: str = "larger", smaller: str = "smaller") -> str:
    if 1 / FLAT <= ratio <= FLAT:
        return "about the same as"
    return f"{larger} than" if ratio > 1 else f"{smaller} than"


def _towards_input(measured: Sequence[float | None]) -> str:
    """How a per-block list changes from the last block to the first, and where: one step
    holding most of the change (in log terms) is named."""
    if any(v is None for v in measured):
        return "cannot be followed (a block where no seed's value is finite)"
    values = _values(measured)
    first, last = values[0], values[-1]
    ratio = first / last
    if 1 / FLAT <= ratio <= FLAT:
        return f"stays within {round((FLAT - 1) * 100)}% from the last block to the first"
    word = "grows" if ratio > 1 else "shrinks"
    text = f"{word} {_x(ratio if ratio > 1 else 1 / ratio)} from the last block to the first"
    steps = [values[i] / values[i + 1] for i in range(len(values) - 1)]
    i = max(range(len(steps)), key=lambda k: abs(math.log(steps[k])))
    total, largest = math.log(ratio), math.log(steps[i])
    # named only when that step goes the way of the whole change, holds most of it and no
    # more than all of it (the other steps do not undo part of it)
    if len(steps) > 1 and largest * total > 0 and 0.5 * abs(total) < abs(largest) <= abs(total):
        step = steps[i] if steps[i] > 1 else 1 / steps[i]
        text += f", {_x(step)} of it between block {i}'s input and block {i + 1}'s"
    return text


def _seeds(result: GradNormSeeds) -> str:
    n = len(result.seeds)
    return f"median of {n} seeds" if n > 1 else f"seed {result.seeds[0]}"


def explain_profile(result: GradNormSeeds) -> list[str]:
    """The last block's contrast, the direction of the gradient through depth, and the forward
    pass behind them (the residual stream's growth, the branches' size, the final norm)."""
    post, pre = result.post, result.pre
    ratios = result.last_ratio_by_seed()
    ratio = result.last_ratio()
    above = sum(r > 1 for r in ratios)
    n_layers = len(post.ffn_out_grad_norm)
    lines = [
        f"**Last block** ({_seeds(result)}): Post-LN's ‖∇W_down‖ is {_n(post.ffn_out_grad_norm[-1])}"
        f" and Pre-LN's {_n(pre.ffn_out_grad_norm[-1])}; Post-LN's is "
        f"{_compare(ratio)} Pre-LN's (Post/Pre = {_n(ratio)}, the median of the seeds' ratios"
        + (
            f", {_n(min(ratios))} to {_n(max(ratios))} over the seeds; larger in {above} of {len(ratios)}"
            if len(ratios) > 1
            else ""
        )
        + ")."
        + (
            f" Theorem 1 expects a ratio of order √L = {_n(math.sqrt(n_layers))} here."
            if n_layers > 1
            else ""
        ),
        f"**Through depth**, ‖∂L/∂x_l‖ {_towards_input(post.residual_grad_norm)} under Post-LN "
        f"(every later norm's Jacobian is on its path) and "
        f"{_towards_input(pre.residual_grad_norm)} under Pre-LN (an identity path reaches "
        f"every block).",
    ]
    lines.append(_explain_stream(result))
    return lines


def _explain_stream(result: GradNormSeeds) -> str:
    """Why, from the forward pass: a norm divides the gradient through it by the RMS of its
    input, and the last norm before lm_head sees the whole residual stream under Pre-LN but only
    the last block's x + F(x) under Post-LN; their quotient predicts Post/Pre."""
    pre, post = result.pre, result.post
    n_layers = len(pre.residual_rms)
    attn_rms, ffn_rms = _values(pre.attn_out_rms), _values(pre.ffn_out_rms)
    x0, pre_in, post_in = _values(pre.residual_rms)[0], pre.last_norm_input_rms, post.last_norm_input_rms
    growth = pre_in / x0
    branch = sum(a + f for a, f in zip(attn_rms, ffn_rms)) / (2 * n_layers)
    # branches independent of the stream would add their variances: x0² + Σ (a_l² + f_l²)
    added = sum(a * a + f * f for a, f in zip(attn_rms, ffn_rms))
    expected = math.sqrt(x0 * x0 + added) / x0
    measured = result.last_ratio()
    predicted = pre_in / post_in
    blocks = plural(n_layers, "block")
    text = (
        f"**Why**: a norm divides the gradient through it by the RMS of its input. The last "
        f"norm before lm_head sees RMS {_n(post_in)} under Post-LN (the last block's "
        f"x + F(x)) and {_n(pre_in)} under Pre-LN (the whole residual stream: {_n(x0)} at "
        f"block 0's input, {_x(growth)} over {blocks}, its branches adding RMS "
        f"{_n(branch)} each; independent additions would give {_x(expected)}). Their "
        f"quotient {_n(pre_in)} / {_n(post_in)} = {_n(predicted)} predicts Post/Pre; "
        f"measured: {_n(measured)}. "
    )
    if growth >= 1.5:
        text += (
            f"Pre-LN's stream grows through the blocks ({_x(growth)}), as Theorem 1 "
            f"assumes for branches of the stream's own size, and its final norm divides "
            f"the last block's gradient by that larger RMS (the Ratio vs depth tab "
            f"measures how this scales with L). "
        )
    else:
        text += f"Pre-LN's stream barely grows ({_x(growth)}). "
    if measured > FLAT:
        text += (
            "Post-LN renormalises after every block, so its last-layer gradient is the "
            "larger here: the gradient Xiong et al. tie to its need for warmup (the Warmup "
            "tab measures that need)."
        )
    elif measured < 1 / FLAT:
        text += "Pre-LN's last-layer gradient is the larger here"
        text += (
            f": its stream is smaller than Post-LN's normalised one (small embeddings and "
            f"branches), so its final norm multiplies the gradient by about "
            f"{_n(1 / pre_in)}; the scale hides Theorem 1's contrast, which needs "
            f"embeddings and branches of the stream's unit scale (Xavier weights and "
            f"√d-scaled embeddings, as in 2017)."
            if pre_in < post_in
            else "."
        )
    else:
        text += "The two arms' last-layer gradients are about the same here."
    return text


def explain_depth(sweep: DepthSweep) -> list[str]:
    """The fitted slopes against Theorem 1's, and the ratio's growth against √L."""

    def verdict(measured: float, theory: float) -> str:
        gap = measured - theory
        return "agrees with" if abs(gap) <= SLOPE_TOLERANCE else f"is {'above' if gap > 0 else 'below'}"

    lo, hi = sweep.depths[0], sweep.depths[-1]
    growth = sweep.ratio[-1] / sweep.ratio[0]
    return [
        f"**Fitted slopes** of log‖∇W_down‖ against log L over L = {lo} … {hi}: Post-LN "
        f"{sweep.post_slope:+.2f}, which {verdict(sweep.post_slope, 0.0)} Theorem 1's 0; Pre-LN "
        f"{sweep.pre_slope:+.2f}, which {verdict(sweep.pre_slope, -0.5)} its −0.5 "
        f"(a slope within {SLOPE_TOLERANCE} of the theorem's counts as agreeing).",
        f"**The ratio** Post/Pre {'grows' if growth > FLAT else 'does not grow'} with depth: "
        f"{_n(sweep.ratio[0])} at L={lo}, {_n(sweep.ratio[-1])} at L={hi} ({_x(growth)}, against "
        f"√({hi}/{lo}) = {_n(math.sqrt(hi / lo))} for √L); fitted exponent "
        f"{sweep.ratio_slope:+.2f} (√L: +0.50).",
    ]
