"""Work a test's worker process runs (playground.runtime.workers): module-level functions that pickle by name, in a
module that imports nothing heavy, so that a worker starts in a fraction of a second."""

from __future__ import annotations

import os


def worker_pid() -> int:
    return os.getpid()


def abort_now() -> None:
    os.abort()


def read_address_zero() -> None:
    import ctypes

    ctypes.string_at(0)  # a segmentation fault


def allocate(n_bytes: int) -> int:
    return len(bytearray(n_bytes))


def spin_forever() -> None:
    while True:
        pass


def bytes_of(n: int) -> bytes:
    return b"x" * n


def refuse(message: str) -> None:
    from playground.errors import PackageError

    raise PackageError(message)


def nice_after(seconds: float) -> int:
    """Busy for `seconds`, then the nice value of the thread that ran this."""
    import threading
    import time

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def finish_after(seconds: float) -> float:
    """Sleep `seconds`; when it ended (time.time, comparable across processes)."""
    import time

    time.sleep(seconds)
    return time.time()


def environment(name: str) -> str | None:
    return os.environ.get(name)
