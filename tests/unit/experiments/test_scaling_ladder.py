"""The shipped scaling ladder: ≥ 3 sizes × ≥ 3 token budgets over ≥ 2 seeds, its approach-3 fit
reproduces its own points, loss falls with size at the largest budget; and a tiny live ladder
yields its points and stops when asked."""

import pytest

from llama_lab.analysis.scaling import ScalingFit
from llama_lab.experiments import scaling_ladder


@pytest.fixture(scope="module")
def ladder():
    return scaling_ladder.shipped()


def test_shape_and_provenance(ladder):
    rows = ladder.result["rows"]
    assert len({r["params"] for r in rows}) >= 3 and len({r["tokens"] for r in rows}) >= 3
    assert all(len(r["val_losses"]) >= 2 for r in rows)
    assert {"machine", "torch", "python", "date", "seconds"} <= set(ladder.provenance)
    assert ladder.provenance["seconds"] <= 12 * 60


def test_fit_reproduces_its_points(ladder):
    """Most points within 0.01 nats; none off by more than 6 % (the smallest model's first
    budgets, which the additive form and Huber's δ = 1e-3 leave the furthest: see the module)."""
    fit = ladder.fit
    rows = ladder.result["rows"]
    residuals = [fit.loss(r["params"], r["tokens"]) - r["val_loss"] for r in rows]
    assert residuals == pytest.approx(ladder.result["residuals"], abs=1e-9)
    assert sorted(abs(x) for x in residuals)[len(rows) // 2] < 0.01
    assert all(abs(x) < 0.06 * r["val_loss"] for x, r in zip(residuals, rows))
    assert fit.alpha > 0 and fit.beta > 0


def test_loss_falls_with_size_at_the_largest_budget(ladder):
    rows = ladder.result["rows"]
    largest = max(r["tokens"] for r in rows)
    losses = [r["val_loss"] for r in sorted(rows, key=lambda r: r["params"]) if r["tokens"] == largest]
    assert losses == sorted(losses, reverse=True)


def test_bootstrap_intervals_are_ordered_and_wide(ladder):
    for name in ("alpha", "beta", "a"):
        low, high = ladder.result["bootstrap"][name]
        assert low < high


def test_live_ladder_yields_points_and_stops():
    settings = scaling_ladder.LadderSettings(
        widths=(16,), seeds=(0,), budgets_steps=(2, 4), batch=2, seq_len=16, eval_batches=1, warmup_steps=0
    )
    events = list(scaling_ladder.iter_ladder(settings))
    points = [e for e in events if e.get("point")]
    assert [p["tokens"] for p in points] == [2 * 32, 4 * 32]
    assert isinstance(ScalingFit(1, 1, 1, 0.1, 0.1).loss(1e3, 1e3), float)
    assert list(scaling_ladder.iter_ladder(settings, stop=lambda: True)) == []
