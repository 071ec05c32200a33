import threading
import time

import pytest

from llama_lab.runtime.jobs import BusyError, JobLimiter


def test_second_run_waits_and_says_so():
    limiter = JobLimiter(1)
    order, waited = [], []
    inside = threading.Event()

    def first():
        with limiter.slot():
            inside.set()
            time.sleep(0.3)
            order.append("first done")

    t = threading.Thread(target=first)
    t.start()
    inside.wait(5)
    with limiter.slot(on_wait=lambda n, s: waited.append((n, s)), poll_s=0.05):
        order.append("second ran")
    t.join()
    assert order == ["first done", "second ran"]
    # told, every poll while it waited, that one run was ahead of it and for how long
    assert len(waited) >= 3 and all(n == 1 for n, _ in waited)
    assert [s for _, s in waited] == sorted(s for _, s in waited) and waited[0][1] < 0.05
    assert limiter.running == 0 and limiter.waiting == 0


def test_a_waiting_run_that_is_stopped_leaves_the_queue():
    # what Streamlit does to a waiting session on rerun / Stop / closed tab: the next page
    # update (on_wait) raises; the run leaves at once and holds nothing
    limiter = JobLimiter(1)
    with limiter.slot():

        def stopped(n, s):
            raise KeyboardInterrupt

        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            with limiter.slot(on_wait=stopped):
                pass
        assert time.monotonic() - start < 0.5
        assert limiter.waiting == 0 and limiter.running == 1
    assert limiter.running == 0


def test_slot_released_when_the_run_is_interrupted():
    limiter = JobLimiter(1)
    with pytest.raises(KeyboardInterrupt):
        with limiter.slot():
            raise KeyboardInterrupt  # what a Streamlit rerun/stop looks like to the block
    with limiter.slot(max_wait_s=0.1):  # free again at once
        pass


def test_waiting_too_long_is_refused_not_hung():
    limiter = JobLimiter(1)
    release = threading.Event()

    def hold():
        with limiter.slot():
            release.wait(5)

    t = threading.Thread(target=hold)
    t.start()
    while limiter.running == 0:
        time.sleep(0.01)
    with pytest.raises(BusyError, match="try again"):
        with limiter.slot(max_wait_s=0.2):
            pass
    release.set()
    t.join()
    assert limiter.waiting == 0


def test_several_slots_run_together():
    limiter = JobLimiter(2)
    peak, lock = [0], threading.Lock()

    def work():
        with limiter.slot():
            with lock:
                peak[0] = max(peak[0], limiter.running)
            time.sleep(0.1)

    threads = [threading.Thread(target=work) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak[0] == 2


def test_streamlit_stop_and_rerun_release_the_slot():
    """What Streamlit raises inside a run when the user reruns or closes the tab."""
    from streamlit.runtime.scriptrunner_utils.exceptions import RerunException, StopException

    limiter = JobLimiter(1)
    for interruption in (StopException(), RerunException(None)):
        with pytest.raises(type(interruption)):
            with limiter.slot():
                raise interruption
        assert limiter.running == 0
    with limiter.slot(max_wait_s=0.1):
        pass
