"""A per-process limit on live experiments, so several browser sessions cannot oversubscribe
the CPU cores or the GPU. Every run holds a slot; a run that finds none free waits (and can say
so) instead of piling on. Slots are released in ``finally``: a run stopped by a Streamlit
rerun, a closed tab or an exception leaves no stuck lock.
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

from ..errors import BusyError

DEFAULT_SLOTS = 1  # one live run at a time per process: a forward/backward uses every core
MAX_WAIT_S = 600.0  # a run waiting longer than this is refused, not queued forever


def _slots_from_env() -> int:
    raw = os.environ.get("LLAMA_LAB_MAX_JOBS", "")
    try:
        value = int(raw)
    except ValueError:
        return DEFAULT_SLOTS
    return max(1, min(value, 64))


class JobLimiter:
    def __init__(self, slots: int):
        self.slots = slots
        self._semaphore = threading.BoundedSemaphore(slots)
        self._lock = threading.Lock()
        self.running = 0
        self.waiting = 0

    @contextmanager
    def slot(
        self,
        on_wait: Callable[[int, float], None] | None = None,
        max_wait_s: float = MAX_WAIT_S,
        poll_s: float = 0.25,
    ) -> Iterator[None]:
        """Hold one slot for the duration of the block. While the run has to wait for another
        one, ``on_wait(n_running, seconds_waited)`` is called every ``poll_s``: the app says so
        there, and a run stopped while it waits (a rerun, Stop, a closed tab) leaves from it."""
        acquired = self._semaphore.acquire(blocking=False)
        if not acquired:
            with self._lock:
                self.waiting += 1
            try:
                start = time.monotonic()
                while not acquired:
                    waited = time.monotonic() - start
                    if waited >= max_wait_s:
                        raise BusyError(
                            f"another run has held the machine for over {max_wait_s:.0f} s; "
                            f"try again when it has finished"
                        )
                    if on_wait is not None:
                        on_wait(self.running, waited)
                    acquired = self._semaphore.acquire(timeout=min(max_wait_s - waited, poll_s))
            finally:
                with self._lock:
                    self.waiting -= 1
        with self._lock:
            self.running += 1
        try:
            yield
        finally:
            with self._lock:
                self.running -= 1
            self._semaphore.release()


LIMITER = JobLimiter(_slots_from_env())
