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


def test_the_trainer_calls_its_between_steps_hook_before_every_step(tmp_path):
    seen: list[str] = []
    trainer = Trainer(tiny_cfg(max_steps=5, eval_every=100), DATA, tmp_path / "run",
                      between_steps=lambda device_type: seen.append(f"wait on {device_type}"))
    for event in trainer.run():
        if isinstance(event, events.Step):
            seen.append("step")
    assert seen == ["wait on cpu", "step"] * 5


def test_the_web_apps_hook_holds_a_cpu_step_until_the_quick_call_ends(monkeypatch):
    monkeypatch.setattr("playground.runtime.foreground.MAX_WAIT_S", 600.0)  # no cap: only the call's end releases it
    release, started = threading.Event(), threading.Event()

    def translate():  # a quick call that lasts until the test lets it end
        started.set()
        release.wait(60)

    caller = threading.Thread(target=quick(translate))
    caller.start()
    started.wait(60)
    step = threading.Thread(target=yield_to_quick_calls, args=("cpu",))  # what the run calls before a step
    step.start()
    step.join(0.5)
    assert step.is_alive()  # still waiting: the call runs
    assert yield_to_quick_calls("cuda") == 0.0  # a GPU step does not compete for the cores: it goes on
    release.set()
    step.join(60)
    caller.join(60)
    assert not step.is_alive()  # the call ended, the step went on


def test_a_run_in_another_process_waits_while_the_web_process_runs_a_quick_call(monkeypatch):
    from playground.runtime.foreground import QUICK_CALLS_ENV, quick_calls_file

    calls = QuickCalls()
    monkeypatch.setenv(QUICK_CALLS_ENV, str(quick_calls_file()))  # as in_fresh_process tells a run's process
    assert yield_to_quick_calls("cpu") < 0.1 and not quick_calls_file().exists()
    with calls.running_one():
        assert quick_calls_file().exists()
        threading.Timer(0.3, lambda: quick_calls_file().unlink()).start()  # the call ends
        assert 0.25 <= yield_to_quick_calls("cpu") < 1.9  # the QuickCalls of this process are not the ones waited
    assert not quick_calls_file().exists() and yield_to_quick_calls("cuda") == 0.0
