"""`python -m playground translate` and `evaluate`: decode sentences with a package, and score its translations of a
test set (sacreBLEU's BLEU and chrF, exact match)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

from playground.errors import PlaygroundError


def add_translate_commands(sub: argparse._SubParsersAction) -> None:
    """`translate` and `evaluate`, with the decoding flags they share (add_decoding_flags)."""
    tr = sub.add_parser("translate", help="translate sentences with a package",
                        description="Translate sentences given as arguments or in --input FILE (one per line); "
                                    "prints one line per input (n-best: rank, score and text, tab-separated).")
    tr.add_argument("--model", required=True, help="package folder")
    tr.add_argument("--input", help="file with one sentence per line (- for stdin)")
    tr.add_argument("text", nargs="*", help="sentences to translate")
    tr.add_argument("--json", action="store_true", help="print results as JSON")
    add_decoding_flags(tr)
    tr.set_defaults(func=cmd_translate)

    ev = sub.add_parser("evaluate", help="BLEU, chrF and exact match on a test set",
                        description="Translate --src and score against --ref with sacreBLEU (cased, 13a).")
    ev.add_argument("--model", required=True, help="package folder")
    ev.add_argument("--src", required=True, help="source sentences, one per line")
    ev.add_argument("--ref", required=True, help="reference translations, aligned with --src")
    ev.add_argument("--output", help="also write the translations to this file")
    ev.add_argument("--json", action="store_true", help="print the scores as one JSON object")
    add_decoding_flags(ev)
    ev.set_defaults(func=cmd_evaluate)


def add_decoding_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("decoding")
    g.add_argument("--method", choices=["greedy", "sample", "beam"], default="greedy",
                   help="search method (default greedy)")
    g.add_argument("--beam-size", type=int, default=5, help="beams per sentence for --method beam (default 5)")
    g.add_argument("--length-penalty", type=float, default=1.0,
                   help="beam score = sum log p / length^A; 0 = raw sum, favours short outputs (default 1.0)")
    g.add_argument("--nbest", type=int, default=1, help="hypotheses to print per sentence with beam search (default 1)")
    g.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (default 1.0)")
    g.add_argument("--top-k", type=int, default=0, help="sample from the k most likely tokens only (0 = all)")
    g.add_argument("--top-p", type=float, default=1.0,
                   help="nucleus sampling: smallest set with probability ≥ p (default 1.0)")
    g.add_argument("--seed", type=int, default=0, help="random seed for sampling (default 0)")
    g.add_argument("--max-output-tokens", dest="max_output_tokens", type=int, default=None,
                   help="maximum output tokens (default 2 x source + 10)")
    g.add_argument("--batch-size", type=int, default=64, help="sentences decoded together (default 64)")
    g.add_argument("--device", default="auto", help="auto, cpu, cuda or mps (default auto)")
    g.add_argument("--int8", action="store_true",
                   help="int8 weights in the linear layers, on the CPU: faster decoding, BLEU within 0.2 of fp32 as "
                        "measured (docs/BENCHMARKS.md)")


def decode_options(args: argparse.Namespace):
    from playground.core.decode import DecodeOptions

    return DecodeOptions(method=args.method, max_output_tokens=args.max_output_tokens, temperature=args.temperature,
                         top_k=args.top_k, top_p=args.top_p, seed=args.seed, beam_size=args.beam_size,
                         length_penalty=args.length_penalty, nbest=args.nbest if args.method == "beam" else 1,
                         batch_size=args.batch_size)


def load_model(args: argparse.Namespace):
    from playground.packages.store import load_package
    from playground.runtime.device import resolve_device

    device = resolve_device(args.device)
    if args.int8 and device.type != "cpu":
        raise PlaygroundError(f"--int8 decodes on the CPU, not {device.type}: add --device cpu, or leave out --int8.")
    package = load_package(args.model, device)
    if args.int8:
        from playground.core.quantize import int8_linears

        package = dataclasses.replace(package, model=int8_linears(package.model))
    return package


def read_lines(path: str) -> list[str]:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except FileNotFoundError as err:
        raise PlaygroundError(f"File not found: {path}") from err
    except UnicodeDecodeError as err:
        raise PlaygroundError(f"{path} is not UTF-8 text ({err}); save it as UTF-8 and try again.") from err
    return [line.strip() for line in text.splitlines()]


def cmd_translate(args: argparse.Namespace) -> int:
    from playground.core.decode import cut_sources_note, translate
    from playground.limits import max_line_chars
    from playground.runtime.request_bounds import server_bounds

    sentences = list(args.text) + (read_lines(args.input) if args.input else [])
    if not sentences:
        raise PlaygroundError("Nothing to translate: give sentences as arguments or --input FILE (- for stdin).")
    package = load_model(args)
    per_line = max_line_chars()
    cut = sum(len(sentence) > per_line for sentence in sentences)
    if cut:
        print(f"note: {cut:,} line{'s' if cut > 1 else ''} longer than {per_line:,} characters "
              f"{'were' if cut > 1 else 'was'}"
              " cut there before translating (PLAYGROUND_MAX_LINE_CHARS sets the limit)", file=sys.stderr)
    results = translate(package.model, package.tokenizer, sentences, decode_options(args), server_bounds())
    token_cut_note = cut_sources_note(results, unit="Sentence")  # counted over the arguments, then --input's lines
    if token_cut_note:
        print(f"note: {token_cut_note}", file=sys.stderr)
    if args.json:
        print(json.dumps([{"source": t.source, "hypotheses": [{"text": h.text, "score": h.score,
                           "token_logprobs": h.token_logprobs} for h in t.hypotheses]} for t in results],
                         ensure_ascii=False))
        return 0
    for t in results:
        if len(t.hypotheses) == 1:
            print(t.text)
        else:
            for rank, h in enumerate(t.hypotheses, 1):
                print(f"{rank}\t{h.score:.4f}\t{h.text}")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from playground.core.decode import translate
    from playground.core.metrics import score
    from playground.runtime.request_bounds import server_bounds

    sources, references = read_lines(args.src), read_lines(args.ref)
    if len(sources) != len(references):
        raise PlaygroundError(f"{args.src} has {len(sources)} lines but {args.ref} has {len(references)}; "
                              "they must be aligned line by line.")
    package = load_model(args)
    start = time.perf_counter()
    hyps = [t.text for t in translate(package.model, package.tokenizer, sources, decode_options(args),
                                      server_bounds())]
    scores = score(hyps, references)
    result = {**scores.as_dict(), "method": args.method, "model": str(args.model),
              "seconds": round(time.perf_counter() - start, 2)}
    if args.output:
        Path(args.output).write_text("\n".join(hyps) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(result))
    else:
        print(f"BLEU = {scores.bleu:.2f}  ({scores.bleu_signature})")
        print(f"chrF = {scores.chrf:.2f}  ({scores.chrf_signature})")
        print(f"exact match = {scores.exact_match:.1%} of {scores.n} sentences ({args.method}, {result['seconds']} s)")
    return 0
