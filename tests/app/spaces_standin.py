"""A stand-in for the `spaces` package (0.51.3) as a ZeroGPU Space runs it, minus the GPU: what the tests of
ZeroGPU use instead of the real thing, which needs Hugging Face's device API. Modelled on spaces/zero/ (decorator.py,
wrappers.py, client.py, torch/patching.py, gradio.py) and spaces/config.py:

- inert unless SPACES_ZERO_GPU (spaces.config.Config.zero_gpu): spaces.GPU returns the function itself;
- `GPU(task=None, *, duration=None, size=None)`: duration in seconds, a timedelta, or a function of the call's
  arguments (None: 60 s);
- a daily GPU quota per visitor (per browser session here; X-IP-Token there): a call whose declared duration
  exceeds what the visitor has left is refused with ZeroGPU's own gr.Error; a call's seconds are charged when it
  ends; no GPU free (`busy`) refuses every call ("No GPU was available");
- every argument and every returned or yielded value crosses by pickle; the task runs in a thread of its own
  (the worker's), a generator's values streaming out while it runs;
- the error rule (wrappers.exception_result): a gr.Error raised in the task reaches the caller as itself (pickled),
  anything else as gr.Error(<class name>, title="ZeroGPU worker error");
- a task still running past its declared duration is killed ("GPU task aborted"): it never runs another line, so
  its `finally` blocks do not run either (the thread is parked for good);
- in the main process torch.cuda.is_available() says True and the device is "NVIDIA H200 MIG 3g.71gb", though CUDA
  works only inside a call (here: never; inside a call torch says what this machine has);
- the hardware's duration factor (zero/configs.json, `duration_factor`: 1.5 on the RTX PRO 6000 Blackwell) multiplies
  a declared duration before it is checked against the quota and the longest call allowed (`max_duration_s`: more
  is "ZeroGPU illegal duration") and charged (zero/client.py, get_duration_seconds);
- `fail_next(...)`: the next calls end another way ZeroGPU's can: one of its refusals (a gr.Error with its title),
  a RuntimeError spaces.zero.client raises in this process ("Unexpected end of stream", "Connection closed by
  visitor while queueing", "ZeroGPU API /schedule error: ..."), or "crash": the worker dies after yielding
  `crash_after` values (a CUDA error, a killed process), which arrives as gr.Error("RuntimeError",
  title="ZeroGPU worker error").
"""

from __future__ import annotations

import functools
import inspect
import os
import pickle
import queue
import threading
import time
import types
from datetime import timedelta

import gradio as gr
import torch

CUDA_DEVICE_NAME = "NVIDIA H200 MIG 3g.71gb"  # spaces.config: ZEROGPU_CUDA_DEVICE_NAME's default
DEFAULT_DURATION = 60  # spaces.zero.client.DEFAULT_SCHEDULE_DURATION
DAY = 24 * 3600


def boolean(value: str | None) -> bool:
    return value is not None and value.lower() in ("1", "t", "true")  # spaces.config.boolean


def error(title: str, message: str) -> gr.Error:
    return gr.Error(message, title=title, print_exception=False)  # spaces.zero.gradio.error


def crossing(value):
    """What arrives on the other side of the process boundary (a lock, an open file or a generator fails here)."""
    return pickle.loads(pickle.dumps(value))


def make(quota_s: float = 120.0) -> types.ModuleType:
    """A fresh `spaces` module; Config.zero_gpu is read from SPACES_ZERO_GPU now, as spaces.config does on import."""
    module = types.ModuleType("spaces")
    config = types.ModuleType("spaces.config")
    config.Config = types.SimpleNamespace(zero_gpu=boolean(os.getenv("SPACES_ZERO_GPU")))
    module.config = config
    module.quota_s = quota_s  # each visitor's daily seconds
    module.used = {}  # visitor -> seconds charged today
    module.calls = []  # (function name, declared seconds, seconds it ran, visitor) of every call that ran
    module.refused = []  # (function name, declared seconds, visitor, message) of every call refused
    module.busy = False  # no GPU free: every call is refused
    module.duration_factor = 1.0  # zero/configs.json's for the hardware
    module.max_duration_s = None  # the longest (factored) duration a call may declare; None: no bound
    module.failures = []  # how the next calls end: a gr.Error or RuntimeError raised when scheduled, or "crash"
    module.crash_after = 0  # values a crashing worker yields before it dies
    module.dead = []  # the generators of crashed workers, never to run again
    module.in_call = threading.local()  # set in a task's thread: there torch says what this machine has

    def visitor() -> str:
        from gradio.context import LocalContext

        request = LocalContext.request.get(None)  # what spaces.zero.client reads the X-IP-Token from
        return getattr(request, "session_hash", None) or "anonymous"

    def new_day() -> None:
        module.used.clear()

    def get_duration_seconds(duration: timedelta | None, gpu_size=None) -> float:
        return (duration.seconds if duration is not None else DEFAULT_DURATION) * module.duration_factor

    def fail_next(*ways) -> None:
        module.failures.extend(ways)

    def schedule(name: str, declared: timedelta | None) -> str:
        who = visitor()
        seconds = get_duration_seconds(declared)
        if module.failures and module.failures[0] != "crash":
            failure = module.failures.pop(0)
            module.refused.append((name, seconds, who, str(failure)))
            raise failure
        if module.max_duration_s is not None and round(seconds) > module.max_duration_s:
            module.refused.append((name, seconds, who, "illegal duration"))
            raise error("ZeroGPU illegal duration",
                        f"The requested GPU duration ({round(seconds)}s) is larger than the maximum allowed")
        if module.busy:
            module.refused.append((name, seconds, who, "busy"))
            raise error("ZeroGPU client error", "No GPU was available")
        left = max(0, int(module.quota_s - module.used.get(who, 0.0)))
        if round(seconds) > left:
            message = (f"You have exceeded your ZeroGPU quota ({round(seconds)}s requested vs. {left}s left). "
                       f"Try again in {timedelta(seconds=DAY - 60)}. ")
            module.refused.append((name, seconds, who, message))
            raise error("ZeroGPU quota exceeded", message)
        return who

    def charge(name: str, seconds: float, began: float, who: str) -> float:
        ran = time.monotonic() - began
        module.used[who] = module.used.get(who, 0.0) + ran * module.duration_factor
        module.calls.append((name, seconds, ran, who))
        return ran

    def exception_result(exc: Exception) -> gr.Error:
        if isinstance(exc, gr.Error):
            return crossing(exc)
        return error("ZeroGPU worker error", exc.__class__.__name__)

    def duration_of(duration, args, kwargs) -> timedelta | None:
        duration = duration(*args, **kwargs) if callable(duration) else duration  # wrappers.static_duration
        return duration if duration is None or isinstance(duration, timedelta) else timedelta(seconds=duration)

    def admitted(task, duration, args, kwargs) -> tuple[str, int, tuple]:
        """A call let in (the visitor, its declared seconds, its arguments as the worker receives them), or refused."""
        declared = duration_of(duration, args, kwargs)
        who = schedule(task.__name__, declared)
        crash = bool(module.failures) and module.failures[0] == "crash" and bool(module.failures.pop(0))
        return who, declared.seconds if declared is not None else DEFAULT_DURATION, crossing((args, kwargs)), crash

    def regular(task, duration):
        @functools.wraps(task)
        def gradio_handler(*args, **kwargs):
            who, seconds, sent, crash = admitted(task, duration, args, kwargs)
            out: queue.Queue = queue.Queue()

            def worker():
                module.in_call.active = True
                try:
                    if crash:
                        raise RuntimeError("CUDA error: an illegal memory access was encountered")
                    out.put(("ok", crossing(task(*sent[0], **sent[1]))))
                except Exception as exc:  # noqa: BLE001 - the worker reports everything
                    out.put(("error", exception_result(exc)))

            began = time.monotonic()
            threading.Thread(target=worker, daemon=True).start()
            try:
                kind, value = out.get(timeout=seconds)
            except queue.Empty:  # killed: the thread's result is never read
                charge(task.__name__, seconds, began, who)
                raise error("ZeroGPU worker error", "GPU task aborted") from None
            charge(task.__name__, seconds, began, who)
            if kind == "error":
                raise value
            return value
        return gradio_handler

    def generator(task, duration):
        @functools.wraps(task)
        def gradio_handler(*args, **kwargs):
            who, seconds, sent, crash = admitted(task, duration, args, kwargs)
            out: queue.Queue = queue.Queue()
            stop, killed = threading.Event(), threading.Event()

            def worker():
                module.in_call.active = True
                gen = task(*sent[0], **sent[1])
                yielded = 0
                while True:
                    try:
                        if crash and yielded >= module.crash_after:  # the process dies: its generator never closes
                            module.dead.append(gen)  # (nor is it collected: its `finally` never runs)
                            raise RuntimeError("CUDA error: an illegal memory access was encountered")
                        value = next(gen)
                        yielded += 1
                    except StopIteration:
                        break
                    except Exception as exc:  # noqa: BLE001
                        out.put(("error", exception_result(exc)))
                        return
                    if killed.is_set():
                        threading.Event().wait()  # the process is gone: nothing after this line runs, no finally
                    if stop.is_set():
                        gen.close()
                        break
                    try:
                        out.put(("ok", crossing(value)))
                    except (pickle.PicklingError, TypeError, AttributeError) as exc:
                        out.put(("error", exception_result(exc)))
                        return
                out.put(("end", None))

            began = time.monotonic()
            threading.Thread(target=worker, daemon=True).start()
            try:
                while True:
                    left = seconds - (time.monotonic() - began)
                    try:
                        kind, value = out.get(timeout=max(left, 0.0))
                    except queue.Empty:
                        killed.set()
                        raise error("ZeroGPU worker error", "GPU task aborted") from None
                    if kind == "end":
                        return
                    if kind == "error":
                        raise value
                    try:
                        yield value
                    except GeneratorExit:
                        stop.set()
                        raise
            finally:
                charge(task.__name__, seconds, began, who)
        return gradio_handler

    def GPU(task=None, *, duration=None, size=None, **kwargs):  # noqa: N802 - spaces' own name
        if not callable(task):
            return functools.partial(GPU, duration=duration, size=size)
        if not module.config.Config.zero_gpu:
            return task
        if inspect.iscoroutinefunction(task):
            raise NotImplementedError
        wrap = generator if inspect.isgeneratorfunction(task) else regular
        return wrap(task, duration)

    module.GPU = GPU
    module.new_day = new_day
    module.fail_next = fail_next
    module.zero = types.SimpleNamespace(client=types.SimpleNamespace(get_duration_seconds=get_duration_seconds))
    return module


def install(monkeypatch, quota_s: float = 120.0, zero_gpu: bool = True) -> types.ModuleType:
    """Make the stand-in the app's `spaces` (SPACES_ZERO_GPU set, or not): the module playground.serving.zerogpu finds
    loaded and the one playground.ui.zerogpu calls. On ZeroGPU, patch torch.cuda in this process as `spaces` does
    (torch/patching.py) for the test's duration."""
    if zero_gpu:
        monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    else:
        monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    module = make(quota_s)
    monkeypatch.setitem(__import__("sys").modules, "spaces", module)
    from playground.ui import zerogpu

    monkeypatch.setattr(zerogpu, "_spaces", module)
    if zero_gpu:
        real = {name: getattr(torch.cuda, name) for name in ("is_available", "device_count", "get_device_name")}
        fake = {"is_available": lambda: True, "device_count": lambda: 1,
                "get_device_name": lambda *args, **kwargs: CUDA_DEVICE_NAME}
        for name in real:
            def patched(*args, _name=name, **kwargs):
                active = getattr(module.in_call, "active", False)
                return (real if active else fake)[_name](*args, **kwargs)
            monkeypatch.setattr(torch.cuda, name, patched)
    return module
