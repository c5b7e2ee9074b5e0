"""A training run in a process of its own (playground.training.chunked.in_fresh_process, how the Train tab runs
every run off ZeroGPU's GPU): its events stream back as they happen, Stop reaches it, and a run that fails there, a
runaway allocation included, ends with a message while the process that started it goes on."""

from __future__ import annotations

import math

from helpers import DATA, tiny_cfg

from playground.errors import TrainingError
from playground.packages.store import load_package
from playground.training.chunked import ChunkedRun, in_fresh_process
from playground.training.events import Done, Error, Step, StopReason


def run_of(cfg, out):
    return ChunkedRun(cfg, DATA, out, chunk_s=math.inf, run_chunk=in_fresh_process)


def test_a_run_in_its_own_process_streams_its_steps_and_stops_when_asked(tmp_path):
    run = run_of(tiny_cfg(max_steps=100_000, eval_every=100_000), tmp_path / "run")
    seen = []
    for event in run.run():
        seen.append(event)
        if isinstance(event, Step) and event.step == 3:
            run.stop()  # Stop, as the Train tab presses it
    steps = [e.step for e in seen if isinstance(e, Step)]
    assert steps[:3] == [1, 2, 3] and run.history.steps == steps  # the live curve, step by step
    assert isinstance(seen[-1], Done) and seen[-1].reason == StopReason.STOPPED
    assert load_package(tmp_path / "run").model is not None  # saved before it ended


def test_a_run_past_its_memory_ends_with_a_message_and_costs_only_itself(tmp_path, monkeypatch):
    monkeypatch.setenv("PLAYGROUND_RUN_MB", "1")  # the run's process may grow by 1 MB: its first batches exceed it
    try:
        events = list(run_of(tiny_cfg(), tmp_path / "run").run())
    except TrainingError as err:  # its data's preparation (the tokenizer's trainer) or its training process ended
        assert "ended early" in str(err)
    else:
        assert isinstance(events[-1], Error), events[-1]
    monkeypatch.delenv("PLAYGROUND_RUN_MB")
    assert isinstance(list(run_of(tiny_cfg(max_steps=2), tmp_path / "again").run())[-1], Done)  # this process goes on
