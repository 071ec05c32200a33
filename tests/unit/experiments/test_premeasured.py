"""The results shipped with the package (tools/premeasure.py → llama_lab/experiments/
premeasured_data): every default a page shows first is there, labelled with where it ran, and
small cases re-run here reproduce the shipped numbers (the whole defaults in the slow tier)."""

import math
from contextlib import contextmanager

import pytest
import torch

from llama_lab.config import get_preset
from llama_lab.errors import ExperimentError
from llama_lab.experiments import gradnorms_over_seeds, premeasured
from llama_lab.experiments.defaults import GRADIENT_PAGE, default_runs, text
from llama_lab.experiments.depth import depth_sweep
from llama_lab.experiments.inside import trained_inside
from llama_lab.model import build_model
from llama_lab.runtime.devices import cpu_kernels

RTOL = 1e-4  # float32 on another machine's kernels and thread count

RUNS = default_runs()


def of_kind(kind: str) -> list:
    return [run for run in RUNS if run.kind == kind]


def shipped(run):
    entry = premeasured.lookup(run.kind, run.config, run.settings)
    assert entry is not None, f"{run.kind} for {run.config.norm_position} is not shipped"
    return entry


@contextmanager
def on_its_kernels(entry):
    """Run inside as the entry was measured: the same CPU kernels (else the test is skipped,
    naming both: a whole training run's float sums are in another order on another CPU, and a
    chaotic run — Post-LN, a warmup contrast over hundreds of steps — drifts far; the fast tier's
    first steps above still reproduce there), on its thread count."""
    p = entry.provenance
    if p.get("cpu") != cpu_kernels():
        pytest.skip(f"measured on {p.get('cpu', 'an unrecorded CPU')}; this CPU is {cpu_kernels()}")
    threads = torch.get_num_threads()
    torch.set_num_threads(p["threads"])
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def close(a, b) -> bool:
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, float) or isinstance(b, float):
        return (a is None and b is None) or math.isclose(a, b, rel_tol=RTOL, abs_tol=1e-12)
    return a == b


def test_every_default_a_page_shows_first_is_shipped_with_where_it_ran():
    kinds = [run.kind for run in RUNS]
    assert kinds.count("gradnorms") == 2 and kinds.count("depth_sweep") == 2  # LLaMA's = the demo's
    assert kinds.count("warmup") == 1 and kinds.count("inside") == 2
    for run in RUNS:
        entry = shipped(run)
        p = entry.provenance
        assert {"machine", "device", "torch", "python", "llama_lab", "date", "seconds", "flops"} <= p.keys()
        assert p["device"] != "cpu" or p["cpu"] == premeasured.provenance(torch.device("cpu"), 0, 0)["cpu"]
        assert entry.label.startswith("pre-measured by tools/premeasure.py on " + p["date"])
        done = entry.result.steps_run / run.settings["steps"] if run.kind == "inside" else 1
        assert p["flops"] == pytest.approx(run.flops * done)  # a diverged run stopped early
    assert premeasured.shipped_rate() > 1e8  # FLOP/s: what the buttons' expected times use


def test_a_setting_not_shipped_is_not_found():
    run = RUNS[0]
    assert premeasured.lookup(run.kind, run.config, {**run.settings, "batch": 3}) is None
    assert premeasured.lookup(run.kind, run.config.replace(d_model=64), run.settings) is None


def test_results_round_trip_through_the_codec_with_non_finite_floats():
    result = gradnorms_over_seeds(get_preset("debug"), 8, 1, (0,))
    back = premeasured.decode(premeasured.encode(result))
    assert type(back) is type(result) and back.to_dict(by_seed=True) == result.to_dict(by_seed=True)
    for value in (math.inf, -math.inf):
        assert premeasured.decode(premeasured.encode([value])) == [value]
    assert math.isnan(premeasured.decode(premeasured.encode(math.nan)))
    with pytest.raises(ExperimentError, match="not a llama_lab class"):
        premeasured.decode({"__class__": "os:system"})
    with pytest.raises(ExperimentError, match="cannot hold a Tensor"):
        premeasured.encode(torch.zeros(1))


@pytest.mark.parametrize(
    "run", [r for r in RUNS if r.kind == "gradnorms"], ids=lambda r: r.config.norm_position
)
def test_the_shipped_gradient_norms_reproduce_for_the_first_seed(run):
    g = GRADIENT_PAGE
    here = gradnorms_over_seeds(run.config, g["seq_len"], g["batch"], (0,), text(g["data"]), "cpu")
    assert close(here.runs[0].to_dict(), shipped(run).result.runs[0].to_dict())


def test_the_shipped_depth_sweep_reproduces_at_its_two_shallowest_depths():
    g = GRADIENT_PAGE
    run = next(r for r in RUNS if r.kind == "depth_sweep")
    here = depth_sweep(run.config, g["depths"][:2], g["seq_len"], g["batch"], (0,), text(g["data"]), "cpu")
    result = shipped(run).result
    assert close([v[0] for v in here.post_by_seed], [v[0] for v in result.post_by_seed[:2]])
    assert close([v[0] for v in here.pre_by_seed], [v[0] for v in result.pre_by_seed[:2]])


@pytest.mark.parametrize("run", of_kind("inside"), ids=lambda r: r.config.norm_position)
def test_the_shipped_small_copy_loads_and_its_first_steps_reproduce(run):
    entry = shipped(run)
    model = build_model(run.config, device="cpu")
    model.load_state_dict(premeasured.load_weights(entry))  # strict: every tensor, each shape
    # the first two losses do not depend on the run's length (no warmup; the first update at
    # the peak rate), so a two-step run gives the same ones
    _, here = trained_inside(run.config, 2)
    assert close(here.loss, entry.result.loss[:2])
    assert min(entry.result.loss) < entry.result.loss[0] - 1  # it learned


@pytest.mark.slow
@pytest.mark.parametrize(
    "run", [r for r in RUNS if r.kind != "warmup"], ids=lambda r: f"{r.kind}-{r.config.norm_position}"
)
def test_every_shipped_default_reproduces_whole(run):
    """Each default run again as tools/premeasure.py runs it: the same numbers (and, for the
    trained copy, the same weights)."""
    entry = shipped(run)
    with on_its_kernels(entry):
        result = run.work(None)
    if run.kind == "inside":
        model, result = result
        weights = premeasured.load_weights(entry)
        for name, tensor in model.state_dict().items():
            torch.testing.assert_close(tensor, weights[name], rtol=1e-3, atol=1e-5)
        assert close(result.loss, entry.result.loss)
    else:
        assert close(premeasured.encode(result), premeasured.encode(entry.result))


@pytest.mark.slow
def test_the_shipped_warmup_contrast_reproduces_for_its_first_seed():
    """The three arms of seed 0 (a fifth of the shipped contrast: about 40 s on 2 cores)."""
    from llama_lab.experiments import warmup_contrast
    from llama_lab.experiments.defaults import warmup_train_settings
    from llama_lab.experiments.warmup import WARMUP_DEFAULTS as W
    from llama_lab.train.data import load_builtin

    run = of_kind("warmup")[0]
    settings = warmup_train_settings(W["steps"], W["lr"], W["warmup_steps"], "auto")
    with on_its_kernels(shipped(run)):
        here = warmup_contrast(run.config, settings, (0,), load_builtin())
    assert close({arm: finals[:1] for arm, finals in shipped(run).result.finals().items()}, here.finals())
