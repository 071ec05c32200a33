"""Scaling laws: Hoffmann et al.'s closed forms against a hand computation and a brute-force search
along the IsoFLOP curve; the approach-3 fit recovers a law it generated; the presets' placement."""

import math

import numpy as np
import pytest

from llama_lab.analysis.params import count_params
from llama_lab.analysis.scaling import (
    HOFFMANN_TABLE_2,
    LEFT_OUT,
    PUBLISHED_FITS,
    TRAINED_MODELS,
    ScalingFit,
    bootstrap_isoflop_exponent,
    fit_approach3,
    fit_parabola,
    get_fit,
    isoflop_exponent,
    isoflop_losses,
    isoflop_minima,
    parabola_minimum,
    placements,
)
from llama_lab.config import get_preset
from llama_lab.errors import AnalysisError


def test_loss_by_hand():
    # Chinchilla, N = 70e9, D = 1.4e12: 1.69 + 406.4/70e9^0.34 + 410.7/1.4e12^0.28
    by_hand = 1.69 + 406.4 / math.exp(0.34 * math.log(70e9)) + 410.7 / math.exp(0.28 * math.log(1.4e12))
    assert get_fit("hoffmann").loss(70e9, 1.4e12) == pytest.approx(by_hand, rel=1e-12)
    assert by_hand == pytest.approx(1.9367, abs=1e-3)  # 0.0837 + 0.1632 over E


@pytest.mark.parametrize("name", list(PUBLISHED_FITS))
@pytest.mark.parametrize("compute", [1e18, 5.76e23, 1e26])
def test_compute_optimal_is_the_isoflop_minimum(name, compute):
    fit = PUBLISHED_FITS[name]
    n_opt, d_opt = fit.compute_optimal(compute)
    assert 6 * n_opt * d_opt == pytest.approx(compute, rel=1e-12)
    sizes = np.exp(np.linspace(math.log(n_opt) - 3, math.log(n_opt) + 3, 30001))  # brute force, ±e³ around
    losses = isoflop_losses(fit, compute, sizes)
    assert sizes[int(np.argmin(losses))] == pytest.approx(n_opt, rel=2e-4)
    assert min(losses) == pytest.approx(fit.loss(n_opt, d_opt), abs=1e-9)


def test_hoffmann_exponents_and_tokens_per_param():
    fit = get_fit("hoffmann")
    assert fit.a == pytest.approx(0.28 / 0.62) and fit.b == pytest.approx(0.34 / 0.62)
    n_opt, d_opt = fit.compute_optimal(5.76e23)  # Gopher's / Chinchilla's budget
    # the printed fit gives far more tokens per parameter than Chinchilla's 20 (Besiroglu et al.)
    assert d_opt / n_opt > 40
    n_b, d_b = get_fit("besiroglu").compute_optimal(5.76e23)
    assert 10 < d_b / n_b < 40


def test_fit_recovers_its_law():
    truth = ScalingFit(1.2, 50.0, 300.0, 0.4, 0.3)
    n, d = np.meshgrid([3e4, 6e4, 1.2e5, 2.4e5], [1e5, 3e5, 1e6, 3e6])
    loss = [truth.loss(a, b) for a, b in zip(n.ravel(), d.ravel())]
    fit = fit_approach3(n.ravel(), d.ravel(), loss, refine=1)
    assert fit.alpha == pytest.approx(0.4, rel=1e-3) and fit.beta == pytest.approx(0.3, rel=1e-3)
    assert fit.E == pytest.approx(1.2, rel=1e-3)


def test_parabola_minimum_by_hand():
    # L = 2·(x − ln 5000)² + 1.5 in x = ln N: c₂ = 2, c₁ = −4·ln 5000, c₀ = 2·ln²5000 + 1.5, so
    # x* = −c₁/(2c₂) = ln 5000 and L_min = c₀ − c₁²/(4c₂) = 1.5
    x0 = math.log(5000)
    log_n = [math.log(n) for n in (1e3, 3e3, 1e4, 3e4)]
    c2, c1, c0 = fit_parabola(log_n, [2 * (x - x0) ** 2 + 1.5 for x in log_n])
    assert (c2, c1, c0) == pytest.approx((2, -4 * x0, 2 * x0**2 + 1.5), rel=1e-9)
    n_opt, loss_min = parabola_minimum(c2, c1, c0)
    assert n_opt == pytest.approx(5000, rel=1e-9) and loss_min == pytest.approx(1.5, rel=1e-9)
    assert parabola_minimum(-1.0, 0.0, 3.0) is None  # opens downwards: no minimum


def test_isoflop_exponent_of_known_minima():
    """Three budgets whose exact parabolas have their minima at N_opt = 10·C^0.5: approach 2 reads
    a = 0.5 back, and resampling points of exact parabolas cannot move it."""
    budgets, sizes, losses = [], [], []
    for compute in (1e10, 4e10, 1.6e11):
        x0 = math.log(10 * compute**0.5)
        for n in np.exp(x0 + np.array([-1.5, -0.5, 0.0, 0.7, 1.5])):
            for _seed in (0, 1):
                budgets.append(compute)
                sizes.append(n)
                losses.append(0.3 * (math.log(n) - x0) ** 2 + 2.0 - 0.1 * math.log10(compute))
    minima = isoflop_minima(budgets, sizes, losses)
    assert [m["n_opt"] for m in minima] == pytest.approx(
        [10 * c**0.5 for c in (1e10, 4e10, 1.6e11)], rel=1e-6
    )
    assert isoflop_exponent(minima) == pytest.approx(0.5, rel=1e-6)
    low, high = bootstrap_isoflop_exponent(budgets, sizes, losses, samples=20)
    assert low == pytest.approx(0.5, rel=1e-6) and high == pytest.approx(0.5, rel=1e-6)


def test_hoffmann_table_2_exponents():
    for row in HOFFMANN_TABLE_2.values():
        assert row.a + row.b == pytest.approx(1.0)
        assert row.a_interval[0] <= row.a_interval[1] and row.source


def test_placements():
    rows = {r["name"]: r for r in placements(get_fit("besiroglu"))}
    assert rows["Llama 3 8B"]["tokens_per_param"] > 1000  # 15T on 8B
    assert rows["Llama 3 8B"]["size_vs_opt"] < 0.2  # far smaller than compute-optimal
    assert rows["Llama 3 8B"]["decode_flops"] < rows["Llama 3 8B"]["decode_flops_opt"] / 5
    assert rows["GPT-3 175B"]["size_vs_opt"] > 1  # larger than compute-optimal: under-trained
    for r in rows.values():
        assert r["loss_opt"] <= r["loss"] + 1e-12


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf")])
def test_refuses_bad_sizes(bad):
    with pytest.raises(AnalysisError, match="positive"):
        get_fit("hoffmann").loss(bad, 1e9)
    with pytest.raises(AnalysisError, match="unknown fit"):
        get_fit("kaplan")


def test_placements_cite_sources_and_place_moes_by_active_parameters():
    assert all(m.source for m in TRAINED_MODELS)
    names = {m.name for m in TRAINED_MODELS}
    assert {"Qwen3 8B", "DeepSeek-V3 (MoE)", "OLMo 2 7B", "Gemma 3 27B", "SmolLM3 3B"} <= names
    assert "gpt-oss" in LEFT_OUT and not any("gpt-oss" in n for n in names)
    rows = {r["name"]: r for r in placements(get_fit("hoffmann"))}
    for model in TRAINED_MODELS:
        if model.preset:  # parameters from the lab's count of its preset, never typed
            counted = count_params(get_preset(model.preset))
            assert rows[model.name]["params"] == counted.active
            assert rows[model.name]["total_params"] == counted.total
            assert rows[model.name]["moe"] == (counted.active != counted.total)
    assert rows["DeepSeek-V3 (MoE)"]["moe"] and not rows["Qwen3 8B"]["moe"]
    assert rows["Qwen3 8B"]["tokens_per_param"] > 4000  # 36T tokens on ~8.2B parameters
