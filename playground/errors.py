"""The one error family the playground raises for bad input, with a message meant for people."""


class PlaygroundError(Exception):
    """Base class: the message says what is wrong and how to fix it."""


class DataError(PlaygroundError):
    """A data file cannot be read or has no usable sentence pairs."""


class PackageError(PlaygroundError):
    """A model package is missing, corrupt, or does not fit its config."""


class TrainingError(PlaygroundError):
    """A training run cannot start or had to stop (bad settings, NaN loss, out of memory)."""


class GpuUnavailable(PlaygroundError):
    """The platform gave no GPU for a call (ZeroGPU: the visitor's daily GPU time is spent, the runs limit is
    reached, the task was aborted, no GPU came in time). Not the visitor's mistake: a run pauses on it."""


def is_rust_panic(err: BaseException) -> bool:
    """A panic inside a Rust extension (tokenizers, safetensors): pyo3 raises it as PanicException, a BaseException
    (not an Exception), so `except Exception` lets it through and the request would never answer."""
    return type(err).__name__ == "PanicException"
