"""ZeroGPU's GPU call, the way the `spaces` package (0.51.3) runs it: spaces.GPU around a function, with the
app's refusals kept across it. The rules (on ZeroGPU or not, chunk seconds, training slots, what a refusal stands
for) are playground.serving.zerogpu's; this module holds what needs `spaces` and Gradio.

A GPU call lets only a gr.Error through as itself: anything else reaches the caller as gr.Error(<class name>,
title="ZeroGPU worker error"). So a refusal raised inside a call (PlaygroundError) crosses as a gr.Error with a
title that names it, and comes out on this side as the PlaygroundError it was, to be shown beside its control.
"""

from __future__ import annotations

import functools
import inspect
from datetime import timedelta

import gradio as gr

from playground.errors import PlaygroundError, reraising
from playground.serving.zerogpu import carried_title, client_failure, on_zerogpu, refusal

try:  # on every Gradio Space; inert unless SPACES_ZERO_GPU
    import spaces as _spaces
except ImportError:  # a laptop, a server, CI
    _spaces = None


# ----------------------------------------------------------------------------------------------------------
# GPU calls


def _carried(err: PlaygroundError) -> gr.Error:
    return gr.Error(str(err), title=carried_title(err), print_exception=False)


def _inside(fn):
    """fn as it runs inside the GPU call: a PlaygroundError leaves as a gr.Error that names it."""
    return reraising(fn, lambda err: isinstance(err, PlaygroundError), _carried, chain=False)


def arrived(err: gr.Error) -> Exception:
    """What a gr.Error out of a GPU call stands for here (playground.serving.zerogpu.refusal), else itself."""
    title, message = getattr(err, "title", "") or "", str(getattr(err, "message", err))
    return refusal(title, message) or err


def _outside(call, fn):
    """The GPU call as this process calls it: what arrives as a gr.Error is turned back (arrived), and a RuntimeError
    of spaces' client (serving.zerogpu.client_failure) is the GpuUnavailable it stands for."""
    def translated_error(err: BaseException) -> BaseException:
        return arrived(err) if isinstance(err, gr.Error) else client_failure(err)

    translated = reraising(call, lambda err: isinstance(err, gr.Error) or client_failure(err) is not None,
                           translated_error, chain=False,
                           generator=inspect.isgeneratorfunction(fn))  # spaces' wrapper may hide that fn yields
    return functools.wraps(fn)(translated)


def gpu(fn, *, duration):
    """fn as a ZeroGPU call (`spaces.GPU(duration=...)`: seconds, or a function of fn's arguments) on ZeroGPU,
    with refusals kept; elsewhere fn itself."""
    if not on_zerogpu():
        return fn
    return _outside(_spaces.GPU(duration=duration)(_inside(fn)), fn)


def duration_factor() -> float:
    """How many seconds of a visitor's quota one declared second of a GPU call costs on this Space's hardware:
    spaces.zero.client.get_duration_seconds multiplies by zero/configs.json's duration_factor (1.5 on the RTX PRO
    6000 Blackwell, 1 on the H200) unless the Space runs on an "xlarge" GPU; 1 off ZeroGPU."""
    if not on_zerogpu():
        return 1.0
    try:  # spaces imports spaces.zero.client on ZeroGPU
        return float(_spaces.zero.client.get_duration_seconds(timedelta(seconds=1000), None)) / 1000
    except Exception:  # noqa: BLE001 - an unreadable configuration: ZeroGPU's base rate
        return 1.0
