"""A shared app under load: one visitor's one-sentence translate while another visitor trains and a third sends the
largest translate requests the limits allow, against the same translate alone, in one run.

Starts `python app.py` in shared mode (PLAYGROUND_SHARED=1, the entry point a Space runs, its allocator included)
on --port with a fresh models folder under bench/results/, then drives it with one gradio_client.Client per
visitor, each from its own client address:

1. alone: the translator sends --requests one-sentence greedy translations to the shipped demo model, one after the
   other (a person pressing Translate), and the latencies are taken as the client sees them;
2. loaded: a trainer starts a run (the settings below, on the CPU, for the whole phase) and a heavy visitor sends,
   one after another, the largest translate requests the limits allow: as many lines of --heavy-words words as
   the decode-token limit lets through at the demo model's longest output (at most MAX_SENTENCES; beam 5 by default);
   once the run is training, the translator sends the same requests again.

3. under attack (--rows, issue 32): for each row of bench/attacks.py, an attacker from its own address (or
   --attackers of them, each from its own, each with --sessions sessions: a flood from one address) replays it
   again and again, from a process of its own (each row is run once before, to make its
   files and import its packages) while the translator sends the same requests;
   the server's resident memory and what its Gradio cache holds on disk are read before and after.

Prints p50 / p95 / max per phase and their ratio; --json puts them on the last line. The issue's target: p95 under
1 s while loaded or attacked (never over 3 s), on 2 cores. The app's torch threads are what it sets itself (the
container's CPU quota). --rows-only skips the training phase.
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter

from attacks import PREPARE, ROWS
from common import REPO_ROOT, RESULTS_DIR, base_parser, call_times, emit_json, print_table, start

SENTENCE = "A man in a blue shirt is riding a bicycle down the street."
TRAIN = dict(d_model=128, n_heads=4, n_encoder_layers=3, n_decoder_layers=3, d_ff=512, vocab_size=2000,
             max_sentence_tokens=64, batch_tokens=2048, max_steps=100_000, max_minutes=0, max_epochs=0, eval_every=200,
             eval_sentences=32, warmup_steps=100, lr=1e-3, schedule="inverse_sqrt", precision="fp32", device="cpu",
             seed=1)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def summary(latencies: list[float]) -> dict:
    return {"n": len(latencies), "p50_s": statistics.median(latencies), "p95_s": percentile(latencies, 0.95),
            "max_s": max(latencies)}


CACHE = RESULTS_DIR / "shared_load_cache"  # the server's Gradio cache (uploads, and the downloads it serves)


def start_server(port: int, models: str) -> subprocess.Popen:
    env = {**os.environ, "PLAYGROUND_SHARED": "1", "PLAYGROUND_TRUST_FORWARDED": "1", "GRADIO_SERVER_PORT": str(port),
           "GRADIO_SERVER_NAME": "127.0.0.1", "PLAYGROUND_MODELS_DIR": models, "GRADIO_ANALYTICS_ENABLED": "False",
           "GRADIO_TEMP_DIR": str(CACHE)}
    log = open(RESULTS_DIR / "shared_load_server.log", "w")
    server = subprocess.Popen([sys.executable, "app.py"], cwd=REPO_ROOT, env=env, stdout=log, stderr=log)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        assert server.poll() is None, "the app exited; see bench/results/shared_load_server.log"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return server
        time.sleep(0.5)
    raise TimeoutError("the app did not start")


def client(url: str, address: str):
    from gradio_client import Client

    return Client(url, verbose=False, headers={"X-Forwarded-For": address})


def translate_times(translator, requests: int, pause_s: float) -> list[float]:
    def check_and_pause(answer) -> None:
        table, note, *_ = answer
        assert len(table["data"]) == 1, note
        time.sleep(pause_s)

    return call_times(lambda: translator.predict("demo-en-de", SENTENCE, "greedy", api_name="/translate"),
                      requests, after=check_and_pause)


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        return int(status.read().split("VmRSS:")[1].split()[0]) / 1024


def cache_mb() -> float:
    """What the server's Gradio cache holds on disk: uploads, and the downloads it serves."""
    return sum(path.stat().st_size for path in CACHE.rglob("*") if path.is_file()) / 1e6


def attack(url: str, row: str, addresses: list[str], started, done, results) -> None:
    """In a process of its own (the victim's client measures from another, whose GIL thirty flooding clients would
    share): a client per entry of `addresses` replays `row` (bench/attacks.py) back to back from `started` until
    `done`; the replays' durations, the 3 answers most often given (by their first words) and the first failure go
    into `results`."""
    folder = RESULTS_DIR / "attacks"
    folder.mkdir(exist_ok=True)
    clients = [client(url, address) for address in addresses]
    for attacker in clients:  # its files made, its packages imported (each visitor sees its own uploads)
        PREPARE.get(row, ROWS[row])(url, attacker, folder)
    replays, failures, answers = [], [], Counter()

    def replay(attacker) -> None:
        while not done.is_set():
            start = time.perf_counter()
            try:
                answers[str(ROWS[row](url, attacker, folder))[:48]] += 1
            except Exception as err:  # noqa: BLE001 - a refusal the client raises is an answer too
                failures.append(repr(err)[:300])
            replays.append(time.perf_counter() - start)

    threads = [threading.Thread(target=replay, args=(attacker,), daemon=True) for attacker in clients]
    for thread in threads:
        thread.start()
    started.set()
    for thread in threads:
        thread.join(timeout=600)
    results.put((replays, failures[:1], dict(answers.most_common(3))))


def under_attack(url: str, pid: int, translator, row: str, requests: int, pause_s: float, attackers: int = 1,
                 sessions: int = 1) -> dict:
    """The translator's latencies while `attackers`, each from its own address with `sessions` sessions, replay
    `row` over and over (attack); the replays, how long one took, the first failure, what they were answered, and
    the server's RSS before and after."""
    import multiprocessing

    fork = multiprocessing.get_context("fork")  # the attackers' clients are made in the child
    started, done, results = fork.Event(), fork.Event(), fork.Queue()
    addresses = [f"203.0.{113 + i}.{ord(row)}" for i in range(attackers) for _ in range(sessions)]
    attackers_process = fork.Process(target=attack, args=(url, row, addresses, started, done, results))
    attackers_process.start()
    while not started.wait(1):
        assert attackers_process.is_alive(), "the attackers' process ended before its replays began"
    before, cache_before = rss_mb(pid), cache_mb()
    latencies = translate_times(translator, requests, pause_s)
    done.set()
    replays, failures, answers = results.get(timeout=600)
    attackers_process.join(timeout=60)
    return {**summary(latencies), "replays": len(replays), "replay_s": statistics.median(replays) if replays else None,
            "raised": failures, "answered": answers, "rss_before_mb": before, "rss_after_mb": rss_mb(pid),
            "cache_before_mb": cache_before, "cache_after_mb": cache_mb()}


def heaviest_lines(method: str) -> int:
    """The most lines one translate request to the demo model may send: each line may decode up to the package's
    longest output (x 5 beams), and the request's total is bounded by limits.max_decode_tokens()."""
    from playground.core.decode import output_limit
    from playground.core.model import TransformerConfig
    from playground.limits import max_decode_tokens
    from playground.packages.format import read_json
    from playground.ui.tabs.translate import MAX_SENTENCES

    cfg = TransformerConfig(**read_json(REPO_ROOT / "models" / "demo-en-de" / "config.json")["model"])
    per_line = output_limit(cfg, cfg.max_positions, None) * (5 if method == "beam" else 1)
    return min(MAX_SENTENCES, max_decode_tokens() // per_line)


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0], data_required=False)
    parser.add_argument("--port", type=int, default=7831)
    parser.add_argument("--requests", type=int, default=40, help="one-sentence translations per phase")
    parser.add_argument("--pause", type=float, default=0.25, help="seconds between them")
    parser.add_argument("--heavy-words", type=int, default=40, help="words per line of the heavy requests")
    parser.add_argument("--heavy-method", default="beam", choices=["greedy", "beam"])
    parser.add_argument("--rows", default=",".join(ROWS), help="issue 32's rows to replay (bench/attacks.py)")
    parser.add_argument("--attackers", default="1", help="attackers replaying each row at once, each from its own "
                        "address; several counts (1,2) replay each row once per count")
    parser.add_argument("--sessions", type=int, default=1, help="sessions (gradio_client Clients) per attacker "
                        "address, each replaying the row back to back")
    parser.add_argument("--rows-only", action="store_true", help="skip the phase with a training run")
    args = parser.parse_args()
    info = start(args)

    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    models = RESULTS_DIR / "shared_load_models"
    subprocess.run(["rm", "-rf", str(models), str(CACHE)], check=True)
    server = start_server(args.port, str(models))
    url = f"http://127.0.0.1:{args.port}/"
    try:
        translator = client(url, "198.51.100.1")
        translate_times(translator, 3, 0)  # the demo model loaded and cached
        alone = translate_times(translator, args.requests, args.pause)
        flood = f" ({args.sessions} sessions each)" if args.sessions > 1 else ""
        attacked = {row + (f" x{count}" if count > 1 else "") + flood:
                    under_attack(url, server.pid, translator, row, args.requests, args.pause, count, args.sessions)
                    for row in filter(None, args.rows.split(",")) for count in map(int, args.attackers.split(","))}
        if args.rows_only:
            return report_rows(args, info, alone, attacked)

        trainer, heavy = client(url, "198.51.100.2"), client(url, "198.51.100.3")
        trainer.predict("mini-translation", 0.05, api_name="/load_builtin")
        run = trainer.submit(model_name="load", api_name="/train", **TRAIN)
        words = ("the quick brown fox jumps over a lazy dog near the river bank " * 10).split()[:args.heavy_words]
        lines = heaviest_lines(args.heavy_method)
        big_request = "\n".join(" ".join(words) for _ in range(lines))
        done, heavy_times = threading.Event(), []

        def send_heavy() -> None:
            while not done.is_set():
                start = time.perf_counter()
                try:
                    table, note, *_ = heavy.predict("demo-en-de", big_request, args.heavy_method,
                                                    api_name="/translate")
                    assert table["data"], f"the heavy request was refused: {note}"  # then it measures nothing
                except Exception:  # noqa: BLE001 - the server stopped under the last one
                    if done.is_set():
                        return
                    raise
                heavy_times.append(time.perf_counter() - start)

        sender = threading.Thread(target=send_heavy, daemon=True)
        sender.start()
        deadline = time.monotonic() + 120
        while len(run.outputs()) < 2 and time.monotonic() < deadline:
            time.sleep(1)  # until the run reports its first training steps
        loaded = translate_times(translator, args.requests, args.pause)
        done.set()
        trainer.predict(api_name="/stop")
    finally:
        server.terminate()
        server.wait(timeout=60)

    report_rows(args, info, alone, attacked, emit=False)
    result = {"alone": summary(alone), "loaded": summary(loaded), "attacked": attacked,
              "heavy_request_s": summary(heavy_times) if heavy_times else None,
              "heavy_request": f"{lines} lines x {args.heavy_words} words, {args.heavy_method}",
              "p95_ratio": summary(loaded)["p95_s"] / summary(alone)["p95_s"], "machine": info}
    rows = [[name, result[name]["n"], f"{result[name]['p50_s']:.3f}", f"{result[name]['p95_s']:.3f}",
             f"{result[name]['max_s']:.3f}"] for name in ("alone", "loaded")]
    print_table(f"One-sentence translate (demo-en-de, greedy) as a visitor sees it; loaded = another visitor trains, "
                f"a third sends {result['heavy_request']}", ["phase", "n", "p50 s", "p95 s", "max s"], rows)
    if heavy_times:
        print(f"heavy requests answered: {len(heavy_times)}, median {statistics.median(heavy_times):.1f} s")
    print(f"p95 loaded / alone: {result['p95_ratio']:.2f}x (target: loaded p95 < 1 s)")
    emit_json(args, result)


def report_rows(args, info: dict, alone: list[float], attacked: dict, emit: bool = True) -> None:
    """The table of the translator's latencies under each row's attack (and, emit, the JSON line)."""
    rows = [[name, result["n"], f"{result['p50_s']:.3f}", f"{result['p95_s']:.3f}", f"{result['max_s']:.3f}",
             result["replays"], f"{result['replay_s'] or 0:.2f}",
             f"{result['rss_before_mb']:.0f} -> {result['rss_after_mb']:.0f}",
             f"{result['cache_before_mb']:.0f} -> {result['cache_after_mb']:.0f}"]
            for name, result in [("alone", {**summary(alone), "replays": 0, "replay_s": 0, "rss_before_mb": 0,
                                            "rss_after_mb": 0, "cache_before_mb": 0, "cache_after_mb": 0}),
                                 *attacked.items()]]
    print_table("One-sentence translate (demo-en-de, greedy) while an attacker replays each row of issue 32",
                ["row", "n", "p50 s", "p95 s", "max s", "replays", "replay s", "server RSS MB", "cache MB"], rows)
    for name, result in attacked.items():
        print(f"{name}: {result['answered'] or result['raised']}")
    if emit:
        emit_json(args, {"alone": summary(alone), "attacked": attacked, "machine": info})


if __name__ == "__main__":
    main()
