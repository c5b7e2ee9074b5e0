"""The one error family the playground raises for bad input, with a message meant for people."""

from __future__ import annotations

import functools
import inspect
from typing import Callable


def numbered(numbers: list[int], shown: int = 5) -> str:
    """The first `shown` numbers of a list for a message, and how many there are when that is not all of them:
    "2, 5" or "1, 2, 3, 4, 5 … (7 in all)"."""
    return ", ".join(map(str, numbers[:shown])) + (f" … ({len(numbers)} in all)" if len(numbers) > shown else "")


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


class GpuDurationTooLong(GpuUnavailable):
    """ZeroGPU refused a call's declared duration as longer than it allows this visitor: asked again, shorter."""


def is_rust_panic(err: BaseException) -> bool:
    """A panic inside a Rust extension (tokenizers, safetensors): pyo3 raises it as PanicException, a BaseException
    (not an Exception), so `except Exception` lets it through and the request would never answer."""
    return type(err).__name__ == "PanicException"


def reraising(fn: Callable, catch: Callable[[BaseException], bool], convert: Callable[[BaseException], BaseException],
              *, chain: bool = True, generator: bool | None = None) -> Callable:
    """fn (a function or a generator function: `generator`, None to ask fn) with every exception that `catch`
    accepts raised again as convert(err), chained to it or not (`chain`): the one shape of the UI's and ZeroGPU's
    error translations."""
    def translated(err: BaseException) -> BaseException:
        if not catch(err):
            raise err
        return convert(err)

    if inspect.isgeneratorfunction(fn) if generator is None else generator:
        @functools.wraps(fn)
        def generator_fn(*args, **kwargs):
            try:
                yield from fn(*args, **kwargs)
            except BaseException as err:  # noqa: BLE001 - `catch` decides
                new = translated(err)
                raise new from (err if chain and new is not err else None)
        return generator_fn

    @functools.wraps(fn)
    def function(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except BaseException as err:  # noqa: BLE001
            new = translated(err)
            raise new from (err if chain and new is not err else None)
    return function
