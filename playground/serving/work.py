"""The work a visitor's request makes a model or a native parser do, run in a worker process with hard limits
(playground.runtime.workers): translating, decoding step by step, next tokens, attention maps, the Inside views' data,
comparing translations and training records, and checking an uploaded package (its tokenizer parsed by 🤗
tokenizers' Rust code). What the tasks need is imported with this module: a worker imports it before it says it is
ready.

Each task is a module-level function of plain values (a package's folder, texts, options) that returns plain values
(dataclasses, lists, numpy arrays); figures and tables are drawn from them in the web process. A worker keeps its
loaded models (MODELS, keyed by folder and weights' mtime) from one call to the next. `run` sends one task to the
pool under the quick-call deadline.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from playground import limits
from playground.core.attention_maps import attention_maps
from playground.core.decode import DecodeOptions, encoded_sources, source_ids, translate
from playground.errors import PackageError, PlaygroundError
from playground.insight.compare import load_runs
from playground.insight.inspection import (
    beam_steps,
    check_source,
    compare_batching,
    embedding_map,
    mask_batch,
    next_token_table,
    positional_encoding,
    sampling_steps,
    trained_sentence_tokens,
)
from playground.packages.format import WEIGHTS, saved_config
from playground.packages.marian import import_marian
from playground.packages.names import SHIPPED_MODELS, SHIPPED_MODELS_DIR
from playground.packages.store import load_package
from playground.runtime.request_bounds import (
    attention_cell_limit,
    check_decode_memory,
    check_decode_work,
    check_encoder_work,
    decode_tokens,
    encoder_flops,
    server_bounds,
)
from playground.training.config import TrainConfig

CACHE_SIZE = 4  # loaded models kept in memory by one process
IMPORT_S = 300  # the deadline of converting an imported checkpoint (a 74 M-parameter OPUS-MT model: bench/marian.py)


class ModelCache:
    """Loaded packages keyed by (folder, weights mtime): switching models is fast, a retrained one reloads. On the
    CPU, whose memory a worker's address-space limit bounds (CUDA maps more address space than such a limit allows),
    as ZeroGPU's quick calls always were."""

    def __init__(self, size: int = CACHE_SIZE):
        self.size = size
        self.items: OrderedDict[tuple[str, int], Any] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, folder: str | Path):
        folder = Path(folder).resolve()
        try:
            key = (str(folder), (folder / WEIGHTS).stat().st_mtime_ns)
        except OSError as err:
            raise PackageError(f"No model package at {folder.name}: {err.strerror}.") from err
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key]
        package = load_package(folder, "cpu")
        with self.lock:
            for old in [k for k in self.items if k[0] == key[0]]:  # an older version of the same folder
                del self.items[old]
            self.items[key] = package
            while len(self.items) > self.size:
                self.items.popitem(last=False)
        return package


MODELS = ModelCache()  # in a worker: the models it has loaded

_pool = None
_pool_lock = threading.Lock()


def pool():
    """This server's worker pool, started at its first call, sized by PLAYGROUND_WORKERS, PLAYGROUND_WORKER_MB,
    PLAYGROUND_MAX_RESULT_MB and PLAYGROUND_MAX_WAITING_CALLS."""
    global _pool
    from playground.runtime.workers import WorkerPool

    with _pool_lock:
        if _pool is None:
            _pool = WorkerPool(limits.workers(), limits.worker_memory_bytes(), limits.max_result_bytes(),
                               preload=[__name__], warm_up=warm_up, waiting=limits.max_waiting_calls())
        return _pool


def warm_up() -> None:
    """What a new worker does before its first call: load the shipped demo model (what most first calls use; loading
    a first package also imports the parts of PyTorch that a model built on the meta device needs, seconds)."""
    for name in SHIPPED_MODELS:
        if (SHIPPED_MODELS_DIR / name / WEIGHTS).is_file():
            MODELS.get(SHIPPED_MODELS_DIR / name)


def run(task: Callable, *args, advice: str = "", seconds: float | None = None, gone: Callable[[], bool] | None = None,
        owner: str = ""):
    """task(*args) in a worker, stopped after `seconds` (the quick-call limit, PLAYGROUND_QUICK_CALL_S) or as soon as
    `gone()` says its client has left; a task stopped at its deadline says `advice` (what to make smaller). The calls
    of one `owner` (a client's address) take one worker at a time."""
    return pool().call(task, *args, seconds=seconds or limits.quick_call_seconds(), advice=advice, gone=gone,
                       owner=owner)


# ----------------------------------------------------------------------------------------------------------
# Translate tab


def translations(folder: str, sentences: list[str], opts, samples: int = 1) -> list:
    """translate() with the package in `folder`; for sampling with samples > 1, one draw per seed (seed, seed+1, …),
    ranked by score."""
    package, bounds = MODELS.get(folder), server_bounds()
    draws = samples if opts.method == "sample" else 1
    encoded = encoded_sources(package.tokenizer, sentences, package.model.cfg, bounds)  # once, for every draw
    check_decode_work(package.model.cfg, [ids for ids, _ in encoded], opts, draws)
    results = translate(package.model, package.tokenizer, sentences, opts, bounds, encoded)
    if opts.method == "sample" and samples > 1:
        for i in range(1, samples):
            more = translate(package.model, package.tokenizer, sentences, replace(opts, seed=(opts.seed or 0) + i),
                             bounds, encoded)
            for t, extra in zip(results, more, strict=True):
                t.hypotheses.extend(extra.hypotheses)
        for t in results:
            t.hypotheses.sort(key=lambda h: h.score, reverse=True)
    return results


def next_token_rows(folder: str, src_ids: list[int], out_ids: list[int], k: int) -> list[dict]:
    """playground.insight.inspection.next_token_table for the package in `folder` (plain lists in and out)."""
    package = MODELS.get(folder)
    return next_token_table(package.model, package.tokenizer, src_ids, out_ids, k)


def decoding_steps(folder: str, first: str, opts, k: int) -> tuple:
    """The steps of decoding `first`: (package name, beam_steps' or sampling_steps' result)."""
    package = MODELS.get(folder)
    check_decode_work(package.model.cfg, source_ids(package.tokenizer, [first], package.model.cfg, server_bounds()),
                      opts)
    if opts.method == "beam":
        return package.name, beam_steps(package.model, package.tokenizer, first, opts)
    return package.name, sampling_steps(package.model, package.tokenizer, first, opts, k)


# ----------------------------------------------------------------------------------------------------------
# Attention tab


def attention(folder: str, source: str, target: str | None) -> dict:
    """Every attention map of one pair with the package in `folder`: the model's own greedy translation of `source`
    (target None) or `target` teacher-forced. The texts come cut to a line's characters (request_lines); the maps are
    bounded by attention_maps.fit_attention, which cuts the pair if needed ("cut": the token counts it had)."""

    package = MODELS.get(folder)
    model, tokenizer = package.model, package.tokenizer
    source, bounds = check_source(source), server_bounds()
    src_ids = source_ids(tokenizer, [source], model.cfg, bounds)[0]
    if target is not None:
        out_ids = tokenizer.encode_tgt(bounds.cut_line(target))
    else:
        opts = DecodeOptions("greedy")
        check_decode_work(model.cfg, [src_ids], opts)
        hyp = translate(model, tokenizer, [source], opts, bounds)[0].best
        out_ids, target = list(hyp.ids), hyp.text
        if out_ids and out_ids[-1] == model.cfg.eos_id:
            out_ids = out_ids[:-1]
    tgt_in = [model.cfg.bos_id] + out_ids[: model.cfg.max_positions - 1]
    maps = attention_maps(model, tokenizer, src_ids, tgt_in, attention_cell_limit(model.cfg))
    return {"maps": {k: np.asarray(maps[k]) for k in ("encoder", "decoder", "cross")},
            "src_tokens": list(maps["src_tokens"]), "tgt_tokens": list(maps["tgt_tokens"]),
            "model": package.name, "target": target, "cut": maps["cut"]}


# ----------------------------------------------------------------------------------------------------------
# Inside tab: each view's data with what the page says about the model (`about`)


def about(package) -> dict:
    return {"name": package.name, "config": package.config, "cfg": package.model.cfg}


def training_batch_tokens(package) -> int:
    """The batch budget the model was trained with; the trainer's default for a model trained elsewhere."""

    return int(saved_config(package.training).get("batch_tokens") or TrainConfig.batch_tokens)


def positional_table(folder: str, side: str) -> tuple:
    package = MODELS.get(folder)
    return about(package), positional_encoding(package.model, side)


def mask_data(folder: str, pairs, n_pairs: int, seed: int) -> tuple:
    package = MODELS.get(folder)
    return about(package), mask_batch(package.model, package.tokenizer, pairs, n_pairs, seed)


def batching_data(folder: str, pairs, batch_tokens: int, seed: int) -> tuple:
    """(about, the budget: batch_tokens or the model's own, compare_batching's random and grouped batches)."""
    package = MODELS.get(folder)
    budget = batch_tokens if batch_tokens > 0 else training_batch_tokens(package)
    return about(package), budget, compare_batching(package.tokenizer, pairs, budget,
                                                    trained_sentence_tokens(package.model), seed)


def embedding_data(folder: str, pairs, n_tokens: int) -> tuple:
    """(about, whether source and target share one table, embedding_map's result)."""
    package = MODELS.get(folder)
    tied = package.model.src_embed.tokens is package.model.tgt_embed.tokens
    return about(package), tied, embedding_map(package.model, package.tokenizer, pairs, n_tokens)


# ----------------------------------------------------------------------------------------------------------
# Compare tab


def greedy_columns(folders: list[str], lines: list[str]) -> dict[str, list[str]]:
    """Each package's greedy translations of `lines`, by package name."""

    packages, opts, bounds = [MODELS.get(folder) for folder in folders], DecodeOptions("greedy"), server_bounds()
    encoded = [encoded_sources(p.tokenizer, lines, p.model.cfg, bounds) for p in packages]  # once per model
    ids = [[source for source, _ in per_model] for per_model in encoded]
    for package, package_ids in zip(packages, ids):
        check_decode_memory(package.model.cfg, package_ids, opts)
    check_encoder_work(sum(encoder_flops(p.model.cfg, package_ids) for p, package_ids in zip(packages, ids)),
                       f"these {len(lines)} sentences with {len(folders)} models")
    tokens = sum(decode_tokens(p.model.cfg, package_ids, opts) for p, package_ids in zip(packages, ids))
    if tokens > limits.max_decode_tokens():
        raise PlaygroundError(f"Translating these {len(lines)} sentences with {len(folders)} models could decode up "
                              f"to {tokens:,} tokens; one request may decode at most {limits.max_decode_tokens():,} "
                              "here (the operator sets PLAYGROUND_MAX_DECODE_TOKENS). Send fewer or shorter "
                              "sentences, or compare fewer models.")
    columns = {"source": lines}
    for folder, package, per_model in zip(folders, packages, encoded):
        columns[Path(folder).name] = [t.text for t in translate(package.model, package.tokenizer, lines, opts, bounds,
                                                                 per_model)]
    return columns


def compared_runs(folders: list[str]) -> list:
    """The runs of the packages in `folders` (insight.compare.load_runs): their training records parsed here, each
    history thinned as it is read, so that five long ones cost a worker seconds, not the web process."""
    return load_runs(folders)


# ----------------------------------------------------------------------------------------------------------
# Models tab


def import_checkpoint(checkpoint: str, destination: str, origin: str) -> None:
    """Convert the Marian checkpoint in `checkpoint` into a package at `destination` (playground.packages.marian): its
    SentencePiece models, vocabulary and weights, a stranger's, are read here under the worker's limits."""
    import_marian(Path(checkpoint), Path(destination), origin=origin)


def check_upload(folder: str) -> None:
    """Load the package in `folder` once, every file's size and schema checked and its tokenizer parsed: an upload is
    checked here before it joins the models (playground.packages.zips.import_zip)."""

    load_package(Path(folder), "cpu")
