"""The worker pool (playground.runtime.workers) on its own: a call that aborts, segfaults, allocates past the worker's
memory limit, loops past its deadline or after its client has gone, or answers too much ends with a clear message,
the worker is replaced, and the pool goes on answering."""

from __future__ import annotations

import os
import time

import pytest
import worker_tasks as tasks
from helpers import REPO

from playground.errors import PackageError
from playground.runtime.memory import ONEDNN_KERNELS_KEPT
from playground.runtime.workers import WorkerPool, WorkStopped

MB = 1024**2


@pytest.fixture(scope="module")
def pool():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", str(REPO / "tests"))  # the workers import the tasks from tests/worker_tasks.py
        workers = WorkerPool(1, memory_bytes=256 * MB, max_result_bytes=1 * MB, preload=["worker_tasks"])
        yield workers
    workers.close()


def test_a_workers_onednn_kernels_are_bounded_as_a_training_runs_are(monkeypatch):
    # the decoding step's weight copies compile a kernel per model shape and row count (core/packed_weights.py)
    monkeypatch.delenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", raising=False)  # the server sets none of its own
    monkeypatch.setenv("PYTHONPATH", str(REPO / "tests"))
    workers = WorkerPool(1, memory_bytes=256 * MB, max_result_bytes=1 * MB, preload=["worker_tasks"], spare=0)
    try:
        assert workers.call(tasks.environment, "ONEDNN_PRIMITIVE_CACHE_CAPACITY", seconds=60) == ONEDNN_KERNELS_KEPT
    finally:
        workers.close()


def test_a_crash_a_runaway_allocation_a_loop_or_a_huge_answer_costs_one_call(pool):
    first = pool.call(tasks.worker_pid, seconds=60)
    assert pool.call(tasks.worker_pid, seconds=60) == first  # one worker answers call after call

    for crash in (tasks.abort_now, tasks.read_address_zero):
        with pytest.raises(WorkStopped, match=r"crashed \(signal SIG(ABRT|SEGV)\) and was stopped; the server goes on"):
            pool.call(crash, seconds=60)
    with pytest.raises(WorkStopped, match=r"needed more memory than one request may use here \(256 MB"):
        pool.call(tasks.allocate, 512 * MB, seconds=60)
    assert pool.call(tasks.allocate, 16 * MB, seconds=60) == 16 * MB  # within the limit: fine

    started = time.monotonic()
    with pytest.raises(WorkStopped, match="longer than the 1 s one request may run.*Send less"):
        pool.call(tasks.spin_forever, seconds=1, advice="Send less.")
    assert time.monotonic() - started < 5  # killed at the deadline, not when the loop ends (never)

    left = time.monotonic() + 1  # the client leaves a second after it asked
    with pytest.raises(WorkStopped, match="The page that asked for this has closed"):
        pool.call(tasks.spin_forever, seconds=60, gone=lambda: time.monotonic() > left)
    assert time.monotonic() - left < 5  # stopped when it left, not at the deadline

    with pytest.raises(WorkStopped, match=r"would be 2\.0 MB, more than one request may return here \(1 MB"):
        pool.call(tasks.bytes_of, 2 * MB, seconds=60)
    with pytest.raises(PackageError, match="^no such tokenizer$"):  # the work's own refusal, as itself
        pool.call(tasks.refuse, "no such tokenizer", seconds=60)

    # each crash, the deadline and the client gone cost their worker; a replacement answers, in a new process
    assert pool.call(tasks.worker_pid, seconds=60) != first
    assert pool.started >= 5  # the first, and one for each of the two crashes, the deadline and the client gone


def test_a_long_call_yields_the_cpus_and_a_kill_finds_a_warm_spare(pool):
    from playground.runtime.workers import LONG_CALL_S, LOWER_NICE

    started_at = os.getpriority(os.PRIO_PROCESS, 0)  # the workers' nice value: this process's
    assert pool.call(tasks.nice_after, LONG_CALL_S + 0.5, seconds=60) == min(19, started_at + LOWER_NICE)
    assert pool.call(tasks.nice_after, 0, seconds=60) == started_at  # the next call's thread starts as the worker

    # both workers (1 + the spare) idle: a replacement of a worker killed above may still be importing PyTorch
    deadline = time.monotonic() + 120
    while pool.ready.qsize() < 2:
        assert time.monotonic() < deadline, "the pool never had its worker and its spare ready"
        time.sleep(0.1)
    idle = {worker.process.pid for worker in list(pool.ready.queue)}
    assert len(idle) == 2
    with pytest.raises(WorkStopped):
        pool.call(tasks.spin_forever, seconds=0.5)
    assert pool.call(tasks.worker_pid, seconds=60) in idle  # the spare answered, not a worker still starting


def test_a_callers_calls_wait_behind_its_own_not_in_front_of_others():
    from concurrent.futures import ThreadPoolExecutor

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", str(REPO / "tests"))
        workers = WorkerPool(2, memory_bytes=256 * MB, max_result_bytes=1 * MB, preload=["worker_tasks"], spare=0)
    try:
        while workers.ready.qsize() < 2:  # both started: a start-up is no part of the wait measured
            time.sleep(0.1)
        with ThreadPoolExecutor(3) as threads:
            started = time.time()
            first, second = [threads.submit(workers.call, tasks.finish_after, 1.5, seconds=60, owner="198.51.100.1")
                             for _ in range(2)]
            while len(workers.admission.line) + sum(workers.admission.at_work.values()) < 2:
                time.sleep(0.01)  # both of the first caller's calls came first (at work or waiting)
            other = threads.submit(workers.call, tasks.finish_after, 1.5, seconds=60, owner="198.51.100.2")
            ends = sorted([first.result() - started, second.result() - started])
            # two workers, but the first caller's second call waits for its first: the other caller's starts at once
            assert other.result() - started < ends[1] - 0.5 and ends[1] >= 3.0
    finally:
        workers.close()
