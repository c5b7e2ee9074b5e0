"""Quick calls before training on a shared CPU: a training step waits while a translation (or an attention map, or a
comparison) is being computed in the same process.

On a CPU Space one visitor's run and another's translate share the same few cores; PyTorch's pools are per process,
so both ran at full width and each slowed the other (a translate's p50 went from 0.55 s to 0.77 s on 2 cores).
Fewer threads for runs cannot be had per run: PyTorch's thread count is per OS thread once set, and Gradio steps a
generator handler on whichever worker thread is free. So quick calls are marked (`quick`) and the training loop
calls `yield_to_quick_calls()` before each CPU step: while any quick call is running it waits, at most MAX_WAIT_S a
step, so a stream of translations slows a run down but never stops it. bench/quick_calls.py measures it.

The quick calls run in worker processes and a run in a process of its own (playground.runtime.workers,
playground.training.chunked), so the web process also says it across processes: a file (`quick_calls_file`) exists
while it waits for a quick call, and a run's process, told its name (QUICK_CALLS_ENV), waits while it exists.
"""

from __future__ import annotations

import functools
import inspect
import os
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from playground.settings import env_str

MAX_WAIT_S = 2.0  # the longest one training step waits for quick calls
POLL_S = 0.02  # how often a run's process looks whether the web process's quick calls are done
QUICK_CALLS_ENV = "PLAYGROUND_QUICK_CALLS_FILE"  # set for a run's process by the process that started it


def quick_calls_file() -> Path:
    """The file that exists while this process runs quick calls."""
    return Path(tempfile.gettempdir()) / f"playground-quick-calls-{os.getpid()}"


def wait_while_exists(path: Path, max_wait: float) -> float:
    """Block while `path` exists, at most `max_wait` seconds; the seconds waited."""
    began = time.perf_counter()
    while path.exists() and time.perf_counter() - began < max_wait:
        time.sleep(POLL_S)
    return time.perf_counter() - began


class QuickCalls:
    """How many quick calls are running in this process, and a way to wait until none is."""

    def __init__(self) -> None:
        self.running = 0
        self.changed = threading.Condition()

    @contextmanager
    def running_one(self) -> Iterator[None]:
        with self.changed:
            self.running += 1
            if self.running == 1:
                quick_calls_file().touch()
        try:
            yield
        finally:
            with self.changed:
                self.running -= 1
                if not self.running:
                    quick_calls_file().unlink(missing_ok=True)
                self.changed.notify_all()

    def wait_until_idle(self, max_wait: float | None = None) -> float:
        """Block while quick calls run, at most `max_wait` seconds (MAX_WAIT_S); the seconds waited."""
        with self.changed:
            if not self.running:
                return 0.0
            began = time.perf_counter()
            self.changed.wait_for(lambda: not self.running, MAX_WAIT_S if max_wait is None else max_wait)
            return time.perf_counter() - began


QUICK_CALLS = QuickCalls()


def quick(fn: Callable) -> Callable:
    """Mark a function (or a generator function) as a quick call: training steps in this process wait for it."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def generator(*args, **kwargs):
            with QUICK_CALLS.running_one():
                yield from fn(*args, **kwargs)
        return generator

    @functools.wraps(fn)
    def call(*args, **kwargs):
        with QUICK_CALLS.running_one():
            return fn(*args, **kwargs)
    return call


def yield_to_quick_calls(device_type: str) -> float:
    """Called by the training loop before each step: on the CPU, wait for the quick calls running now, in this
    process or in the web process that started this run's (a GPU run does not compete with them for the cores).
    Returns the seconds waited."""
    if device_type != "cpu":
        return 0.0
    waited = QUICK_CALLS.wait_until_idle()
    elsewhere = env_str(QUICK_CALLS_ENV)
    if elsewhere and waited < MAX_WAIT_S:
        waited += wait_while_exists(Path(elsewhere), MAX_WAIT_S - waited)
    return waited
