"""Training as a sequence of time-limited calls (ZeroGPU), one continuous run for the person watching.

On a ZeroGPU Space each `@spaces.GPU` call gets a GPU for a declared number of seconds and is killed past it;
every argument and every value it yields crosses a process boundary by pickle. So the run is cut into chunks:
`train_chunk` resumes the package (exactly: weights, optimizer moments, batch position, dropout stream), trains
until its share of the call's time is used, and saves; `ChunkedRun` calls it again and again and to its consumer
looks like one playground.training.trainer.Trainer: `run()` yields one stream of events (one Start, the steps, the
validations, one Done), `stop()` ends it between or within chunks, `history` holds the whole curve.

The tokenizer is trained and the pairs encoded once, before the first call (playground.training.prepared): a call
is handed the folder they were written to, never the corpus. Each call's seconds follow the measured step time: a run
with little left asks for a short call (which ZeroGPU admits on a nearly spent quota, and queues first). When the
platform gives no GPU for a call (playground.errors.GpuUnavailable: a spent quota, an aborted or crashed worker),
the run ends with an Interrupted event, its package as saved by its last completed call; a call whose duration it
refuses as too long (GpuDurationTooLong) is asked again at half the seconds, down to MIN_CALL_S, and later runs in
this process start from the seconds it admitted.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from contextlib import closing
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Iterator

import torch

from playground import errors
from playground.errors import GpuDurationTooLong, GpuUnavailable, PlaygroundError, TrainingError
from playground.packages.format import RESUME_STATE, TRAINING, read_json
from playground.packages.scores import EVAL_KEYS
from playground.runtime.foreground import QUICK_CALLS_ENV, quick_calls_file, yield_to_quick_calls
from playground.runtime.workers import limit_growth, python_command
from playground.training import events
from playground.training.checkpoint import History
from playground.training.config import TrainConfig
from playground.training.finetune import finetune_config
from playground.training.inputs import TrainData
from playground.training.prepared import load_prepared, prepare, train_data
from playground.training.trainer import Trainer

PREPARE_REQUEST = "request.json"  # what prepare_in_fresh_process's child prepares

TERMINATED = threading.Event()  # in_fresh_process's child: its parent went away (SIGTERM); the run stops and saves
WORK_SHARE = 0.6  # of a call's seconds spent training; the rest covers loading, a last validation and the save
MIN_CALL_S = 15  # the shortest call asked for: loading the package and a validation must fit in it


def train_chunk(cfg: dict, prepared: str, out_dir: str, resume_from: str | None, seconds: float,
                stop_file: str) -> Iterator[events.Event]:
    """One call's worth of a run: resume from `resume_from` (None: start the run) with the data `prepared` holds
    (playground.training.prepared), train for about WORK_SHARE of `seconds`, save. Ends with a Paused event when the run
    goes on, or with the run's Done or Error event. Creating `stop_file` stops the run after the current step (it
    validates and saves as usual)."""
    began = time.monotonic()
    data, ready = load_prepared(prepared)
    trainer = Trainer(TrainConfig.from_dict(cfg), data, out_dir, resume_from=resume_from, prepared=ready,
                      between_steps=yield_to_quick_calls,  # a visitor's translate first on a shared CPU
                      init_from=ready.init_from)  # a fine-tuned run's first call starts from its base
    trainer.stop_rules.pause_after_s = max(WORK_SHARE * seconds - (time.monotonic() - began), 0.0)
    ended = False
    for event in trainer.run():
        if os.path.exists(stop_file) or TERMINATED.is_set():
            trainer.stop()
        ended = ended or isinstance(event, (events.Done, events.Error))
        yield event
    if not ended:
        yield events.Paused(trainer.step)


def in_fresh_process(cfg: dict, prepared: str, out_dir: str, resume_from: str | None, seconds: float,
                     stop_file: str) -> Iterator[events.Event]:
    """train_chunk in a Python process of its own (`python -m playground.training.chunked`), its events sent back as
    JSON lines: a crash, an abort or a runaway allocation there ends this run only (its package keeps its last save),
    never the server; on the CPU it may allocate at most PLAYGROUND_RUN_MB when that is set. On ZeroGPU it also keeps
    CPU training away from the `spaces` that patched this process's torch (torch.cuda.is_available() says True here,
    and torch's own optimizer step then asks CUDA whether it is capturing a graph, which fails). Closing it stops the
    run, which validates and saves first, in its own time."""
    command, env = python_command("playground.training.chunked",
                                  json.dumps([cfg, prepared, out_dir, resume_from, seconds, stop_file]))
    env[QUICK_CALLS_ENV] = str(quick_calls_file())  # its steps wait for this process's quick calls
    env["OMP_NUM_THREADS"] = str(torch.get_num_threads())  # the threads this server was given (runtime/threads.py)
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, encoding="utf-8", env=env)
    try:
        for line in child.stdout:
            message = json.loads(line)
            if "refused" in message:
                kind = getattr(errors, message["refused"], PlaygroundError)
                raise kind(message["message"])
            yield getattr(events, message["event"])(**message["fields"])
        if child.wait() != 0:
            raise TrainingError("The training process ended early (its log says why; a run that needs more memory "
                                "than this server allows ends so); the package keeps its last save: continue it "
                                "again, or train a smaller model.")
    finally:
        if child.poll() is None:  # the consumer went away: the run validates, saves and ends (SIGTERM, see below) in
            child.terminate()     # its own time; the page that closed, or Gradio's cancel, is not kept waiting
            threading.Thread(target=drain, args=(child,), daemon=True, name="playground-run-end").start()


def drain(child: subprocess.Popen) -> None:
    """Read a run's process to its end (its last events unread: nobody waits for them) so that it never blocks
    writing them, and reap it."""
    for _ in child.stdout:
        pass
    child.wait()


def chunk_duration(cfg: dict, prepared: str, out_dir: str, resume_from: str | None, seconds: float,
                   stop_file: str) -> int:
    """train_chunk's declared duration (`spaces.GPU(duration=...)` takes a function of the call's arguments): the
    seconds ChunkedRun gave the call."""
    return math.ceil(seconds)


def saved_step(folder: Path) -> int:
    """The step of the run state saved in `folder` (0: none saved yet)."""
    try:
        return int(json.loads((folder / RESUME_STATE).read_text(encoding="utf-8"))["step"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


class ChunkedRun:
    """A training run made of calls of `run_chunk` (train_chunk wrapped in `spaces.GPU`, or train_chunk itself),
    each given at most `chunk_s` seconds. Behaves like a Trainer for its consumer: run(), stop(), history,
    out_dir."""

    admitted_s = math.inf  # the longest call seconds the platform has not refused as too long, in this process

    def __init__(self, cfg: TrainConfig, data: TrainData, out_dir: str | Path, resume_from: str | Path | None = None,
                 *, chunk_s: float = 60, run_chunk: Callable[..., Iterator[events.Event]] = train_chunk,
                 init_from: str | Path | None = None):
        self.init_from = None if init_from is None else str(init_from)  # fine-tuning: the base package
        if init_from is not None and resume_from is None:  # every call's settings: the base's model and tokenizer
            cfg = finetune_config(cfg, Path(init_from))
        self.cfg, self.data, self.out_dir, self.run_chunk = cfg, data, Path(out_dir), run_chunk
        self.chunk_s = min(chunk_s, ChunkedRun.admitted_s)
        self.prepared = self.out_dir.parent / f".{self.out_dir.name}.prepared-{uuid.uuid4().hex[:8]}"
        self.resume_from = str(resume_from) if resume_from is not None else None
        self.stop_file = self.out_dir.parent / f".{self.out_dir.name}.stop-{uuid.uuid4().hex[:8]}"
        self.history = History()
        if resume_from is not None:  # the charts continue the earlier steps, as a resumed Trainer's do
            training = read_json(Path(resume_from) / TRAINING)
            self.history = History(**training["history"])
        self.chunks = 0
        self.stop_requested = threading.Event()

    def stop(self) -> None:
        self.stop_requested.set()  # what the Train tab reads to say "Stopping…", as of a Trainer
        self.stop_file.touch()

    def record(self, event: events.Event) -> None:
        """Keep the history the way Trainer.run keeps its own: steps, losses, rates and times, then validations."""
        if isinstance(event, events.Step):
            self.history.record_step(event.step, event.loss, event.lr, event.elapsed)
        elif isinstance(event, events.Eval):
            self.history.evals.append({k: getattr(event, k) for k in EVAL_KEYS})

    def call_seconds(self, first: events.Step | None, last: events.Step | None) -> float:
        """The next call's seconds: what the run has left at the speed of the call before (its first to its last
        step, validations included), with the share for loading and saving; at most chunk_s, at least MIN_CALL_S."""
        if first is None or last is None or last.step <= first.step:
            return self.chunk_s
        step_s = (last.elapsed - first.elapsed) / (last.step - first.step)
        left = []
        if last.planned_steps:
            left.append((last.planned_steps - last.step) * step_s)
        if self.cfg.max_minutes:
            left.append(self.cfg.max_minutes * 60 - last.elapsed)
        if not left:
            return self.chunk_s
        return min(self.chunk_s, max(MIN_CALL_S, (min(left) + step_s) / WORK_SHARE))

    def run(self) -> Iterator[events.Event]:
        resume_from = self.resume_from
        try:
            # once, here: no call spends GPU time on it
            prepare_in_fresh_process(self.cfg, self.data, self.prepared, resume_from, self.init_from)
            seconds = self.chunk_s
            while True:
                self.chunks += 1
                last, first_step, last_step = None, None, None
                chunk = self.run_chunk(self.cfg.to_dict(), str(self.prepared), str(self.out_dir), resume_from,
                                       seconds, str(self.stop_file))
                try:
                    with closing(chunk):  # a closed consumer closes the chunk too: its trainer saves
                        for event in chunk:
                            last = event
                            if isinstance(event, events.Step):
                                first_step, last_step = first_step or event, event
                            seam = isinstance(event, events.Start) and self.chunks > 1
                            if isinstance(event, events.Paused) or seam:
                                continue  # one run for the person: one "start", no seams
                            self.record(event)
                            yield event
                except GpuDurationTooLong as err:
                    if seconds <= MIN_CALL_S or last is not None:  # nothing shorter to ask, or the call had begun
                        yield events.Interrupted(str(err), saved_step(self.out_dir))
                        return
                    seconds = max(MIN_CALL_S, seconds / 2)  # the same call again, shorter
                    ChunkedRun.admitted_s = self.chunk_s = min(ChunkedRun.admitted_s, seconds)
                    self.chunks -= 1
                    continue
                except GpuUnavailable as err:  # refused, aborted or crashed: the package stays as its last call saved
                    yield events.Interrupted(str(err), saved_step(self.out_dir))
                    return
                if not isinstance(last, events.Paused):
                    return
                resume_from = str(self.out_dir)  # a paused chunk has saved its state there
                seconds = self.call_seconds(first_step, last_step)
        finally:
            self.stop_file.unlink(missing_ok=True)
            shutil.rmtree(self.prepared, ignore_errors=True)


def prepare_in_fresh_process(cfg: TrainConfig, data: TrainData, folder: Path, resume_from: str | Path | None,
                             init_from: str | None = None) -> None:
    """prepared.prepare in a Python process of its own (`python -m playground.training.chunked --prepare FOLDER`):
    training the tokenizer and encoding the pairs run native code on a visitor's text, so a crash or a runaway
    allocation there ends this run before it starts (limited as a CPU run is: limit_cpu_run), never the server."""
    folder.mkdir(parents=True, exist_ok=True)
    request = folder / PREPARE_REQUEST
    request.write_text(json.dumps([cfg.to_dict(), asdict(data), None if resume_from is None else str(resume_from),
                                   init_from]), encoding="utf-8")
    command, env = python_command("playground.training.chunked", "--prepare", str(folder))
    done = subprocess.run(command, env=env, stdout=subprocess.PIPE, text=True, encoding="utf-8")
    request.unlink(missing_ok=True)
    for line in done.stdout.splitlines():
        message = json.loads(line)
        raise getattr(errors, message["refused"], PlaygroundError)(message["message"])
    if done.returncode != 0:
        raise TrainingError("Preparing this run's data (training its tokenizer, encoding the pairs) ended early, so "
                            "the run did not start: the machine may not have the memory it needed. Try a smaller "
                            "vocabulary, or less data.")


def prepare_here(folder: Path) -> None:
    """The child of prepare_in_fresh_process: the request its parent wrote, prepared in this process."""
    cfg, data, resume_from, init_from = json.loads((folder / PREPARE_REQUEST).read_text(encoding="utf-8"))
    limit_cpu_run({**cfg, "device": "cpu"})  # tokenizers and encoding run on the CPU, whatever the run's device
    prepare(TrainConfig.from_dict(cfg), train_data(data), folder, resume_from, init_from)


def limit_cpu_run(cfg: dict) -> None:
    """In a run's own process: a CPU run may allocate at most PLAYGROUND_RUN_MB (when set) beyond its start. A GPU
    run is not limited so: CUDA maps more address space than such a limit allows."""
    from playground import limits
    from playground.runtime.device import resolve_device

    memory = limits.run_memory_bytes()
    if memory is not None and resolve_device(cfg.get("device", "auto")).type == "cpu":
        limit_growth(memory)


# in_fresh_process's child (one train_chunk, its events as JSON lines on stdout), or prepare_in_fresh_process's
# (--prepare FOLDER)
if __name__ == "__main__":
    import signal

    signal.signal(signal.SIGTERM, lambda *_: TERMINATED.set())
    try:
        if sys.argv[1] == "--prepare":
            prepare_here(Path(sys.argv[2]))
        else:
            arguments = json.loads(sys.argv[1])
            limit_cpu_run(arguments[0])
            for event in train_chunk(*arguments):
                print(json.dumps({"event": type(event).__name__, "fields": asdict(event)}), flush=True)
    except PlaygroundError as err:
        print(json.dumps({"refused": type(err).__name__, "message": str(err)}), flush=True)
