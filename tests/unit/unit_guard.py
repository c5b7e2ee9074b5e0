"""The guard that keeps unit tests unit tests (tests/unit/conftest.py applies it): Gradio, gradio_client, spaces and
the UI (playground.ui) cannot be imported, and no process can be started (subprocess, os.fork, os.system)."""

from __future__ import annotations

import contextlib
import importlib.abc
import os
import subprocess
import sys
from collections.abc import Iterator

BLOCKED = ("gradio", "gradio_client", "spaces", "playground.ui")


def blocked(name: str) -> bool:
    return any(name == b or name.startswith(b + ".") for b in BLOCKED)


class NoGradio(importlib.abc.MetaPathFinder):
    """Refuses the blocked modules before any other finder can find them."""

    def find_spec(self, name, path=None, target=None):
        if blocked(name):
            raise ImportError(f"a unit test imports {name}: move it to tests/app/ (unit tests run without Gradio)")
        return None


def no_process(*args, **kwargs):
    raise RuntimeError("a unit test starts a process: move it to tests/system/")


@contextlib.contextmanager
def unit_guard() -> Iterator[None]:
    """Gradio out of reach and no processes, for the length of the block. Modules an app test imported earlier are
    hidden from sys.modules meanwhile (an import would otherwise find them there), and put back afterwards."""
    hidden = {name: sys.modules.pop(name) for name in [n for n in sys.modules if blocked(n)]}
    finder = NoGradio()
    sys.meta_path.insert(0, finder)
    saved = subprocess.Popen, os.fork, os.system
    subprocess.Popen = os.fork = os.system = no_process
    try:
        yield
    finally:
        subprocess.Popen, os.fork, os.system = saved
        sys.meta_path.remove(finder)
        for name in [n for n in sys.modules if blocked(n)]:
            del sys.modules[name]
        sys.modules.update(hidden)
