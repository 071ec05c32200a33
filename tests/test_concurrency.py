"""Issue 6: several browser sessions running experiments at once each get their own results,
and the live runs take turns (one job slot per process) instead of oversubscribing the cores."""
import threading
import traceback
from pathlib import Path

from streamlit.testing.v1 import AppTest

from llama_lab import experiments, ui

from llama_lab.runtime import jobs

PAGE = str(Path(__file__).resolve().parents[1] / "pages" / "3_Gradient_norms.py")
P = "llama_lab.page3."


def open_session(seed: int) -> AppTest:
    """A browser session on the page with its own seed, set up before the runs race (the
    setup runs one after another: Streamlit's test harness registers widgets globally)."""
    at = AppTest.from_file(PAGE, default_timeout=180)
    at.run()
    for name, value in {"n_layers": 2, "seq_len": 16, "batch": 2, "seed": seed}.items():
        at.number_input(key=P + name).set_value(value)
    at.run()
    return at


def session(at: AppTest, seed: int, results: dict, errors: list) -> None:
    try:
        at.button(key=P + "run_grad").click().run()
        assert not at.exception, at.exception
        results[seed] = (at.session_state[ui.KEY_GRADNORMS], {m.label: m.value for m in at.metric})
    except BaseException:             # surfaced by the main thread, with where it was raised
        errors.append(traceback.format_exc())


def test_parallel_sessions_get_their_own_results_and_take_turns(monkeypatch):
    peak, lock = [0], threading.Lock()
    original = experiments.gradnorms

    def watched(*args, **kwargs):
        with lock:
            peak[0] = max(peak[0], jobs.LIMITER.running)
        return original(*args, **kwargs)
    monkeypatch.setattr(experiments, "gradnorms", watched)

    results, errors = {}, []
    threads = [threading.Thread(target=session, args=(open_session(seed), seed, results, errors))
               for seed in (1, 2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors
    assert sorted(results) == [1, 2, 3]
    assert peak[0] == 1                              # never two live runs at once
    assert jobs.LIMITER.running == 0 and jobs.LIMITER.waiting == 0   # no stuck slot

    losses = set()
    for seed, (entry, shown) in results.items():
        direct = original(entry.config, seq_len=16, batch=2, seed=seed)
        # each session holds exactly the result of its own seed ...
        assert entry.result.post.loss == direct.post.loss
        assert entry.result.pre.layer_grad_norm == direct.pre.layer_grad_norm
        # ... and shows it
        assert f"{direct.post.loss:.4f}" in " ".join(str(v) for v in shown.values())
        losses.add(entry.result.post.loss)
    assert len(losses) == 3                          # three different seeds, three results
