"""A visitor's translate while another visitor's run trains, in one process as on a CPU Space: latency p50/p95 with
nothing training, with a run training as before (every step at once), with the run yielding to quick calls
(playground/runtime/foreground.py: what the app does), and with the run on fewer threads (a dedicated training thread
with torch.set_num_threads(1), which the app cannot do per run: see foreground.py). Rounds alternate the modes.

    python bench/quick_calls.py [--rounds 3] [--calls 20]
"""

from __future__ import annotations

import random
import statistics
import tempfile
import threading
import time

import common  # first: the allocator is chosen before PyTorch loads
import torch

from playground.core.decode import DecodeOptions, translate
from playground.data.load import load_parallel
from playground.data.stats import split_pairs
from playground.datasets.catalog import DATASETS_DIR
from playground.packages.names import SHIPPED_MODELS_DIR
from playground.packages.store import load_package
from playground.runtime.foreground import quick, yield_to_quick_calls
from playground.training.inputs import TrainData
from playground.training.presets import preset_config
from playground.training.trainer import Trainer, no_wait

MODES = ("idle", "training", "yielding", "1 training thread")


class Run:
    """A training run on its own thread until stopped; counts its steps."""

    def __init__(self, data: TrainData, out: str, threads: int | None, yielding: bool):
        cfg = preset_config("tiny", device="cpu", seed=0, max_minutes=600)
        between_steps = yield_to_quick_calls if yielding else no_wait  # as the web app's runs, or as before
        self.trainer, self.threads, self.steps = Trainer(cfg, data, out, between_steps=between_steps), threads, 0
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self) -> None:
        if self.threads:
            torch.set_num_threads(self.threads)  # this thread's pool only (and threads started after it)
        for event in self.trainer.run():
            self.steps = getattr(event, "step", self.steps)

    def __enter__(self) -> "Run":
        self.thread.start()
        while self.steps < 3:  # set-up done, training
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.trainer.stop()
        self.thread.join()


def latencies(call, calls: int, rng: random.Random) -> list[float]:
    # a person reads the result before the next
    return common.call_times(call, calls, after=lambda _: time.sleep(rng.uniform(0.1, 0.4)))


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1]


def main() -> None:
    parser = common.base_parser(__doc__.split("\n")[0], data_required=False)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=20, help="translate calls per mode and round")
    parser.add_argument("--method", default="beam", help="the translate call's decoding: greedy or beam (5)")
    parser.add_argument("--sentences", type=int, default=128,
                        help="sentences per translate call (about 0.5 s of beam search on 2 idle cores)")
    args = parser.parse_args()
    machine = common.start(args)
    folder = DATASETS_DIR / "mini-translation"
    train, val = split_pairs(load_parallel(folder / "train.tsv").pairs, seed=0)
    data = TrainData(train, val, "en", "de", "builtin:mini-translation")
    demo = load_package(SHIPPED_MODELS_DIR / "demo-en-de")
    sentences = [s for s, _ in load_parallel(folder / "test.tsv").pairs[: args.sentences]]
    opts = DecodeOptions(method=args.method)

    def call():
        translate(demo.model, demo.tokenizer, sentences, opts)

    call()  # warm
    rng = random.Random(args.seed)
    times: dict[str, list[float]] = {m: [] for m in MODES}
    rates: dict[str, list[float]] = {m: [] for m in MODES}
    for _ in range(args.rounds):
        for mode in MODES:
            with tempfile.TemporaryDirectory() as out:
                if mode == "idle":
                    times[mode] += latencies(call, args.calls, rng)
                    continue
                marked = quick(call) if mode == "yielding" else call
                with Run(data, out, 1 if mode == "1 training thread" else None, mode == "yielding") as run:
                    began, steps = time.perf_counter(), run.steps
                    times[mode] += latencies(marked, args.calls, rng)
                    rates[mode].append((run.steps - steps) / (time.perf_counter() - began))
    idle = statistics.median(times["idle"])
    rows = [[mode, statistics.median(times[mode]), p95(times[mode]), statistics.median(times[mode]) / idle,
             statistics.median(rates[mode]) if rates[mode] else float("nan")] for mode in MODES]
    common.print_table(f"translate ({args.method}, {len(sentences)} sentences, demo model) while a tiny run trains",
                       ["mode", "p50 s", "p95 s", "p50 / idle", "run steps/s"], rows)
    common.emit_json(args, {"benchmark": "quick_calls", "machine": machine, "settings": vars(args),
                            "results": {r[0]: {"p50_s": r[1], "p95_s": r[2], "steps_per_s": r[4]} for r in rows}})


if __name__ == "__main__":
    main()
