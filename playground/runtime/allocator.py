"""The process's memory allocator, chosen before PyTorch loads.

A CPU tensor's memory comes from malloc. glibc's malloc serves batch-sized blocks from its heap once its mmap
threshold has risen, and every new batch shape leaves holes that later ones do not quite fit: a small-preset
Multi30k run grew by ~13 MB a step (2.0 GB after 80 steps) and reached 5 GB in 30 minutes. tcmalloc (or jemalloc)
serves blocks from size classes that later batches reuse: the same run stays flat at ~1.3 GB and its steps are
~10% faster (docs/BENCHMARKS.md, Memory). Only the dynamic linker can put an allocator under a process, before
anything allocates, so the entry points (app.py, `python -m playground`, the bench scripts) start the interpreter
once more with the library in LD_PRELOAD. Where none is installed the process keeps glibc's malloc.
"""

from __future__ import annotations

import ctypes.util
import os
import sys

from playground.settings import env_str

# sonames, best first: Debian's libtcmalloc-minimal4 (…4t64 on Debian 13; the Space's packages.txt installs it),
# gperftools' full tcmalloc, libjemalloc2 (least memory, but ~15% slower steps in the same measurement)
LIBRARIES = ("tcmalloc_minimal", "tcmalloc", "jemalloc")
SETTING = "PLAYGROUND_ALLOCATOR"  # "system": keep glibc's; set to the library by the restart, so it happens once


def fast_allocator() -> str | None:
    """The soname of the first allocator library the dynamic linker can find, or None."""
    if not sys.platform.startswith("linux"):  # macOS's allocator does not fragment like this; no LD_PRELOAD there
        return None
    for name in LIBRARIES:
        soname = ctypes.util.find_library(name)
        if soname:
            return soname
    return None


def restart_with_fast_allocator() -> None:
    """Replace this process by the same command with a fast allocator preloaded; return if there is none, if the
    operator chose the system's (PLAYGROUND_ALLOCATOR=system), or if this process is the restarted one."""
    if env_str(SETTING):
        return
    library = fast_allocator()
    if library is None or any(name in env_str("LD_PRELOAD") for name in LIBRARIES):
        return
    preload = " ".join(filter(None, [library, env_str("LD_PRELOAD")]))
    env = {**os.environ, SETTING: library, "LD_PRELOAD": preload}
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)
    except OSError:  # no exec allowed (a sandbox): glibc's malloc it is
        return


def loaded_allocator() -> str:
    """The allocator this process runs on: a preloaded library's file name, or "glibc malloc"."""
    try:
        with open("/proc/self/maps") as maps:
            mapped = maps.read()
    except OSError:
        return "system malloc"
    for name in LIBRARIES:
        if f"lib{name}." in mapped:
            return f"lib{name}"
    return "glibc malloc"
