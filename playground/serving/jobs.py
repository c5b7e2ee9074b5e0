"""A visitor's files read by native code outside the quick calls, each in a worker process of its own
(playground.runtime.workers): an uploaded data file (TSV, CSV, JSONL, TMX through lxml, Parquet through pyarrow) and
the 🤗 transformers and CTranslate2 exports of a visitor's package (its tokenizer parsed, its weights loaded and
converted). A crash, a runaway allocation or a job that does not end costs that job only, with a message, never the
server. Each job process answers one job and is then replaced, so what a job allocated goes back to the system and
nothing of one visitor's job stays for the next; the next one is started meanwhile, importing nothing but this
module (18 MB resident): a job imports what it needs (pyarrow, transformers) when it runs. The pairs of a data file
come back packed (about one byte a character), at most what one session may hold.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Callable

from playground import limits
from playground.data.load import load_parallel
from playground.data.packed import session_pairs
from playground.data.rows import ParallelData
from playground.settings import MB

JOBS = 1  # jobs at work at once (in turn across addresses); one more is kept for short ones (the pool's spare)

_pool = None
_pool_lock = threading.Lock()


def read_pairs(path: str, tgt_path: str | None, max_words: int,
               language_hint: tuple[str, str] | None) -> ParallelData:
    """load_parallel of one file (or two aligned ones), the pairs packed as a session keeps them."""
    data = load_parallel(path, tgt_path, max_words=max_words, language_hint=language_hint)
    data.pairs = session_pairs(data.pairs, "This data")
    return data


def export_archive(package_folder: str, fmt: str, quantization: str, scratch: str, dest: str) -> str:
    """The package exported to `fmt` (playground.export) and zipped (the zip holds one folder) in the folder
    `scratch`, then moved into `dest`, replacing a zip of the same name whole; returns the zip's path."""
    from playground.export import export_package

    name = Path(package_folder).name + ("-transformers" if fmt == "transformers" else f"-ct2-{quantization}")
    export_package(package_folder, fmt, str(Path(scratch) / name), quantization)
    archive = shutil.make_archive(str(Path(scratch) / name), "zip", scratch, name)
    return str(Path(archive).replace(Path(dest) / Path(archive).name))


def pool():
    """The jobs' pool, started at its first job: PLAYGROUND_JOB_MB each, answers of at most
    PLAYGROUND_MAX_SESSION_DATA_MB (and a little for the counts of dropped rows)."""
    global _pool
    from playground.runtime.workers import WorkerPool

    with _pool_lock:
        if _pool is None:
            _pool = WorkerPool(JOBS, limits.job_memory_bytes(), limits.max_session_data_bytes() + 16 * MB,
                               preload=[__name__], waiting=1, calls_per_worker=1, memory_setting="PLAYGROUND_JOB_MB",
                               crash_advice="Check the file you sent (a data file: read it with pandas, for one), or "
                                            "send a smaller one.")
        return _pool


def run(task: Callable, *args, advice: str = "", seconds: float | None = None, gone: Callable[[], bool] | None = None,
        owner: str = ""):
    """task(*args) in a job process, stopped after `seconds` (PLAYGROUND_JOB_S) or as soon as `gone()` says its
    client has left; the jobs of one `owner` (a client's address) run one at a time."""
    return pool().call(task, *args, seconds=seconds or limits.job_seconds(), advice=advice, gone=gone, owner=owner)
