"""The shipped scaling ladder: an IsoFLOP design (each budget's runs satisfy 6·N·D = C within the
rounding to whole steps), ≥ 3 budgets × ≥ 3 sizes over ≥ 2 seeds, each run's schedule decayed to
its own horizon; approach 2 gives an exponent with an interval, approach 3 reproduces its own
points, loss falls with size at the largest budget up to its valley and at the fixed-data slice's
one large D; and a tiny live ladder yields its points and stops when asked."""

import math

import pytest

from llama_lab.analysis.scaling import ScalingFit, isoflop_exponent, isoflop_minima
from llama_lab.errors import ExperimentError
from llama_lab.experiments import scaling_ladder
from llama_lab.model import build_model


@pytest.fixture(scope="module")
def ladder():
    return scaling_ladder.shipped()


@pytest.fixture(scope="module")
def settings(ladder):
    fields = {k: tuple(map(tuple, v)) if k == "widths" else v for k, v in ladder.settings.items()}
    return scaling_ladder.LadderSettings(**fields)


def budget_rows(ladder):
    """The IsoFLOP design's rows (the fixed-data slice's have no budget)."""
    return [r for r in ladder.result["rows"] if r["design"] == "isoflop"]


def test_shape_and_provenance(ladder):
    rows = budget_rows(ladder)
    assert all(r["budget"] is None for r in ladder.result["rows"] if r["design"] == "tokens")
    budgets = {r["budget"] for r in rows}
    assert len(budgets) >= 3
    assert all(len({r["params"] for r in rows if r["budget"] == c}) >= 3 for c in budgets)
    assert all(len(r["val_losses"]) >= 2 for r in rows)
    low, high = min(budgets), max(budgets)
    assert all(b / a >= 2 - 1e-9 for a, b in zip(sorted(budgets), sorted(budgets)[1:])) and high > low
    assert {"machine", "torch", "python", "date", "seconds", "cpu_seconds"} <= set(ladder.provenance)
    assert ladder.provenance["cpu_seconds"] <= 10 * 60


def test_the_design_is_isoflop(ladder, settings):
    """D = C / (6N) rounded to whole steps: 6·N·D is C within half a step's FLOPs; the recorded
    compute is 6·N·D of the tokens actually trained; each row is one planned run."""
    planned = {(r.budget, r.params): r.steps for r in scaling_ladder.plan(settings)}
    assert len(ladder.result["rows"]) == len(planned)
    for r in budget_rows(ladder):
        half_step = 6 * r["params"] * settings.tokens_per_step / 2
        assert abs(6 * r["params"] * r["tokens"] - r["budget"]) <= half_step
        assert r["compute"] == 6 * r["params"] * r["tokens"]
        assert r["tokens"] == planned[(r["budget"], r["params"])] * settings.tokens_per_step


def test_n_is_the_built_models_total_parameters(ladder, settings):
    """N counts every weight once (the tied embedding included), as the model built on the meta
    device holds them."""
    sizes = {r["width"]: r["params"] for r in ladder.result["rows"]}
    for width, params in sizes.items():
        model = build_model(settings.config(width), device="meta")
        assert params == sum(p.numel() for p in model.parameters())


def test_each_run_decays_to_its_own_horizon(settings):
    for run in scaling_ladder.plan(settings)[:3]:
        train = settings.train_settings(run.seed, run.steps)
        assert train.schedule == "cosine" and train.eval_every == run.steps
        assert train.lr_at(run.steps - 1) == pytest.approx(settings.min_lr_ratio * settings.lr)


def test_approach_2_gives_an_exponent_with_an_interval(ladder):
    result = ladder.result
    rows = budget_rows(ladder)
    minima = isoflop_minima(
        [r["budget"] for r in rows], [r["params"] for r in rows], [r["val_loss"] for r in rows]
    )
    assert minima == result["isoflop"]
    assert all(m["n_opt"] is not None for m in minima)  # every budget has its valley
    a, (low, high) = result["isoflop_a"], result["isoflop_a_interval"]
    assert a == pytest.approx(isoflop_exponent(minima)) and math.isfinite(a)
    assert low < high


def test_approach_3_reproduces_its_own_points(ladder):
    """|ln L̂ − ln L| under 0.05 at every point (the seeds' means)."""
    fit = ladder.fit
    rows = ladder.result["rows"]
    residuals = [math.log(fit.loss(r["params"], r["tokens"])) - math.log(r["val_loss"]) for r in rows]
    assert residuals == pytest.approx(ladder.result["log_residuals"], abs=1e-9)
    assert max(map(abs, residuals)) < 0.05
    assert fit.alpha > 0 and fit.beta > 0
    for name in ("alpha", "beta", "a"):
        low, high = ladder.result["bootstrap"][name]
        assert low < high


def test_loss_falls_with_size_at_the_largest_budget(ladder):
    """At the largest budget the loss falls with size up to the valley's best measured size (and
    the best loss falls as the budget grows)."""
    rows = budget_rows(ladder)
    largest = max(r["budget"] for r in rows)
    losses = [r["val_loss"] for r in sorted(rows, key=lambda r: r["params"]) if r["budget"] == largest]
    best = losses.index(min(losses))
    assert best > 0 and losses[: best + 1] == sorted(losses[: best + 1], reverse=True)
    by_budget = [
        min(r["val_loss"] for r in rows if r["budget"] == c) for c in sorted({r["budget"] for r in rows})
    ]
    assert by_budget == sorted(by_budget, reverse=True)


def test_live_ladder_yields_points_and_stops():
    tiny = scaling_ladder.LadderSettings(
        budgets=(6 * 3560 * 32 * 4.0,),
        widths=((8, 8),),
        seeds=(0,),
        batch=2,
        seq_len=16,
        eval_batches=1,
        tokens_widths=(8,),
        tokens_steps=2,
    )
    events = list(scaling_ladder.iter_ladder(tiny))
    points = [e for e in events if e.get("point")]
    assert [(p["steps"], p["tokens"]) for p in points] == [(4, 4 * 32)] * 2 + [(2, 2 * 32)]
    assert [p["design"] for p in points] == ["isoflop"] * 2 + ["tokens"]
    assert all(p["compute"] == 6 * p["params"] * p["tokens"] for p in points)
    assert isinstance(ScalingFit(1, 1, 1, 0.1, 0.1).loss(1e3, 1e3), float)
    assert list(scaling_ladder.iter_ladder(tiny, stop=lambda: True)) == []
    with pytest.raises(ExperimentError, match="one per budget"):
        scaling_ladder.plan(scaling_ladder.LadderSettings(budgets=(1e9, 2e9), widths=((8,),)))


def test_loss_falls_with_size_at_one_fixed_large_d(ladder, settings):
    """The fixed-data slice: ≥ 3 sizes on the same D, each decayed to that horizon; the loss
    falls with every step up in size (every size has tokens to spare)."""
    rows = scaling_ladder.fixed_data_rows(ladder.result)
    assert len(rows) >= 3 and len({r["tokens"] for r in rows}) == 1
    assert rows[0]["tokens"] == settings.tokens_steps * settings.tokens_per_step
    assert all(len(r["val_losses"]) >= 2 for r in rows)
    losses = [r["val_loss"] for r in rows]
    assert losses == sorted(losses, reverse=True) and len(set(losses)) == len(losses)


def test_the_report_holds_the_ladders_points_the_fixed_slice_too(ladder):
    from llama_lab.report.scaling_part import scaling_part

    tables, figures = scaling_part()
    rows = next(t for t in tables if t.name == "scaling_ladder_rows")
    frame = rows.frame
    assert len(frame) == len(ladder.result["rows"])
    fixed = frame[frame["design"] == "fixed D"]
    assert list(fixed["validation loss"]) == [
        r["val_loss"] for r in scaling_ladder.fixed_data_rows(ladder.result)
    ]
    assert "the loss falls with size" in rows.title
    assert {"scaling_ladder_isoflop", "scaling_ladder"} <= {f.name for f in figures}
