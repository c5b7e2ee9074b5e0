"""Decoding speed: the project's cached greedy search versus recomputing the whole prefix every step, plus
sampling and beam 5, and the same model exported to CTranslate2 (float32 and int8, greedy and beam 5; needs
requirements-export.txt), at batch 1 and 64; and one sentence through translate() end to end (the UI's latency).

Every search produces exactly --steps tokens per sentence (<eos> is forbidden, so random weights never stop
early): cached and uncached greedy, sampling and beam search do the same number of steps per sentence.

CTranslate2 is timed in a child process of its own: it brings its own copy of libgomp, a second OpenMP runtime beside
PyTorch's, and with it loaded our batch-1 greedy ran 1.5x slower (docs/BENCHMARKS.md, section 2). Each system's
fastest thread count at batch 1: run it with --threads 1 and with --threads 2.

    python bench/decode_speed.py --data ../shared/data/multi30k
    python bench/decode_speed.py --data ../shared/data/multi30k --batch-sizes 1 --threads 1
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import common  # first: the allocator is chosen before PyTorch loads
import torch

from playground.core.decode import DecodeOptions, beam_search, greedy_or_sample, source_ids, translate
from playground.core.model import Transformer, model_device
from playground.core.quantize import int8_linears
from playground.core.sequences import pad_batch
from playground.core.tokenizer import PairTokenizer, train_tokenizer
from playground.packages.store import load_package
from playground.runtime.device import autocast, resolve_device
from playground.training.presets import preset_config

Search = Callable[[Transformer, torch.Tensor], list[list[int]]]  # padded sources [B,S] -> token ids per sentence


@torch.inference_mode()
def uncached_greedy(model: Transformer, src: torch.Tensor, steps: int) -> list[list[int]]:
    """Greedy search without a cache: every step runs model(src, prefix) on the whole prefix (the encoder too)
    and keeps the last position's argmax."""
    prefix = torch.full((src.size(0), 1), model.cfg.bos_id, dtype=torch.long, device=src.device)
    for _ in range(steps):
        next_token = model(src, prefix)[:, -1].argmax(-1)
        prefix = torch.cat([prefix, next_token[:, None]], dim=1)
    return prefix[:, 1:].tolist()


def project_search(opts: DecodeOptions) -> Search:
    search = beam_search if opts.method == "beam" else greedy_or_sample
    return lambda model, src: [hyps[0].ids for hyps in search(model, src, opts).hypotheses]


def searches(steps: int, beam_size: int) -> dict[str, Search]:
    return {
        "greedy, cached": project_search(DecodeOptions("greedy", max_output_tokens=steps)),
        "greedy, uncached": lambda model, src: uncached_greedy(model, src, steps),
        "sample, cached": project_search(DecodeOptions("sample", max_output_tokens=steps)),
        f"beam {beam_size}, cached": project_search(DecodeOptions("beam", max_output_tokens=steps,
                                                                  beam_size=beam_size)),
    }


def int8_searches(quantized: Transformer, steps: int, beam_size: int) -> dict[str, Search]:
    """Our cached greedy and beam search on the model with int8 linear layers (core/quantize.py). CPU only."""
    greedy = project_search(DecodeOptions("greedy", max_output_tokens=steps))
    beam = project_search(DecodeOptions("beam", max_output_tokens=steps, beam_size=beam_size))
    return {"greedy, int8": lambda _model, src: greedy(quantized, src),
            f"beam {beam_size}, int8": lambda _model, src: beam(quantized, src)}


def ctranslate2_searches(model: Transformer, tokenizer: PairTokenizer, steps: int, beam_size: int,
                         threads: int) -> dict[str, Search]:
    """The model exported to CTranslate2 (float32 and int8), greedy and beam, each producing exactly `steps` tokens
    (min_decoding_length = max_decoding_length keeps <eos> out, as forbid_eos does for ours). CPU only."""
    try:
        import ctranslate2
    except ImportError:
        print("ctranslate2 is not installed (pip install -r requirements-export.txt): no CTranslate2 rows")
        return {}
    from playground.export.ctranslate2 import write_ctranslate2

    src_vocab, tgt_vocab, cfg = tokenizer.src_tokenizer, tokenizer.tgt_tokenizer, model.cfg

    def search(translator, beams: int) -> Search:
        def run(_model: Transformer, src: torch.Tensor) -> list[list[int]]:
            # our sources end with <eos>, which the exported model appends itself
            tokens = [[src_vocab.id_to_token(i) for i in row if i != cfg.pad_id][:-1] for row in src.tolist()]
            results = translator.translate_batch(tokens, beam_size=beams, min_decoding_length=steps,
                                                 max_decoding_length=steps, max_batch_size=len(tokens))
            return [[tgt_vocab.token_to_id(t) for t in r.hypotheses[0]] for r in results]
        return run

    runs, folder = {}, Path(tempfile.mkdtemp(prefix="ct2-bench-"))
    for quantization in ("float32", "int8"):
        write_ctranslate2(model.cpu(), tokenizer, folder / quantization, quantization)
        translator = ctranslate2.Translator(str(folder / quantization), device="cpu", intra_threads=threads)
        runs[f"CTranslate2 {quantization} greedy"] = search(translator, 1)
        runs[f"CTranslate2 {quantization} beam {beam_size}"] = search(translator, beam_size)
    return runs


def forbid_eos(model: Transformer) -> None:
    """Make <eos> impossible (a logit bias of -inf) so every search runs to its length limit. A bias, not a hook on
    the output layer: a model with hooks decodes through its modules (core/decoder_step.py)."""
    bias = torch.zeros(model.cfg.tgt_vocab_size, device=model_device(model))
    bias[model.cfg.eos_id] = float("-inf")
    model.cfg.final_logits_bias = True
    model.register_buffer("final_logits_bias", bias)


# ----------------------------------------------------------------------------------------------------------
# Timing


@dataclass
class Timing:
    seconds: float = 0.0
    sentences: int = 0
    tokens: int = 0
    calls: int = 0


def time_searches(model: Transformer, batches: list[torch.Tensor], runs: dict[str, Search], seconds: float,
                  precision: str, steps: int, cpu_time: bool = False) -> dict[str, Timing]:
    """Rounds in which every search decodes the same batch (so all do the same work, and a change in load hits
    all alike), until the slowest search has run for `seconds` (of this process's CPU time with `cpu_time`)."""
    device = batches[0].device
    timings = {name: Timing() for name in runs}
    for round_ in itertools.count():
        src = batches[round_ % len(batches)]
        for name, search in runs.items():
            with common.stopwatch(device) as elapsed, autocast(device, precision):
                ids = search(model, src)
            t = timings[name]
            t.seconds += elapsed.cpu if cpu_time else elapsed.wall
            t.sentences, t.tokens, t.calls = t.sentences + len(ids), t.tokens + sum(map(len, ids)), t.calls + 1
            if any(len(x) != steps for x in ids):
                raise AssertionError(f"{name} produced {sorted({len(x) for x in ids})} tokens, not {steps}")
        if max(t.seconds for t in timings.values()) >= seconds:
            return timings


def agreement(model: Transformer, src: torch.Tensor, runs: dict[str, Search]) -> float:
    """Share of tokens where cached and uncached greedy agree (should be ~1: the cache changes nothing)."""
    cached, uncached = runs["greedy, cached"](model, src), runs["greedy, uncached"](model, src)
    pairs = [(a, b) for x, y in zip(cached, uncached) for a, b in zip(x, y)]
    return sum(a == b for a, b in pairs) / len(pairs)


def translate_latency(model: Transformer, tokenizer: PairTokenizer, sentence: str, method: str, repeats: int,
                      weights: str = "fp32") -> dict:
    opts = DecodeOptions(method)
    # the first call is reported separately (cold caches)
    outputs = []
    times = common.call_times(lambda: translate(model, tokenizer, [sentence], opts)[0].best, repeats + 1,
                              after=outputs.append)
    best = outputs[-1]
    return {"method": method, "weights": weights, "first_ms": 1000 * times[0],
            "median_ms": 1000 * common.median(times[1:]), "output_tokens": len(best.ids)}


# ----------------------------------------------------------------------------------------------------------


def small_model(tokenizer: PairTokenizer, device: torch.device, seed: int) -> Transformer:
    torch.manual_seed(seed)
    cfg = preset_config("small").model_config(tokenizer.src_vocab_size, tokenizer.tgt_vocab_size, tokenizer.joint)
    return Transformer(cfg).to(device).eval()


def sentences_and_tokenizer(data: str | None, vocab_size: int) -> tuple[list[str], PairTokenizer, str]:
    """Multi30k validation sources and a BPE trained on Multi30k train; without --data, the built-in toy data."""
    if data:
        train, label = common.load_split(data, "train"), "Multi30k val"
        sources = [s for s, _ in common.load_split(data, "val")]
    else:
        train = common.load_pairs(None, "train")
        sources, label = [s for s, _ in train], "built-in mini-translation"
    return sources, train_tokenizer(train, vocab_size=vocab_size), label


def timed_rows(model: Transformer, ids: list[list[int]], runs: dict[str, Search], args: argparse.Namespace,
               device: torch.device) -> dict:
    """Each search's speed at each --batch-sizes ("name @ batch": its row), and how often cached and uncached greedy
    agree where both ran."""
    results = {}
    for batch_size in args.batch_sizes:
        batches = [pad_batch(ids[i : i + batch_size], pad_id=model.cfg.pad_id).to(device)
                   for i in range(0, len(ids), batch_size)]
        random.Random(args.seed).shuffle(batches)  # any prefix of the rounds mixes short and long sentences
        timings = time_searches(model, batches, runs, args.seconds, args.precision, args.steps, args.cpu_time)
        for name, t in timings.items():
            results[f"{name} @ {batch_size}"] = {
                "batch_size": batch_size, "sentences_per_s": t.sentences / t.seconds,
                "tokens_per_s": t.tokens / t.seconds, "ms_per_sentence": 1000 * t.seconds / t.sentences}
        if "greedy, uncached" in runs:
            results[f"greedy agreement @ {batch_size}"] = agreement(model, batches[0], runs)
    return results


def ctranslate2_apart() -> dict:
    """The CTranslate2 rows, timed by this script with the same arguments in a child process (see the docstring);
    none where it is not installed."""
    argv = [a for a in sys.argv[1:] if a != "--json"]
    child = subprocess.run([sys.executable, __file__, *argv, "--ctranslate2-only"], capture_output=True, text=True)
    if child.returncode != 0:
        raise RuntimeError(f"the CTranslate2 child failed:\n{child.stderr[-3000:]}")
    last = child.stdout.strip().splitlines()[-1]
    if not last.startswith("{"):  # "ctranslate2 is not installed ..."
        print(last)
        return {}
    return json.loads(last)


def main() -> None:
    parser = common.base_parser(__doc__.split("\n")[0], data_required=False)
    parser.add_argument("--steps", type=int, default=32, help="tokens decoded per sentence by every search")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--beam-size", type=int, default=5)
    parser.add_argument("--sentences", type=int, default=256, help="source sentences cycled through")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds the slowest search runs, per batch size")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"], help="autocast for the searches")
    parser.add_argument("--repeats", type=int, default=5, help="timed translate() calls per method")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time the searches by this process's CPU time, not wall time: on a machine others share, "
                             "with --threads 1 (no threads spinning while they wait for a core)")
    parser.add_argument("--package", help="time translate() with this trained package instead of random weights")
    parser.add_argument("--ctranslate2-only", action="store_true", help=argparse.SUPPRESS)  # the child that times it
    args = parser.parse_args()

    machine = common.start(args)
    device = resolve_device(args.device)
    sources, tokenizer, label = sentences_and_tokenizer(args.data, preset_config("small").vocab_size)
    model = small_model(tokenizer, device, args.seed)
    ids = sorted(source_ids(tokenizer, sources[: args.sentences], model.cfg), key=len)  # as translate() batches
    if args.ctranslate2_only:  # exported before forbid_eos: CTranslate2 keeps <eos> out with min_decoding_length
        runs = ctranslate2_searches(model, tokenizer, args.steps, args.beam_size, torch.get_num_threads())
        if runs:  # else it said why not
            print(json.dumps(timed_rows(model, ids, runs, args, device)))
        return
    runs = searches(args.steps, args.beam_size)
    forbid_eos(model)
    if device.type == "cpu":
        runs |= int8_searches(int8_linears(model), args.steps, args.beam_size)  # the copy keeps forbid_eos's bias
    print(f"small preset ({model.num_parameters():,} parameters, random weights), {len(ids)} {label} sources, "
          f"{args.steps} tokens per sentence, {args.precision}")

    results = timed_rows(model, ids, runs, args, device)
    if device.type == "cpu":
        results |= ctranslate2_apart()
    rows = [[name.split(" @ ")[0], r["batch_size"], r["sentences_per_s"], r["tokens_per_s"], r["ms_per_sentence"]]
            for name, r in results.items() if isinstance(r, dict)]
    names = list(dict.fromkeys(row[0] for row in rows))
    common.print_table("Decoding speed", ["search", "batch", "sentences/s", "tokens/s", "ms/sentence"], rows)

    ratios = {}
    for b in args.batch_sizes:
        speed = {name: results[f"{name} @ {b}"]["sentences_per_s"] for name in names}
        cache_gain = speed["greedy, cached"] / speed["greedy, uncached"]
        ratios[f"cached / uncached greedy @ {b}"] = cache_gain
        print(f"batch {b}: cached greedy {cache_gain:.1f}x uncached (tokens agree "
              f"{results[f'greedy agreement @ {b}']:.1%})")
        for weights in ("cached", "int8"):
            if f"greedy, {weights}" in speed:
                beam_cost = speed[f"greedy, {weights}"] / speed[f"beam {args.beam_size}, {weights}"]
                ratios[f"beam {args.beam_size} time / greedy time, {weights} @ {b}"] = beam_cost
                print(f"batch {b}: beam {args.beam_size} takes {beam_cost:.2f}x greedy's time ({weights})")
    print("targets: cached greedy >= 12x uncached at batch 64; beam 5 <= 4x greedy's time at batch 64 and "
          "<= 1.5x at batch 1")
    for b in args.batch_sizes:
        for name in [n for n in names if n.startswith("CTranslate2")]:
            for weights in ("cached", "int8"):
                ours = f"greedy, {weights}" if "greedy" in name else f"beam {args.beam_size}, {weights}"
                ratio = results[f"{name} @ {b}"]["sentences_per_s"] / results[f"{ours} @ {b}"]["sentences_per_s"]
                ratios[f"{name} / our {ours} @ {b}"] = ratio
                print(f"batch {b}: {name} decodes {ratio:.2f}x the sentences/s of our {ours}")
    print("targets: CTranslate2 int8 <= 2x our greedy at batch 1 and our beam 5 at batch 64")

    if args.package:
        package = load_package(args.package, device)
        model, tokenizer, weights = package.model, package.tokenizer, f"package {args.package}"
    else:
        weights = "random weights, <eos> forbidden: every output runs to the 2 x source + 10 limit (worst case)"
    sentence = sorted(sources[: args.sentences], key=len)[min(len(sources), args.sentences) // 2]  # median length
    variants = {"fp32": model} | ({"int8": int8_linears(model)} if device.type == "cpu" else {})
    latency = [translate_latency(m, tokenizer, sentence, method, args.repeats, name)
               for name, m in variants.items() for method in ("greedy", "beam")]
    common.print_table(f"One sentence through translate() ({weights}): {sentence!r}",
                       ["method", "weights", "first call ms", "median ms", "output tokens"],
                       [[r[k] for k in ("method", "weights", "first_ms", "median_ms", "output_tokens")]
                        for r in latency])
    print("target: under 100 ms greedy and 150 ms beam")
    common.emit_json(args, {"benchmark": "decode_speed", "machine": machine, "settings": vars(args),
                            "results": results, "ratios": ratios, "translate_latency": latency, "sentence": sentence})


if __name__ == "__main__":
    main()
