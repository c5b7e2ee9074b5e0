"""ZeroGPU, the way the `spaces` package (0.51.3) runs it, and the app's rules for it.

`spaces` is installed on every Gradio Space, but its `spaces.GPU` does anything only where
`spaces.config.Config.zero_gpu` (the SPACES_ZERO_GPU variable) is true; this module asks the same question. There:

- Only training spends a visitor's GPU time (the duration estimate too, when pressed). Translate, attention,
  step-through, next tokens, compare and the Inside tab decode one sentence of a model of at most tens of millions
  of parameters: ~0.1 s on the CPU, against a GPU call's scheduling, a forked worker and CUDA set up each time
  (and a share of the visitor's daily minutes). They run on the CPU in the main process, where `spaces` makes
  torch.cuda.is_available() say True without CUDA working (quick_device() never picks CUDA there).
- A GPU call lets only a gr.Error through as itself: anything else reaches the caller as gr.Error(<class name>,
  title="ZeroGPU worker error"). So a refusal raised inside a call (PlaygroundError) crosses as a gr.Error with a
  title that names it, and comes out on this side as the PlaygroundError it was, to be shown beside its control.
- ZeroGPU's own refusals (a spent daily quota, the runs limit, an aborted task, no GPU in time) come out as
  playground.errors.GpuUnavailable: a training run pauses on it (playground.training.chunked) instead of failing.
"""

from __future__ import annotations

import functools
import inspect
import os

import gradio as gr

from playground import errors
from playground.errors import GpuUnavailable, PlaygroundError, reraising

try:  # on every Gradio Space; inert unless SPACES_ZERO_GPU
    import spaces as _spaces
except ImportError:  # a laptop, a server, CI
    _spaces = None

QUICK_CALL_DEVICE = "cpu"
ESTIMATE_GPU_S = 20  # timing a few training steps on a synthetic batch (a forked worker and CUDA set up first)
DEFAULT_CHUNK_S = 60  # a training call's longest declared duration: ZeroGPU's default, admitted for every visitor
ZEROGPU_RUNS = 4  # training runs at once on ZeroGPU (each its own GPU calls); what each keeps in this process is
#                   its session's data and its charts' history, so the bound is this process's memory
CPU_RUN_MAX_PARAMS = 3_000_000  # "tiny"-sized models (the tiny preset: ~1.2M) may go on training on the CPU
GPU_TIME = ("ZeroGPU gives each visitor a daily allowance of GPU time: a couple of minutes without an account; "
            "signing in to Hugging Face gives more, a PRO account the most")

REFUSED = "Playground refusal: "  # title prefix of a gr.Error that carries a PlaygroundError out of a GPU call
UNAVAILABLE = {"ZeroGPU quota exceeded", "ZeroGPU illegal duration", "ZeroGPU pending credits exceeded",
               "ZeroGPU queue timeout", "ZeroGPU client error"}  # spaces.zero.client's titles: no GPU this time
ABORTED = ("ZeroGPU worker error", "GPU task aborted")  # the worker was killed (past its duration, or evicted)


def _boolean(value: str | None) -> bool:
    return value is not None and value.lower() in ("1", "t", "true")  # spaces.config.boolean


def on_zerogpu() -> bool:
    """True on a ZeroGPU Space: `spaces` imports and its Config says so (as spaces.GPU itself decides)."""
    if _spaces is None:
        return False
    config = getattr(getattr(_spaces, "config", None), "Config", None)
    return bool(config.zero_gpu) if config is not None else _boolean(os.environ.get("SPACES_ZERO_GPU"))


def gpu_chunk_seconds() -> float | None:
    """Longest seconds of one training call: PLAYGROUND_GPU_CHUNK_S, else DEFAULT_CHUNK_S on ZeroGPU; None (any
    other machine) trains in one piece."""
    raw = os.environ.get("PLAYGROUND_GPU_CHUNK_S", "").strip()
    if raw:
        return float(raw)
    return float(DEFAULT_CHUNK_S) if on_zerogpu() else None


def training_slots() -> int:
    """Runs that train at once: on ZeroGPU each run is its own GPU calls (ZEROGPU_RUNS, or PLAYGROUND_TRAINING_SLOTS);
    on a CPU or a dedicated GPU they would share one device, so one at a time."""
    if not on_zerogpu():
        return 1
    raw = os.environ.get("PLAYGROUND_TRAINING_SLOTS", "").strip()
    return max(1, int(raw)) if raw.isdigit() else ZEROGPU_RUNS


def quick_device():
    """Where the quick views load models: the CPU on ZeroGPU (CUDA works only inside a GPU call), else 'auto'."""
    from playground.runtime.device import resolve_device

    return resolve_device(QUICK_CALL_DEVICE if on_zerogpu() else "auto")


def device_line() -> str:
    """What the page's first lines say this app runs on."""
    from playground.runtime.device import describe, resolve_device

    if on_zerogpu():
        return (f"ZeroGPU: training runs on a GPU lent for each part of a run, from the visitor's daily GPU time; "
                f"translating and the views run on the {describe(resolve_device(QUICK_CALL_DEVICE))}")
    return describe(resolve_device("auto"))


# ----------------------------------------------------------------------------------------------------------
# GPU calls


def _carried(err: PlaygroundError) -> gr.Error:
    return gr.Error(str(err), title=REFUSED + type(err).__name__, print_exception=False)


def _inside(fn):
    """fn as it runs inside the GPU call: a PlaygroundError leaves as a gr.Error that names it."""
    return reraising(fn, lambda err: isinstance(err, PlaygroundError), _carried, chain=False)


def arrived(err: gr.Error) -> Exception:
    """What a gr.Error out of a GPU call stands for here: the PlaygroundError it carries, GpuUnavailable for
    ZeroGPU's own refusals, else itself."""
    title, message = getattr(err, "title", "") or "", str(getattr(err, "message", err))
    if title.startswith(REFUSED):
        kind = getattr(errors, title[len(REFUSED):], PlaygroundError)
        kind = kind if isinstance(kind, type) and issubclass(kind, PlaygroundError) else PlaygroundError
        return kind(message)
    if title in UNAVAILABLE or (title, message) == ABORTED:
        return GpuUnavailable(f"{title}: {message.strip()}")
    return err


def _outside(call, fn):
    """The GPU call as this process calls it: what arrives as a gr.Error is turned back (arrived)."""
    translated = reraising(call, lambda err: isinstance(err, gr.Error), arrived, chain=False,
                           generator=inspect.isgeneratorfunction(fn))  # spaces' wrapper may hide that fn yields
    return functools.wraps(fn)(translated)


def gpu(fn, *, duration):
    """fn as a ZeroGPU call (`spaces.GPU(duration=...)`: seconds, or a function of fn's arguments) on ZeroGPU,
    with refusals kept; elsewhere fn itself."""
    if not on_zerogpu():
        return fn
    return _outside(_spaces.GPU(duration=duration)(_inside(fn)), fn)
