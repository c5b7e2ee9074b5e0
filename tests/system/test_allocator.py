"""The entry points restart the interpreter once with a fast allocator preloaded (playground/runtime/allocator.py)."""

import os
import subprocess
import sys

import pytest

from playground.runtime.allocator import SETTING, fast_allocator

REPORT = ("from playground.runtime.allocator import restart_with_fast_allocator, loaded_allocator\n"
          "restart_with_fast_allocator()\n"
          "import os, sys; print(loaded_allocator(), os.environ.get('PLAYGROUND_ALLOCATOR'), sys.argv[1:])\n")


def run(*args: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in (SETTING, "LD_PRELOAD")}
    done = subprocess.run([sys.executable, "-c", REPORT, *args], capture_output=True, text=True, timeout=60,
                          env={**clean, **env}, check=True)
    return done.stdout.strip()


@pytest.mark.skipif(fast_allocator() is None, reason="no tcmalloc or jemalloc installed (.ci/run installs tcmalloc)")
def test_restarts_once_with_the_fast_allocator_and_keeps_the_arguments():
    library = fast_allocator()
    allocator, setting, argv = run("--flag", "two words").split(" ", 2)
    assert library.startswith(allocator) and allocator != "glibc"
    assert setting == library  # the mark that stops a second restart
    assert argv == "['--flag', 'two words']"


def test_the_operator_keeps_the_system_allocator():
    assert run(**{SETTING: "system"}).startswith("glibc malloc system")
