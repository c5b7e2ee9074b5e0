"""What one upload, one run or one session may use: the limits an operator sets by environment variable, and the
memory this process may really use (its cgroup's limit, its address-space limit, then the host's).

Every size is checked against these from headers and JSON before anything is allocated, so a hostile package or
form is refused with a number instead of taking the server down.

    PLAYGROUND_MAX_PARAMETERS     largest model loaded, trained or timed (default 300M: the paper's big model is 213M)
    PLAYGROUND_MAX_<KIND>_BYTES   largest file of each kind in a package (CARD, CONFIG, TRAINING, RESUME_STATE,
                                  TOKENIZER: 16 MB holds a BPE vocabulary of ~240k); weights follow from the
                                  parameter limit
    PLAYGROUND_MAX_HISTORY_POINTS  points of each training curve read from a package (default 20,000); a longer
                                  history is thinned as it is read (the charts draw 2,000)
    PLAYGROUND_MAX_DATA_MB / _ROWS  largest data file read (default 200 MB, 2M rows; MB: 1024**2 bytes, settings.py)
    PLAYGROUND_MAX_SESSION_DATA_MB  sentence pairs one web session may hold in memory (default 512)

What one quick call (translate, attention, step-through, compare, next tokens) may cost, checked from the request and
the package's config before any work starts (sized on a 2-core CPU: see "Sizing the quick-call limits" in
docs/ARCHITECTURE.md):

    PLAYGROUND_MAX_REQUEST_CHARS  characters of one request's text (default 50,000: 200 lines of 250)
    PLAYGROUND_MAX_LINE_CHARS     characters of one line; longer lines are cut before they are encoded (default 2,000)
    PLAYGROUND_MAX_DECODE_TOKENS  output tokens one call may decode: sentences x max length x beams (default 60,000)
    PLAYGROUND_MAX_DECODE_MB      the decoder's key/value caches of one batch (default 256); batches shrink to fit
    PLAYGROUND_MAX_ATTENTION_CELLS  attention weights one call computes and draws, layers x heads x positions^2 over
                                  the three kinds (default 1,000,000: 4 MB of floats); longer pairs are cut
    PLAYGROUND_QUICK_CALL_S       seconds one quick call may run; its worker process is killed there (default 20)
    PLAYGROUND_WORKERS            worker processes that run quick calls and check uploaded packages (default 2)
    PLAYGROUND_WORKER_MB          what one worker may allocate beyond its start; past it the request is stopped
                                  (default 1536)
    PLAYGROUND_MAX_RESULT_MB      the largest answer a worker sends back (default 64)
    PLAYGROUND_RUN_MB             what a CPU training run's process may allocate (default: no limit of its own)
    PLAYGROUND_MAX_HEADS / _LAYERS / _POSITIONS  the largest model shape served or trained (default 64 heads,
                                  32 layers per side, 4,096 positions)
    PLAYGROUND_MAX_PARQUET_ROW_GROUPS  row groups of one Parquet upload (default 2,000)
"""

from __future__ import annotations

import os
import resource
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from playground.errors import PlaygroundError
from playground.settings import KB, MB, env_int, env_megabytes, env_str

MAX_POSITIONS = 4096  # positions a model may have (sentence tokens + BOS/EOS); its tables and caches grow with them
NO_LIMIT = 1 << 60  # cgroup v1 reports "unlimited" as a number near 2**63


def max_parameters() -> int:
    return env_int("PLAYGROUND_MAX_PARAMETERS", 300_000_000)


# the files of a package, by kind: a card is kilobytes, a training record a few megabytes (its history grows with
# the validations), a tokenizer a few megabytes for a 37k vocabulary
FILE_KINDS = {"README.md": "CARD", "config.json": "CONFIG", "training.json": "TRAINING", "resume.json": "RESUME_STATE",
              "tokenizer.json": "TOKENIZER", "tokenizer.tgt.json": "TOKENIZER"}
FILE_DEFAULTS = {"CARD": 256 * KB, "CONFIG": 64 * KB, "TRAINING": 16 * MB, "RESUME_STATE": 1 * MB,
                 "TOKENIZER": 16 * MB}
HEADER_BYTES = 16 * MB  # a safetensors header (names, shapes, offsets) is kilobytes; its 8-byte length is checked


def max_file_bytes(file_name: str) -> int:
    """The most bytes a package file of this name may have (weights: 4 bytes per parameter, optimizer state 8)."""
    if file_name == "model.safetensors":
        return 4 * max_parameters() + HEADER_BYTES
    if file_name == "resume.safetensors":
        return 8 * max_parameters() + HEADER_BYTES
    kind = FILE_KINDS.get(file_name)
    if kind is None:
        raise ValueError(f"{file_name} is not a package file")
    return env_int(f"PLAYGROUND_MAX_{kind}_BYTES", FILE_DEFAULTS[kind])


def env_name(file_name: str) -> str:
    """The environment variable that raises the limit of this file (for messages)."""
    kind = FILE_KINDS.get(file_name)
    return f"PLAYGROUND_MAX_{kind}_BYTES" if kind else "PLAYGROUND_MAX_PARAMETERS"


def max_data_bytes() -> int:
    """Largest data file read (uncompressed); the web app's upload limit follows it."""
    return env_megabytes("PLAYGROUND_MAX_DATA_MB", 200)


def max_data_rows() -> int:
    return env_int("PLAYGROUND_MAX_DATA_ROWS", 2_000_000)


def max_session_data_bytes() -> int:
    return env_megabytes("PLAYGROUND_MAX_SESSION_DATA_MB", 512)


def job_memory_bytes() -> int:
    """What the process reading an uploaded data file, or exporting a package, may allocate beyond its start
    (playground.serving.jobs): a 100 MB TSV of Multi30k's sentences rose the peak by 809 MB as it was read."""
    return env_megabytes("PLAYGROUND_JOB_MB", 2048)


def job_seconds() -> int:
    """How long one such job may take (that 100 MB TSV: 74 s on a busy 2-core machine)."""
    return env_int("PLAYGROUND_JOB_S", 300)


# ----------------------------------------------------------------------------------------------------------
# What one quick call may cost


def max_request_chars() -> int:
    return env_int("PLAYGROUND_MAX_REQUEST_CHARS", 50_000)


def max_line_chars() -> int:
    return env_int("PLAYGROUND_MAX_LINE_CHARS", 2_000)


def max_decode_tokens() -> int:
    return env_int("PLAYGROUND_MAX_DECODE_TOKENS", 60_000)


def max_decode_bytes() -> int:
    return env_megabytes("PLAYGROUND_MAX_DECODE_MB", 256)


def max_encoder_flops() -> int:
    """Floating-point operations the encoder may spend on one request's sources (PLAYGROUND_MAX_ENCODER_GFLOP)."""
    return env_int("PLAYGROUND_MAX_ENCODER_GFLOP", 100) * 10**9


def max_attention_cells() -> int:
    return env_int("PLAYGROUND_MAX_ATTENTION_CELLS", 1_000_000)


def quick_call_seconds() -> int:
    return env_int("PLAYGROUND_QUICK_CALL_S", 20)


def workers() -> int:
    """Worker processes for quick calls (playground.runtime.workers)."""
    return env_int("PLAYGROUND_WORKERS", 2)


def max_waiting_calls() -> int:
    """Quick calls one client address may have waiting for a worker besides its one at work (the Inside tab asks for
    its four views at once); past them a call is refused at once rather than held."""
    return env_int("PLAYGROUND_MAX_WAITING_CALLS", 4)


def worker_memory_bytes() -> int:
    """What one worker may allocate beyond its start: a request that needs more is stopped, the server goes on."""
    return env_megabytes("PLAYGROUND_WORKER_MB", 1536)


def run_memory_bytes() -> int | None:
    """What a CPU training run's process may allocate beyond its start (PLAYGROUND_RUN_MB; unset: no limit of its
    own, the server's applies to it as to every process it starts)."""
    if not env_str("PLAYGROUND_RUN_MB"):
        return None
    return env_megabytes("PLAYGROUND_RUN_MB", 0)


def max_result_bytes() -> int:
    """The largest answer one quick call's worker may send back (pickled)."""
    return env_megabytes("PLAYGROUND_MAX_RESULT_MB", 64)


def max_heads() -> int:
    return env_int("PLAYGROUND_MAX_HEADS", 64)


def max_layers() -> int:
    return env_int("PLAYGROUND_MAX_LAYERS", 32)


def max_positions() -> int:
    return min(env_int("PLAYGROUND_MAX_POSITIONS", MAX_POSITIONS), MAX_POSITIONS)


def max_parquet_row_groups() -> int:
    return env_int("PLAYGROUND_MAX_PARQUET_ROW_GROUPS", 2_000)


# objects + arrays in one package JSON file, counted in its bytes before it is parsed: 14 MB of Python objects at most.
# A training record's history has a few per validation (its attention probe: layers x target positions lists), and
# its byte limit stops it near 200 validations of a 6-layer model; 5.5 M empty {} (16 MB) would take 390 MB parsed.
MAX_JSON_CONTAINERS = 200_000
# numbers and strings in one package JSON file, counted from its commas before it is parsed: ~35 bytes each parsed,
# so 100 MB at most. A real training record of 16 MB has ~2.3 M (7 bytes a number), a history of 1 M steps 4 M.
MAX_JSON_VALUES = 3_000_000
ADDED_TOKENS = 100  # added tokens a package's tokenizer may have: the playground's have its 4 special tokens


def max_history_points() -> int:
    return env_int("PLAYGROUND_MAX_HISTORY_POINTS", 20_000)


class TimeLimit(PlaygroundError):
    """A quick call ran past its time limit and was stopped."""


_call = threading.local()  # the deadline of the quick call running on this thread (Gradio runs each in a thread)


@contextmanager
def time_limit(seconds: float, advice: str):
    """Run a quick call under a deadline: `check_time()` (called between decoding steps) raises TimeLimit past it,
    saying `advice` (what to make smaller). Within another limit, the earlier deadline holds."""
    outer = getattr(_call, "deadline", None)
    mine = (time.monotonic() + seconds, seconds, advice)
    _call.deadline = outer if outer is not None and outer[0] <= mine[0] else mine
    try:
        yield
    finally:
        _call.deadline = outer


def check_time() -> None:
    """Raise TimeLimit when the quick call on this thread is past its deadline (a no-op outside one)."""
    deadline = getattr(_call, "deadline", None)
    if deadline is not None and time.monotonic() > deadline[0]:
        _call.deadline = None  # said once: the handler's own clean-up may call this again
        raise TimeLimit(time_limit_message(deadline[1], deadline[2]))


def time_limit_message(seconds: float, advice: str) -> str:
    """What a quick call stopped at its deadline says, with `advice` (what to make smaller)."""
    return (f"This took longer than the {seconds:g} s one request may run on this server, so it was stopped (the "
            f"operator sets PLAYGROUND_QUICK_CALL_S). {advice}").strip()


# ----------------------------------------------------------------------------------------------------------
# Memory this process may use


def _read_number(path: str) -> int | None:
    """An integer from a cgroup file; None for "max", a missing file or nonsense."""
    try:
        text = Path(path).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _status_bytes(field: str) -> int | None:
    """A kB field of /proc/self/status (VmSize, VmRSS, VmHWM) in bytes."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _host_available() -> int | None:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def memory_limits() -> dict[str, tuple[int, int]]:
    """{source: (limit bytes, bytes in use)} for each limit that applies to this process: cgroup v2, cgroup v1,
    the address-space rlimit. Paths are the in-container views (/sys/fs/cgroup), as on a Space."""
    found = {}
    v2 = _read_number("/sys/fs/cgroup/memory.max")
    if v2 is not None:
        found["cgroup"] = (v2, _read_number("/sys/fs/cgroup/memory.current") or 0)
    else:
        v1 = _read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes")
        if v1 is not None and v1 < NO_LIMIT:
            found["cgroup"] = (v1, _read_number("/sys/fs/cgroup/memory/memory.usage_in_bytes") or 0)
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        found["address space"] = (soft, _status_bytes("VmSize") or 0)
    return found


def available_memory_bytes() -> int | None:
    """What this process can still allocate: the smallest of what its limits leave and the host's MemAvailable."""
    candidates = [max(0, limit - used) for limit, used in memory_limits().values()]
    host = _host_available()
    if host is not None:
        candidates.append(host)
    return min(candidates) if candidates else None


def memory_limit_bytes() -> int | None:
    """The process's memory limit (its cgroup's or address-space limit, else the host's total), for messages."""
    limits = [limit for limit, _ in memory_limits().values()]
    if not limits:
        try:
            limits = [os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")]
        except (ValueError, OSError):
            return None
    return min(limits)
