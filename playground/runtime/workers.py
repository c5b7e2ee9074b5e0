"""Untrusted work in worker processes with hard limits: a crash, a runaway allocation or a loop ends one request, never
the process that serves everybody.

A `WorkerPool` keeps a few worker processes, each a fresh Python (`python -m playground.runtime.workers MODULE...`,
spawned, not forked: nothing of the server's threads, locks or patched libraries comes along) that imports the work's
modules once and then answers calls over a socket. Each worker:

- may grow by `memory_bytes` beyond what it had when it started (RLIMIT_AS, set in the worker itself): an allocation
  past it fails there (MemoryError, or the native library's abort), not in the web process;
- runs one call at a time, under a wall-clock deadline the parent enforces by killing it (SIGKILL: no loop, native or
  not, outlives it) and starting a fresh one for the next call;
- runs each call in a thread of its own, lowered in CPU priority once it has run LONG_CALL_S (its nice value + 10): a
  long call goes on, but a fresh short one in another worker gets the cores first;
- sends back at most `max_result_bytes` of pickled result;
- keeps what its module globals cache (loaded models) from one call to the next, until it is killed; a killed worker
  is replaced at once, in the background, and the pool keeps one worker more than may work at once (`spare`), so
  the next call finds one ready rather than waiting for a start-up.

Which call works when is decided in one place, `Admission`: a few workers at work at once, one per client address,
in turn across addresses, and a worker kept for short calls while long ones hold the others.

`call` raises WorkStopped (a PlaygroundError: said beside the control) when it was refused a turn, the worker
crashed, ran out of its memory, passed its deadline or its result was too large, and re-raises a PlaygroundError the
work raised as itself.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import queue
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
from playground.runtime.memory import ONEDNN_KERNELS_KEPT
from playground.runtime.threads import available_cpus

log = logging.getLogger("playground.workers")

POLL_S = 0.2  # how often a waiting caller checks whether its client has gone
# calls waiting for a worker, all owners together: each holds one of Gradio's 40 job threads (queueing.py's
# max_thread_count), so a few networks' waiting calls must not take them all from pickers, uploads and runs
MAX_LINE = 24
START_S = 120  # the longest a new worker may take to import its modules (seconds on a busy 2-core machine)
RETRY_S = 5  # between tries to start a worker that could not start
READY = b"ready"  # what a worker says once it has imported its modules: a call's deadline starts after that
LONG_CALL_S = 1.0  # a call that has run this long yields the CPUs to fresh ones (a one-sentence translate: 0.15 s)
LOWER_NICE = 10  # what its threads' nice value grows by then: a thread 10 below another gets ~9 times its share
SLOW_FOR_S = 60  # after a call that ran past LONG_CALL_S, its owner's calls leave the reserved worker to others


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


def _threads() -> set[int]:
    return {int(tid) for tid in os.listdir("/proc/self/task")} if os.path.isdir("/proc/self/task") else set()


def _answer_yielding(fn: Callable, args: tuple, kwargs: dict) -> tuple:
    """_answer in a thread of its own; past LONG_CALL_S the threads this call started (its own, and the pools of
    the libraries it called for the first time) are lowered by LOWER_NICE. Linux keeps a nice value per thread and
    an unprivileged process cannot raise one back: the worker's main thread stays as it was, and so does the next
    call's thread, which it starts."""
    before, outcome = _threads(), []
    thread = threading.Thread(target=lambda: outcome.append(_answer(fn, args, kwargs)), name="playground-call")
    thread.start()
    thread.join(LONG_CALL_S)
    if thread.is_alive():
        for tid in _threads() - before:
            with contextlib.suppress(OSError):  # a thread that has just ended
                os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + LOWER_NICE))
        thread.join()
    return outcome[0] if outcome else ("failed", "an exception that ended the call's thread")


def limit_growth(memory_bytes: int) -> None:
    """Let this process allocate at most `memory_bytes` more than it has mapped now (RLIMIT_AS; never above a hard
    limit it was started under): past it an allocation fails here, in this process only."""
    grown = (limits._status_bytes("VmSize") or 0) + memory_bytes
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (grown if hard == resource.RLIM_INFINITY else min(grown, hard), hard))


def serve(conn, memory_bytes: int, max_result_bytes: int, threads: int, warm_up: str = "-") -> None:
    """A worker's life: its share of the CPUs, warmed up ("module:function", "-" for none), its own address space
    limited, then calls answered until its parent closes the socket."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in the server's terminal is the server's to handle
    if "torch" in sys.modules:  # imported by the work's modules
        sys.modules["torch"].set_num_threads(threads)
    if warm_up != "-":
        module, name = warm_up.split(":")
        try:
            getattr(sys.modules[module], name)()
        except Exception:  # noqa: BLE001 - a worker that could not warm up still works, only its first call is slower
            log.exception("a worker's warm-up failed")
    limit_growth(memory_bytes)
    conn.send_bytes(READY)
    while True:
        try:
            fn, args, kwargs, settings = conn.recv()
        except (EOFError, OSError):
            return
        _adopt(settings)
        outcome = _answer_yielding(fn, args, kwargs)
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
    # a worker meets many models' shapes, and the decoding step's weight copies have oneDNN compile a kernel for each
    # shape and row count: bounded as a training run's are (runtime.memory.keep_allocator_compact)
    kernels = os.environ.get("ONEDNN_PRIMITIVE_CACHE_CAPACITY", ONEDNN_KERNELS_KEPT)
    return [sys.executable, "-m", module, *args], {**os.environ, "PYTHONPATH": path,
                                                    "ONEDNN_PRIMITIVE_CACHE_CAPACITY": kernels}


def too_many_calls(held: int) -> str:
    """The refusal of a call whose address has `held` calls at the workers already, the most it may have."""
    return (f"Your network has {held} requests at this server's workers already (at work or waiting), the most one "
            "address may have; this one was not started. Try again when they have been answered (the operator sets "
            "PLAYGROUND_MAX_WAITING_CALLS).")


@dataclass(eq=False)
class Turn:
    """One call waiting for a worker, or at work."""

    owner: str  # a client's address; "" for nobody's
    since: float  # when it began to wait: its place in line
    granted: bool = False


class Admission:
    """Which waiting call works next, the one place where quick calls wait (the web UI's events do not: they have no
    concurrency limit of their own, playground.ui.handlers.IN_WORKERS). At most `size` calls work at once, plus
    `reserve` more (the pool's spare worker) for an owner none of whose calls ran past LONG_CALL_S within the last
    SLOW_FOR_S: while long calls hold the workers, a visitor's short call still starts at once. Each owner has one
    call at work and at most `waiting` more waiting; one more is refused at once rather than held (held, it would
    hold one of Gradio's threads). Among owners, round-robin: an owner's next call waits from when its last one
    ended, behind the calls of other owners that waited meanwhile. Calls of the owner "" (nobody's) are bounded by
    `size` alone."""

    def __init__(self, size: int, reserve: int, waiting: int):
        self.size, self.reserve, self.waiting = size, reserve, waiting
        self.changed = threading.Condition()
        self.line: list[Turn] = []  # waiting, in the order they came
        self.at_work: dict[str, int] = {}  # owner -> calls at work
        self.back_of_line: dict[str, float] = {}  # owner with calls waiting -> when its last call ended
        self.slow_until: dict[str, float] = {}  # owner -> until when it may not take a reserved worker

    @contextlib.contextmanager
    def turn(self, owner: str, gone: Callable[[], bool] | None):
        """Wait for the call's turn (WorkStopped: refused, its client gone, or no turn within START_S), then hold
        it while the block runs."""
        turn = self.enter(owner)
        try:
            self.wait(turn, gone)
        except BaseException:
            with self.changed:
                if turn.granted:
                    self.leave(turn, 0.0)
                else:
                    self.line.remove(turn)
                    if not any(other.owner == turn.owner for other in self.line):
                        self.back_of_line.pop(turn.owner, None)
            raise
        started = time.monotonic()
        try:
            yield
        finally:
            with self.changed:
                self.leave(turn, time.monotonic() - started)

    def enter(self, owner: str) -> Turn:
        with self.changed:
            held = self.at_work.get(owner, 0) + sum(turn.owner == owner for turn in self.line)
            if owner and held > self.waiting:
                raise WorkStopped(too_many_calls(held))
            if len(self.line) >= MAX_LINE:  # each waiting call holds one of Gradio's threads: leave some to the rest
                raise WorkStopped("Every worker of this server is busy; try again in a minute.")
            turn = Turn(owner, time.monotonic())
            self.line.append(turn)
            self.grant()
            return turn

    def wait(self, turn: Turn, gone: Callable[[], bool] | None) -> None:
        with self.changed:
            while not turn.granted:
                if gone is not None and gone():
                    raise WorkStopped("The page that asked for this has closed, so the work was stopped.")
                if time.monotonic() - turn.since > START_S:
                    raise WorkStopped("Every worker of this server is busy; try again in a minute.")
                self.changed.wait(POLL_S)

    def leave(self, turn: Turn, seconds: float) -> None:
        """The call's turn ends after `seconds` of work (the lock held)."""
        now, owner = time.monotonic(), turn.owner
        self.at_work[owner] -= 1
        if not self.at_work[owner]:
            del self.at_work[owner]
        if owner and any(other.owner == owner for other in self.line):
            self.back_of_line[owner] = now
        else:
            self.back_of_line.pop(owner, None)
        if owner and seconds > LONG_CALL_S:
            self.slow_until[owner] = now + SLOW_FOR_S
            for expired in [o for o, until in self.slow_until.items() if until <= now]:
                del self.slow_until[expired]
        self.grant()

    def grant(self) -> None:
        """Start every waiting call whose turn it is (the lock held)."""
        while (turn := self.next_turn()) is not None:
            turn.granted = True
            self.line.remove(turn)
            self.at_work[turn.owner] = self.at_work.get(turn.owner, 0) + 1
            self.changed.notify_all()

    def next_turn(self) -> Turn | None:
        working, now = sum(self.at_work.values()), time.monotonic()
        if working >= self.size + self.reserve:
            return None
        firsts: dict[object, Turn] = {}
        for turn in self.line:  # each owner's first waiting call ("": each call its own)
            firsts.setdefault(turn.owner or id(turn), turn)
        ready = [turn for turn in firsts.values() if not turn.owner or turn.owner not in self.at_work]
        if working >= self.size:  # a reserved worker: for a call whose owner's calls have been short
            ready = [turn for turn in ready if turn.owner and self.slow_until.get(turn.owner, 0) <= now]
        return min(ready, key=lambda turn: max(turn.since, self.back_of_line.get(turn.owner, 0)), default=None)


@dataclass
class Worker:
    process: subprocess.Popen
    conn: Connection
    calls: int = 0


class WorkerPool:
    """Worker processes, started in the background when the pool is made; `call(fn, ...)` runs fn(*args) in a free
    one, when its turn comes (Admission: at most `size` calls at work, and the `spare` for short calls; each caller,
    `owner`: a client's address, one at a time, at most `waiting` more waiting, in turn with other callers). The pool
    keeps `size` + `spare` workers, so a call rarely waits for a start-up; a worker that is killed, or has answered
    `calls_per_worker` calls, is replaced in the background. fn, its arguments and its result cross by pickle: fn
    must be a module-level function of a module the workers can import (those in `preload` each worker imports
    when it starts, then it calls `warm_up`: what a first call would otherwise spend its deadline on). `memory_setting`
    and `crash_advice` are what its messages name and advise."""

    def __init__(self, size: int, memory_bytes: int, max_result_bytes: int, preload: list[str] = (),
                 warm_up: Callable[[], object] | None = None, spare: int = 1, waiting: int = 4,
                 calls_per_worker: int | None = None, memory_setting: str = "PLAYGROUND_WORKER_MB",
                 crash_advice: str = "Check the package (load it with `python -m playground info`), or send less."):
        self.size, self.memory_bytes, self.max_result_bytes = size, memory_bytes, max_result_bytes
        self.memory_setting, self.crash_advice = memory_setting, crash_advice  # what its messages name
        self.calls_per_worker = calls_per_worker  # a worker is ended after so many calls (None: never)
        self.preload = list(preload)
        self.warm_up = f"{warm_up.__module__}:{warm_up.__qualname__}" if warm_up else "-"
        self.ready: queue.LifoQueue[Worker] = queue.LifoQueue()  # the last used first: its models are loaded
        self.lock = threading.Lock()
        self.admission = Admission(size, spare, waiting)
        self.started = 0  # workers started so far (replacements included), for tests and logs
        self.closed = False
        for _ in range(size + spare):
            self.replace()

    def start(self) -> Worker:
        """A new worker, once it has imported its modules and warmed up; WorkStopped when it cannot start."""
        ours, theirs = socket.socketpair()
        threads = max(1, available_cpus() // self.size)  # the working ones share the CPUs
        command, env = python_command(__name__, str(theirs.fileno()), str(self.memory_bytes),
                                      str(self.max_result_bytes), str(threads), self.warm_up, *self.preload)
        with theirs:
            process = subprocess.Popen(command, env=env, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL)
        worker = Worker(process, Connection(ours.detach()))
        try:
            if not worker.conn.poll(START_S) or worker.conn.recv_bytes() != READY:
                raise EOFError
        except (EOFError, OSError):
            self.kill(worker)
            raise WorkStopped("A worker process could not start on this server (its log says why); try again in a "
                              "minute.") from None
        with self.lock:
            self.started += 1
        return worker

    def replace(self) -> None:
        """Start a worker in the background (at first, and for each one killed): a Python importing PyTorch takes a
        few seconds. One that cannot start is tried again a little later."""
        def ready() -> None:
            while not self.closed:
                try:
                    self.ready.put(self.start())
                    return
                except WorkStopped:
                    log.warning("a worker could not start; trying again")
                    time.sleep(RETRY_S)
        threading.Thread(target=ready, daemon=True, name="playground-worker-start").start()

    def take(self) -> Worker:
        """A free worker that is alive (one that died while it waited is replaced)."""
        while True:
            try:
                worker = self.ready.get(timeout=START_S)
            except queue.Empty:
                raise WorkStopped("Every worker of this server is busy or starting; try again in a minute.") from None
            if worker.process.poll() is None:
                return worker
            self.end(worker)

    @staticmethod
    def kill(worker: Worker) -> None:
        worker.process.kill()
        worker.process.wait()
        worker.conn.close()

    def end(self, worker: Worker) -> None:
        """Kill a worker (a deadline, a client gone, a crash), reap it, and start its replacement."""
        self.kill(worker)
        self.replace()

    def call(self, fn: Callable, *args, seconds: float, advice: str = "", gone: Callable[[], bool] | None = None,
             owner: str = "", **kwargs):
        """fn(*args, **kwargs) in a worker, stopped after `seconds` of work (or as soon as `gone()` says the client
        has left); `advice` says what to make smaller when it is stopped. Calls of one `owner` ("": nobody's) run
        one after another."""
        with self.admission.turn(owner, gone):
            return self.work(fn, args, kwargs, seconds, advice, gone)

    def work(self, fn: Callable, args: tuple, kwargs: dict, seconds: float, advice: str,
             gone: Callable[[], bool] | None):
        worker = self.take()
        try:
            worker.conn.send((fn, args, kwargs, _settings()))
            data = self.wait(worker, seconds, advice, gone)
        except BaseException:
            self.end(worker)  # whatever went wrong on this side, the worker's state is unknown
            raise
        worker.calls += 1
        if self.calls_per_worker and worker.calls >= self.calls_per_worker:
            self.end(worker)  # its memory goes back to the system; a fresh one is starting for the next call
        else:
            self.ready.put(worker)
        return self.outcome(pickle.loads(data), advice)

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
        return (f"The work for this request crashed ({how}) and was stopped; the server goes on. This happens when "
                f"what was sent makes a native library fail, or when the work needs more memory than one request "
                f"may use here ({self.memory_bytes // 2**20:,} MB; the operator sets {self.memory_setting}). "
                f"{self.crash_advice}")

    def outcome(self, answer: tuple, advice: str = ""):
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
                                  f"({self.memory_bytes // 2**20:,} MB; the operator sets {self.memory_setting}) and "
                                  f"was stopped; the server goes on. {advice or 'Send less.'}")
            case ("too large", size):
                raise WorkStopped(f"The answer to this request would be {size / 2**20:,.1f} MB, more than one request "
                                  f"may return here ({self.max_result_bytes // 2**20:,} MB; the operator sets "
                                  "PLAYGROUND_MAX_RESULT_MB). Send less.")
            case ("failed", what):
                raise WorkStopped(f"Something went wrong while computing this ({what}); the details are in the "
                                  "server's log. Try again, or change the settings you just changed.")
        raise WorkStopped("A worker answered something this server does not understand.")

    def close(self) -> None:
        """End the idle workers (those at work end when their call returns and finds the socket closed)."""
        self.closed = True
        while not self.ready.empty():
            worker = self.ready.get()
            worker.conn.close()  # the worker's recv ends: it returns
            try:
                worker.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill(worker)


if __name__ == "__main__":  # a worker: python -m playground.runtime.workers FD MEMORY RESULT THREADS WARM_UP MODULE...
    import importlib

    fd, memory, result, threads, warm_up, *modules = sys.argv[1:]
    for module in modules:
        importlib.import_module(module)
    serve(Connection(int(fd)), int(memory), int(result), int(threads), warm_up)
