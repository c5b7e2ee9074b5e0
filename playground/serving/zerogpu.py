"""ZeroGPU's rules for this app, without Gradio: whether this process is on ZeroGPU (as the `spaces` package decides
it), how long one training call may run, how many runs train at once, and what a refusal that crossed a GPU call
stands for. The GPU call itself (spaces.GPU, gr.Error) is playground.ui.zerogpu's.

`spaces` is installed on every Gradio Space, but its `spaces.GPU` does anything only where
`spaces.config.Config.zero_gpu` (the SPACES_ZERO_GPU variable) is true; on_zerogpu asks the same question. There:

- Only training spends a visitor's GPU time (the duration estimate too, when pressed). Translate, attention,
  step-through, next tokens, compare and the Inside tab decode one sentence of a model of at most tens of millions
  of parameters: ~0.1 s on the CPU, against a GPU call's scheduling, a forked worker and CUDA set up each time
  (and a share of the visitor's daily minutes). They run on the CPU in worker processes (playground.serving.work),
  fresh Pythons without the `spaces` that makes torch.cuda.is_available() say True here without CUDA working.
- A GPU call lets only a gr.Error through as itself, so a refusal raised inside a call (PlaygroundError) crosses as
  a gr.Error whose title names it (carried_title) and comes out on this side as the PlaygroundError it was
  (refusal), to be shown beside its control.
- Every other way a GPU call can end comes out as playground.errors.GpuUnavailable, and a training run pauses on
  it with its last package (playground.training.chunked) instead of failing: ZeroGPU's own refusals (spaces 0.51.3,
  zero/client.py: a spent daily quota, the runs limit, pending credits, an illegal duration (GpuDurationTooLong:
  asked again, shorter), no GPU in time, a client error), a worker that died or was aborted ("ZeroGPU worker
  error", whatever the exception's class name: CUDA failures, a killed process), and the RuntimeErrors
  zero/client.py raises in this process (the device API's stream ending or failing, the visitor gone while queued).
- spaces multiplies a declared duration by the hardware's duration factor (zero/configs.json: 1.5 on the RTX PRO
  6000 Blackwell) before it is checked against, and charged to, the visitor's quota; a call declares
  chunk seconds / factor, so that what it is charged stays PLAYGROUND_GPU_CHUNK_S (gpu_time_note says it).

    PLAYGROUND_GPU_CHUNK_S       seconds of one training call (default 60 on ZeroGPU; elsewhere unset: one piece)
    PLAYGROUND_TRAINING_SLOTS    runs that train at once on ZeroGPU (default 4)
"""

from __future__ import annotations

import sys

from playground import errors
from playground.errors import GpuDurationTooLong, GpuUnavailable, PlaygroundError
from playground.settings import env_int, env_number, env_str

QUICK_CALL_DEVICE = "cpu"
ESTIMATE_GPU_S = 20  # timing a few training steps on a synthetic batch (a forked worker and CUDA set up first)
DEFAULT_CHUNK_S = 60  # a training call's longest declared duration: ZeroGPU's default, admitted for every visitor
ZEROGPU_RUNS = 4  # training runs at once on ZeroGPU (each its own GPU calls); what each keeps in this process is
#                   its session's data and its charts' history, so the bound is this process's memory
CPU_RUN_MAX_PARAMS = 3_000_000  # "tiny"-sized models (the tiny preset: ~1.2M) may go on training on the CPU
GPU_TIME = ("ZeroGPU gives each visitor a daily allowance of GPU time: a couple of minutes without an account; "
            "signing in to Hugging Face gives more, a PRO account the most")

REFUSED = "Playground refusal: "  # title prefix of a gr.Error that carries a PlaygroundError out of a GPU call
UNAVAILABLE = {"ZeroGPU quota exceeded", "ZeroGPU pending credits exceeded", "ZeroGPU queue timeout",
               "ZeroGPU client error"}  # spaces.zero.client's titles: no GPU this time
TOO_LONG = "ZeroGPU illegal duration"  # the declared duration is more than this visitor may ask for
WORKER_ENDED = "ZeroGPU worker error"  # the worker died ("RuntimeError", ...) or was killed ("GPU task aborted")
CLIENT_RUNTIME_ERRORS = ("Unexpected end of stream", "Error while re-trying after queue disconnect",
                         "Connection closed by visitor", "ZeroGPU API /", "Error while initializing ZeroGPU")
#                        what spaces.zero.client raises as RuntimeError (0.51.3: schedule, release, startup_report)


def _boolean(value: str | None) -> bool:
    return value is not None and value.lower() in ("1", "t", "true")  # spaces.config.boolean


def on_zerogpu() -> bool:
    """True on a ZeroGPU Space: `spaces` is loaded (playground.ui.zerogpu imports it where it is installed; serving
    never does) and its Config says so, as spaces.GPU itself decides."""
    spaces = sys.modules.get("spaces")
    if spaces is None:
        return False
    config = getattr(getattr(spaces, "config", None), "Config", None)
    return bool(config.zero_gpu) if config is not None else _boolean(env_str("SPACES_ZERO_GPU"))


def gpu_chunk_seconds() -> float | None:
    """Longest seconds of one training call: PLAYGROUND_GPU_CHUNK_S, else DEFAULT_CHUNK_S on ZeroGPU; None (any
    other machine) trains in one piece."""
    return env_number("PLAYGROUND_GPU_CHUNK_S", float(DEFAULT_CHUNK_S) if on_zerogpu() else None)


def training_slots() -> int:
    """Runs that train at once: on ZeroGPU each run is its own GPU calls (ZEROGPU_RUNS, or PLAYGROUND_TRAINING_SLOTS);
    on a CPU or a dedicated GPU they would share one device, so one at a time."""
    return env_int("PLAYGROUND_TRAINING_SLOTS", ZEROGPU_RUNS) if on_zerogpu() else 1


def device_line() -> str:
    """What the page's first lines say this app runs on."""
    from playground.runtime.device import describe, resolve_device

    if on_zerogpu():
        return (f"ZeroGPU: training runs on a GPU lent for each part of a run, from the visitor's daily GPU time; "
                f"translating and the views run on the {describe(resolve_device(QUICK_CALL_DEVICE))}")
    return describe(resolve_device("auto"))


def carried_title(err: PlaygroundError) -> str:
    """The title of the gr.Error that carries `err` out of a GPU call (refusal reads it back)."""
    return REFUSED + type(err).__name__


def refusal(title: str, message: str) -> Exception | None:
    """What an error out of a GPU call with this title and message stands for here: the PlaygroundError it carries,
    GpuUnavailable for ZeroGPU's own refusals, else None (the error is itself)."""
    if title.startswith(REFUSED):
        kind = getattr(errors, title[len(REFUSED):], PlaygroundError)
        kind = kind if isinstance(kind, type) and issubclass(kind, PlaygroundError) else PlaygroundError
        return kind(message)
    if title == TOO_LONG:
        return GpuDurationTooLong(f"{title}: {message.strip()}")
    if title in UNAVAILABLE or title == WORKER_ENDED:
        return GpuUnavailable(f"{title}: {message.strip()}")
    return None


def client_failure(err: BaseException) -> GpuUnavailable | None:
    """GpuUnavailable for a RuntimeError that `spaces`' client raised around a GPU call (CLIENT_RUNTIME_ERRORS),
    else None."""
    if isinstance(err, RuntimeError) and str(err).startswith(CLIENT_RUNTIME_ERRORS):
        return GpuUnavailable(f"ZeroGPU client error: {err}")
    return None


def gpu_time_note(chunk_s: float | None, factor: float, run_minutes: float | None) -> str:
    """What a run will spend of the visitor's daily GPU time, said before it starts (on ZeroGPU, else "")."""
    if chunk_s is None or not on_zerogpu():
        return ""
    counted = f" (on this Space's GPU ZeroGPU counts each second {factor:g}×)" if factor != 1 else ""
    times = f" × {factor:g}" if factor != 1 else ""
    note = (f"  \n⏱ On ZeroGPU a run is a series of GPU calls, each charged at most {chunk_s:g} s of your daily GPU "
            f"time{counted}: a run spends about its training minutes{times}, plus a few seconds a call to load and "
            "save")
    if run_minutes:
        note += f"; here a run ends after {run_minutes:g} minutes, about {run_minutes * factor:g} minutes of GPU time"
    return note + "."
