"""Issue 6: several browser sessions running experiments at once each get their own results,
and the live runs take turns (one job slot per process) instead of oversubscribing the cores."""

import threading
import time
import traceback
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from llama_lab import experiments
from llama_lab.runtime import jobs
from llama_lab.ui import cached, state

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "3_Gradient_norms.py")
P = "llama_lab.page3."


def open_session(seed: int) -> AppTest:
    """A browser session on the page with its own seed, set up before the runs race (the
    setup runs one after another: Streamlit's test harness registers widgets globally)."""
    at = AppTest.from_file(PAGE, default_timeout=180)
    at.query_params.update({**TINY, "grad.seed": str(seed)})
    at.run()
    assert not at.exception
    return at


# tiny live sizes through the page's URL, so what the page measures on view is tiny too
TINY = {
    "grad.n_layers": "2",
    "grad.seq_len": "16",
    "grad.batch": "2",
    "grad.seeds": "1",
    "grad.d_model": "32",
}


def clear_measurements() -> None:
    """Empty the process-wide cache of measurements, so that the pressed buttons really run."""
    for measured in (cached.gradnorms_measured, cached.depth_measured, cached.warmup_measured):
        measured.clear()


def session(at: AppTest, seed: int, results: dict, errors: list) -> None:
    try:
        at.button(key=P + "run_gradnorms").click().run()
        assert not at.exception, at.exception
        results[seed] = (at.session_state[state.KEY_GRADNORMS], {m.label: m.value for m in at.metric})
    except BaseException:  # surfaced by the main thread, with where it was raised
        errors.append(traceback.format_exc())


@pytest.mark.slow
def test_parallel_sessions_get_their_own_results_and_take_turns(monkeypatch):
    peak, lock = [0], threading.Lock()
    original = experiments.gradnorms_over_seeds

    def watched(*args, **kwargs):
        with lock:
            peak[0] = max(peak[0], jobs.LIMITER.running)
        return original(*args, **kwargs)

    monkeypatch.setattr(experiments, "gradnorms_over_seeds", watched)

    results, errors = {}, []
    opened = [open_session(seed) for seed in (1, 2, 3)]
    clear_measurements()
    peak[0] = 0
    threads = [
        threading.Thread(target=session, args=(at, seed, results, errors))
        for at, seed in zip(opened, (1, 2, 3))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors
    assert sorted(results) == [1, 2, 3]
    assert peak[0] == 1  # never two live runs at once
    assert jobs.LIMITER.running == 0 and jobs.LIMITER.waiting == 0  # no stuck slot

    losses = set()
    for seed, (entry, shown) in results.items():
        direct = experiments.gradnorms(
            entry.config, seq_len=16, batch=2, seed=seed, data=cached._text("builtin")
        )
        # each session holds exactly the result of its own seed ...
        assert entry.result.post.loss == direct.post.loss
        assert entry.result.pre.layer_grad_norm == direct.pre.layer_grad_norm
        # ... and shows it
        assert f"{direct.post.loss:.4f}" in " ".join(str(v) for v in shown.values())
        losses.add(entry.result.post.loss)
    assert len(losses) == 3  # three different seeds, three results


ROOT = Path(__file__).resolve().parents[2] / "pages"
P4, P5 = "llama_lab.page4.", "llama_lab.page5."


def _page(name: str, values: dict) -> AppTest:
    at = AppTest.from_file(str(ROOT / name), default_timeout=300)
    if name.startswith("3_"):
        at.query_params.update(TINY)
    at.run()
    for key, value in values.items():
        at.number_input(key=key).set_value(value)
    at.run()
    return at


def _mixed_sessions() -> dict:
    """One session per experiment kind, each with its button to press (set up one by one)."""
    return {
        "gradnorms": (_page("3_Gradient_norms.py", {}), P + "run_gradnorms", None),
        "depth_sweep": (_page("3_Gradient_norms.py", {}), P + "run_depth_sweep", None),
        "training": (_page("3_Gradient_norms.py", {P + "steps": 5}), P + "run_train", None),
        "warmup": (_page("3_Gradient_norms.py", {P + "w_steps": 3}), P + "run_warmup", None),
        "live_pass": (_page("4_Live_pass.py", {P4 + "iters": 1}), P4 + "run_live", None),
        "decode": (_page("4_Live_pass.py", {P4 + "new_tokens": 2}), P4 + "run_decode", None),
        "ablation": (_page("5_Architecture_comparison.py", {}), None, "Train"),
    }


@pytest.mark.slow
def test_parallel_sessions_of_every_kind_take_turns_and_each_keeps_its_result():
    """The load test: six sessions, one per experiment kind, press their buttons at once. At
    most one run holds the machine at any moment, every session ends with its own kind's
    result and no error, and no slot is left held or waited on."""
    sessions = _mixed_sessions()
    clear_measurements()
    peak, stop = [0], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], jobs.LIMITER.running)
            time.sleep(0.002)

    sampler = threading.Thread(target=sample)
    sampler.start()
    errors = []

    def press(kind: str, at: AppTest, key: str | None, label: str | None) -> None:
        try:
            button = at.button(key=key) if key else next(b for b in at.button if b.label == label)
            button.click().run()
            assert not at.exception, at.exception
            assert not at.main.error, [e.value for e in at.main.error]
            assert experiments.experiment_state_key(kind) in at.session_state, kind
        except BaseException:
            errors.append(f"{kind}: {traceback.format_exc()}")

    threads = [threading.Thread(target=press, args=(kind, *spec)) for kind, spec in sessions.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    stop.set()
    sampler.join()
    assert not errors, errors
    assert peak[0] == 1
    assert jobs.LIMITER.running == 0 and jobs.LIMITER.waiting == 0
