"""On the CPU, a training run's steps wait while a quick call (translate, attention, compare) runs in the process."""

from __future__ import annotations

import threading
import time

from helpers import DATA, tiny_cfg

from playground.runtime.foreground import QuickCalls, quick, yield_to_quick_calls
from playground.training import events
from playground.training.trainer import Trainer


def test_waiting_ends_with_the_quick_call_or_after_the_longest_wait():
    calls = QuickCalls()
    assert calls.wait_until_idle() == 0.0
    with calls.running_one():
        threading.Timer(0.3, lambda: None).start()
        assert 0.25 <= calls.wait_until_idle(max_wait=0.3) < 1.0  # a stream of calls cannot stop a run
    ended = threading.Event()

    def one_call():
        with calls.running_one():
            ended.wait(5)

    caller = threading.Thread(target=one_call)
    caller.start()
    time.sleep(0.05)
    threading.Timer(0.3, ended.set).start()
    assert 0.2 <= calls.wait_until_idle(max_wait=5) < 2.0
    caller.join()


def test_no_step_starts_while_a_quick_call_runs(tmp_path, monkeypatch):
    monkeypatch.setattr("playground.runtime.foreground.MAX_WAIT_S", 600.0)  # the cap is the test above's; here: no cap
    trainer = Trainer(tiny_cfg(max_steps=100_000, eval_every=100_000), DATA, tmp_path / "run",
                      between_steps=yield_to_quick_calls)  # as the web app's runs
    step_times: list[float] = []

    def train():
        for event in trainer.run():
            if isinstance(event, events.Step):
                step_times.append(time.perf_counter())

    runner = threading.Thread(target=train)
    runner.start()
    while len(step_times) < 8:
        time.sleep(0.01)
    step = max(b - a for a, b in zip(step_times[-6:], step_times[-5:]))  # the slowest recent step (a busy machine)
    began = time.perf_counter()
    quick(time.sleep)(max(1.0, 4 * step))  # a translate as long as several steps
    ended = time.perf_counter()
    time.sleep(3 * step)
    trainer.stop()
    runner.join(60)
    during = [t for t in step_times if began + 1.5 * step < t < ended]  # the step in flight at `began` may finish
    assert not during, f"{len(during)} steps ran during the quick call ({step:.3f} s a step)"
    assert any(t > ended for t in step_times)  # and the run went on after it
