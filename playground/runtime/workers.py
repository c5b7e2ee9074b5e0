"""Untrusted work in worker processes with hard limits: a crash, a runaway allocation or a loop ends one request, never
the process that serves everybody.

A `WorkerPool` keeps a few worker processes, each a fresh Python (`python -m playground.runtime.workers MODULE...`,
spawned, not forked: nothing of the server's threads, locks or patched libraries comes along) that imports the work's
modules once and then answers calls over a socket. Each worker:

- may grow by `memory_bytes` beyond what it had when it started (RLIMIT_AS, set in the worker itself): an allocation
  past it fails there (MemoryError, or the native library's abort), not in the web process;
- runs one call at a time, under a wall-clock deadline the parent enforces by killing it (SIGKILL: no loop, native or
  not, outlives it) and starting a fresh one for the next call;
- sends back at most `max_result_bytes` of pickled result;
- keeps what its module globals cache (loaded models) from one call to the next, until it is killed; a killed worker
  is replaced at once, in the background, so the next call finds one ready.

`call` raises WorkStopped (a PlaygroundError: said beside the control) when the worker crashed, ran out of its memory,
passed its deadline or its result was too large, and re-raises a PlaygroundError the work raised as itself.
"""

from __future__ import annotations

import logging
import os
import pickle
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Callable

from playground import limits
from playground.errors import PlaygroundError, is_rust_panic
from playground.runtime.threads import available_cpus

log = logging.getLogger("playground.workers")

POLL_S = 0.2  # how often a waiting caller checks whether its client has gone


class WorkStopped(PlaygroundError):
    """A worker's call was stopped: it crashed, ran out of memory, passed its deadline, or answered too much."""


def _settings() -> dict[str, str]:
    """The operator's PLAYGROUND_* settings as this process sees them now: a worker reads the same limits."""
    return {k: v for k, v in os.environ.items() if k.startswith("PLAYGROUND_")}


def _adopt(settings: dict[str, str]) -> None:
    for key in [k for k in os.environ if k.startswith("PLAYGROUND_") and k not in settings]:
        del os.environ[key]
    os.environ.update(settings)


def _out_of_memory(err: BaseException) -> bool:
    """MemoryError, or PyTorch's allocator failing under the address-space limit."""
    return isinstance(err, MemoryError) or (isinstance(err, RuntimeError) and "can't allocate memory" in str(err))


def _answer(fn: Callable, args: tuple, kwargs: dict) -> tuple:
    """One call's outcome as a tuple that pickles: ("ok", value), ("refused", kind, message), ("memory",) or
    ("failed", what)."""
    try:
        return ("ok", fn(*args, **kwargs))
    except PlaygroundError as err:
        return ("refused", type(err), str(err))
    except BaseException as err:  # noqa: BLE001 - a Rust panic is a BaseException; the worker stays up
        if _out_of_memory(err):
            return ("memory",)
        if not (isinstance(err, Exception) or is_rust_panic(err)):
            raise
        log.exception("unexpected error in a worker")  # the worker's stderr is the server's log
        return ("failed", type(err).__name__)


def serve(conn, memory_bytes: int, max_result_bytes: int, threads: int) -> None:
    """A worker's life: its share of the CPUs, its own address space limited, then calls answered until its parent
    closes the socket."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in the server's terminal is the server's to handle
    if "torch" in sys.modules:  # imported by the work's modules
        sys.modules["torch"].set_num_threads(threads)
    grown = (limits._status_bytes("VmSize") or 0) + memory_bytes
    resource.setrlimit(resource.RLIMIT_AS, (grown, resource.getrlimit(resource.RLIMIT_AS)[1]))
    while True:
        try:
            fn, args, kwargs, settings = conn.recv()
        except (EOFError, OSError):
            return
        _adopt(settings)
        outcome = _answer(fn, args, kwargs)
        try:
            data = pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - a result that does not pickle is the work's bug
            log.exception("a worker's result does not pickle")
            data = pickle.dumps(("failed", "an unpicklable result"))
        if len(data) > max_result_bytes:
            data = pickle.dumps(("too large", len(data)))
        conn.send_bytes(data)


def python_command(module: str, *args: str) -> tuple[list[str], dict[str, str]]:
    """The command line and environment that run `python -m module args...` with this checkout's playground, from any
    working directory: how a worker (and a training process, playground.training.chunked) is started."""
    checkout = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(filter(None, [checkout, os.environ.get("PYTHONPATH")]))
    return [sys.executable, "-m", module, *args], {**os.environ, "PYTHONPATH": path}


@dataclass
class Worker:
    process: subprocess.Popen
    conn: Connection
    calls: int = 0


class WorkerPool:
    """Up to `size` worker processes; `call(fn, ...)` runs fn(*args) in a free one (waiting for one when all are
    busy). fn, its arguments and its result cross by pickle: fn must be a module-level function of a module the
    workers can import (those in `preload` each worker imports when it starts)."""

    def __init__(self, size: int, memory_bytes: int, max_result_bytes: int, preload: list[str] = ()):
        self.size, self.memory_bytes, self.max_result_bytes = size, memory_bytes, max_result_bytes
        self.preload = list(preload)
        self.idle: list[Worker] = []
        self.free = threading.BoundedSemaphore(size)  # callers in work at once
        self.lock = threading.Lock()
        self.started = 0  # workers started so far (replacements included), for tests and logs

    def start(self) -> Worker:
        ours, theirs = socket.socketpair()
        threads = max(1, available_cpus() // self.size)  # the workers share the CPUs
        command, env = python_command(__name__, str(theirs.fileno()), str(self.memory_bytes),
                                      str(self.max_result_bytes), str(threads), *self.preload)
        with theirs:
            process = subprocess.Popen(command, env=env, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL)
        with self.lock:
            self.started += 1
        return Worker(process, Connection(ours.detach()))

    def replace(self) -> None:
        """Start a worker in the background for the next call (one was killed): its imports take a second or two."""
        def ready() -> None:
            worker = self.start()
            self.give_back(worker)
        threading.Thread(target=ready, daemon=True, name="playground-worker-start").start()

    def take(self) -> Worker:
        with self.lock:
            while self.idle:
                worker = self.idle.pop()
                if worker.process.poll() is None:
                    return worker
                worker.conn.close()
        return self.start()

    def give_back(self, worker: Worker) -> None:
        with self.lock:
            if len(self.idle) < self.size:
                self.idle.append(worker)
                return
        worker.conn.close()  # one too many (a replacement and a caller both started one): it ends

    def end(self, worker: Worker) -> None:
        """Kill a worker (a deadline, a client gone, a crash), reap it, and start its replacement."""
        worker.process.kill()
        worker.process.wait()
        worker.conn.close()
        self.replace()

    def call(self, fn: Callable, *args, seconds: float, advice: str = "", gone: Callable[[], bool] | None = None,
             **kwargs):
        """fn(*args, **kwargs) in a worker, stopped after `seconds` of work (or as soon as `gone()` says the client
        has left); `advice` says what to make smaller when it is stopped."""
        with self.free:
            worker = self.take()
            try:
                worker.conn.send((fn, args, kwargs, _settings()))
                data = self.wait(worker, seconds, advice, gone)
            except BaseException:
                self.end(worker)  # whatever went wrong on this side, the worker's state is unknown
                raise
            worker.calls += 1
            self.give_back(worker)
        return self.outcome(pickle.loads(data))

    def wait(self, worker: Worker, seconds: float, advice: str, gone: Callable[[], bool] | None) -> bytes:
        """The worker's answer, read within the deadline; WorkStopped when it dies or passes the deadline."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkStopped(limits.time_limit_message(seconds, advice))
            if worker.conn.poll(min(left, POLL_S)):
                try:
                    return worker.conn.recv_bytes()
                except (EOFError, OSError):
                    raise WorkStopped(self.crash_message(worker)) from None
            if gone is not None and gone():
                raise WorkStopped("The page that asked for this has closed, so the work was stopped.")

    def crash_message(self, worker: Worker) -> str:
        code = worker.process.wait()
        killed = code is not None and code < 0 and -code in signal.valid_signals()
        how = f"signal {signal.Signals(-code).name}" if killed else f"exit code {code}"
        log.warning("a worker died (%s) during a call", how)
        return (f"The work for this request crashed ({how}) and was stopped; the server goes on. This happens when a "
                f"package's files make a native library fail, or when the work needs more memory than one request "
                f"may use here ({self.memory_bytes // 2**20:,} MB; the operator sets PLAYGROUND_WORKER_MB). Check "
                "the package (load it with `python -m playground info`), or send less.")

    def outcome(self, answer: tuple):
        match answer:
            case ("ok", value):
                return value
            case ("refused", kind, message):
                try:
                    error = kind(message)
                except TypeError:  # a subclass with another constructor
                    error = PlaygroundError(message)
                raise error
            case ("memory",):
                raise WorkStopped(f"This request needed more memory than one request may use here "
                                  f"({self.memory_bytes // 2**20:,} MB; the operator sets PLAYGROUND_WORKER_MB) and "
                                  "was stopped; the server goes on. Send less, or pick a smaller model.")
            case ("too large", size):
                raise WorkStopped(f"The answer to this request would be {size / 2**20:,.1f} MB, more than one request "
                                  f"may return here ({self.max_result_bytes // 2**20:,} MB; the operator sets "
                                  "PLAYGROUND_MAX_RESULT_MB). Send less.")
            case ("failed", what):
                raise WorkStopped(f"Something went wrong while computing this ({what}); the details are in the "
                                  "server's log. Try again, or change the settings you just changed.")
        raise WorkStopped("A worker answered something this server does not understand.")

    def close(self) -> None:
        with self.lock:
            idle, self.idle = self.idle, []
        for worker in idle:
            worker.conn.close()  # the worker's recv ends: it returns
            try:
                worker.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                worker.process.kill()
                worker.process.wait()


if __name__ == "__main__":  # a worker: python -m playground.runtime.workers FD MEMORY RESULT THREADS MODULE...
    import importlib

    fd, memory, result, threads, *modules = sys.argv[1:]
    for module in modules:
        importlib.import_module(module)
    serve(Connection(int(fd)), int(memory), int(result), int(threads))
