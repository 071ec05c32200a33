"""Issue 11: stop means stop. A long run in one browser session is stopped — by the Stop button
or a closed tab (Streamlit's request_stop), or by a rerun — and a second session waiting for
the job slot starts within about a second; every long run reports progress at every step, with
the step count and the time left."""

import threading
import time
from pathlib import Path

import pytest
from streamlit.proto.WidgetStates_pb2 import WidgetStates
from streamlit.runtime.scriptrunner import RerunData
from streamlit.testing.v1 import AppTest, local_script_runner

from llama_lab import experiments
from llama_lab.config import PRESETS
from llama_lab.runtime import jobs
from llama_lab.train import TrainSettings
from llama_lab.train.data import random_tokens
from llama_lab.ui import cached
from llama_lab.units import escape_markdown

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "3_Gradient_norms.py")
P = "llama_lab.page3."
# tiny live sizes through the page's URL, so what the page measures on view is tiny too
SMALL = {
    "grad.n_layers": "2",
    "grad.seq_len": "16",
    "grad.batch": "2",
    "grad.seeds": "1",
    "grad.d_model": "32",
}
FREED_WITHIN_S = 1.5  # "within about a second", with room for a loaded CI machine


def long_training_session() -> AppTest:
    """A session set up to train four runs of 2,000 steps over 8 seeds (64,000 steps: on an
    idle machine a minute of work, far beyond the 6 s a test lets it run before its Stop)."""
    at = quick_session()
    at.number_input(key=P + "steps").set_value(2000)
    at.number_input(key=P + "seeds").set_value(8)
    at.run()
    return at


def quick_session() -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.query_params.update(SMALL)
    at.run()
    assert not at.exception
    return at


def measure_again(session: AppTest) -> None:
    """The session's "Measure gradient norms" button, with the shared cache of measurements
    emptied so that the measurement really runs."""
    cached.gradnorms_measured.clear()
    session.button(key=P + "run_gradnorms").click().run(timeout=120)


@pytest.fixture
def runners(monkeypatch):
    """Every script runner AppTest starts, and when a stop or a rerun was asked of it."""
    made, asked = [], {}
    cls = local_script_runner.LocalScriptRunner
    init, stop, rerun = cls.__init__, cls.request_stop, cls.request_rerun

    def tracked_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    def tracked_stop(self):
        asked.setdefault("stop", time.monotonic())
        return stop(self)

    def tracked_rerun(self, data):
        asked.setdefault("rerun", time.monotonic())
        return rerun(self, data)

    monkeypatch.setattr(cls, "__init__", tracked_init)
    monkeypatch.setattr(cls, "request_stop", tracked_stop)
    monkeypatch.setattr(cls, "request_rerun", tracked_rerun)
    return made, asked


def wait_until(condition, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def started_gradnorms(monkeypatch) -> list:
    """Times at which the gradient-norm measurement (the second session's run) starts."""
    starts, original = [], experiments.gradnorms_over_seeds

    def timed(*args, **kwargs):
        starts.append(time.monotonic())
        return original(*args, **kwargs)

    monkeypatch.setattr(experiments, "gradnorms_over_seeds", timed)
    return starts


@pytest.mark.slow
def test_stop_or_a_closed_tab_frees_the_slot_for_a_waiting_session(monkeypatch, runners):
    _, asked = runners
    starts = started_gradnorms(monkeypatch)
    first, second = long_training_session(), quick_session()
    starts.clear()  # their measurements on view
    failures = []

    def run_first():
        try:
            first.button(key=P + "run_train").click().run(timeout=6)  # then: request_stop
        except RuntimeError as exc:  # AppTest's "timed out" after the stop
            failures.append(str(exc))

    thread = threading.Thread(target=run_first)
    thread.start()
    wait_until(lambda: jobs.LIMITER.running == 1)  # the long run holds the slot
    measure_again(second)  # waits, then runs
    thread.join(60)
    assert failures and "timed out" in failures[0]  # it was still running: stopped
    assert not second.exception
    waited = starts[0] - asked["stop"]
    assert 0 <= waited < FREED_WITHIN_S, f"the second session waited {waited:.2f} s after Stop"
    assert second.session_state["llama_lab.experiment.gradnorms"] is not None
    assert jobs.LIMITER.running == 0 and jobs.LIMITER.waiting == 0


@pytest.mark.slow
def test_a_rerun_stops_the_run_and_frees_the_slot(monkeypatch, runners):
    made, _ = runners
    starts = started_gradnorms(monkeypatch)
    first, second = long_training_session(), quick_session()
    made.clear()
    starts.clear()
    errors = []

    def run_first():
        try:
            first.button(key=P + "run_train").click().run(timeout=120)
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    thread = threading.Thread(target=run_first)
    thread.start()
    wait_until(lambda: jobs.LIMITER.running == 1 and made)
    time.sleep(1.0)  # well into the 64,000 steps
    asked_at = time.monotonic()
    made[0].request_rerun(RerunData(widget_states=WidgetStates()))  # the user changed a widget
    wait_until(lambda: jobs.LIMITER.running == 0, timeout_s=FREED_WITHIN_S + 1)
    freed = time.monotonic() - asked_at
    measure_again(second)
    thread.join(60)
    assert not errors and not thread.is_alive()
    assert freed < FREED_WITHIN_S, f"the slot was held {freed:.2f} s after the rerun"
    assert starts and not second.exception
    assert "llama_lab.page3.training" not in first.session_state  # the stopped run kept nothing


@pytest.mark.slow
def test_every_long_run_reports_each_step_with_its_count():
    cfg = PRESETS["debug"]
    seen = []
    comparison = experiments.compare_runs(
        experiments.norm_position_specs(cfg, 1e-3, 2),
        TrainSettings(steps=5, seq_len=16, batch=2),
        data=random_tokens(cfg.vocab_size, 5000),
        progress=lambda f, text: seen.append((f, text)),
    )
    # Post-LN and Pre-LN keep their colours on every page (warmup dashed)
    from llama_lab.experiments.training import run_styles
    from llama_lab.figures.common import ARRANGEMENT_COLORS

    assert list(run_styles(comparison).values()) == [
        (ARRANGEMENT_COLORS["post"], "solid"),
        (ARRANGEMENT_COLORS["post"], "dash"),
        (ARRANGEMENT_COLORS["pre"], "solid"),
        (ARRANGEMENT_COLORS["pre"], "dash"),
    ]
    steps = [text for _, text in seen if ": step " in text]
    assert len(steps) == 4 * 5  # every step of every run
    assert steps[6].startswith("run 2/4 (Post-LN, warmup 2): step 2/5")
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0

    seen.clear()
    experiments.decode_benchmark(
        cfg, (8, 16), new_tokens=4, device="cpu", progress=lambda f, text: seen.append((f, text))
    )
    tokens = [text for _, text in seen if "token " in text]
    assert len(tokens) == 3 * 2 * 4  # every token of every variant/context
    seen.clear()
    experiments.depth_sweep(cfg, (1, 2), seq_len=8, batch=2, progress=lambda f, text: seen.append((f, text)))
    assert any(text.startswith("depth L=2 (2/2): seed 0 (1/1): pre-LN") for _, text in seen)


@pytest.mark.slow
def test_the_progress_bar_shows_elapsed_and_time_left():
    from llama_lab.ui.runs import progress_bar

    class Bar:
        texts = []

        def progress(self, fraction, text):
            self.texts.append(text)

    bar = Bar()
    progress = progress_bar(bar, min_interval_s=0.0)
    time.sleep(1.05)
    progress(0.25, "run 1/4 (Pre-LN): step 50/200, loss 3.1")
    progress(1.0, "done")
    assert bar.texts[0].startswith(escape_markdown("run 1/4 (Pre-LN): step 50/200"))
    assert "1 s elapsed, about 3 s left" in bar.texts[0]
    assert "left" not in bar.texts[-1]
