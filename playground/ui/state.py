"""What the tabs share: the per-session state, the read-only model cache and error handling (ZeroGPU: zerogpu.py).

Each browser session gets its own `Session` (held in a `gr.State`, so Gradio copies a fresh one per visitor):
its data, its training run and the last results the tabs show. The only module-level state is two caches: the
loaded models, keyed by folder and weights file modification time, so a retrained package is loaded afresh; and
the packages' JSON files (`package_info`, `package_probe`), read again only when a file of the package changes and
bounded in bytes.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import logging
import sys
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gradio as gr

from playground.errors import PackageError, PlaygroundError, is_rust_panic, reraising
from playground.settings import MB, env_int, env_str, on_space
from playground.serving.library import Library
from playground.serving.visitors import PERSONAL, Visitor

log = logging.getLogger("playground.ui")

DEMO_MODEL = "demo-en-de"
NOBODY = Visitor("nobody")  # sees the shipped models only: what a shared app's page holds before it knows who asks
CACHE_SIZE = 4  # loaded models kept in memory


# ----------------------------------------------------------------------------------------------------------
# Quick calls: bounded by time and size


def quick_call(fn, advice: str):
    """A quick call (translate, attention, steps, compare): under the time limit one may take (limits.time_limit;
    past it the decoding loop raises a PlaygroundError saying `advice`, and the worker is free again, whether the
    client still waits or has gone), and marked so that a CPU training step waits for it (foreground.quick)."""
    from playground.runtime.foreground import quick

    @functools.wraps(fn)
    def limited(*args, **kwargs):
        from playground import limits

        with limits.time_limit(limits.quick_call_seconds(), advice):
            return fn(*args, **kwargs)
    return quick(limited)


def request_lines(text: str | None, what: str = "text") -> tuple[list[str], str]:
    """The non-empty lines of a request's text, each cut to limits.max_line_chars(), and a note saying which were
    cut ("" when none). A text longer than limits.max_request_chars() is refused before it is split."""
    from playground import limits

    text = text or ""
    allowed = limits.max_request_chars()
    if len(text) > allowed:
        raise PlaygroundError(f"The {what} has {len(text):,} characters; one request may send at most {allowed:,} "
                              "here (the operator sets PLAYGROUND_MAX_REQUEST_CHARS). Send less, or use "
                              "`python -m playground translate --input FILE` for files.")
    per_line = limits.max_line_chars()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    cut = [i + 1 for i, line in enumerate(lines) if len(line) > per_line]
    note = ""
    if cut:
        named = ", ".join(map(str, cut[:5])) + (" …" if len(cut) > 5 else "")
        note = (f"✂️ Line{'s' if len(cut) > 1 else ''} {named} of the {what} {'were' if len(cut) > 1 else 'was'} cut "
                f"to {per_line:,} characters (the most one line may have here; the operator sets "
                "PLAYGROUND_MAX_LINE_CHARS).")
    return [line[:per_line] for line in lines], note


def oauth_available() -> bool:
    """Hugging Face sign-in works only on a Space with OAuth configured (`hf_oauth: true`) and Gradio's OAuth extra
    installed; a gr.LoginButton without them stops Gradio from starting the app."""
    return on_space() and bool(env_str("OAUTH_CLIENT_ID")) and \
        importlib.util.find_spec("authlib") is not None


# ----------------------------------------------------------------------------------------------------------
# Per-session state


@dataclass
class Session:
    """One browser session's data, training run and last results (never shared between sessions)."""

    data: Any = None  # playground.data.rows.ParallelData of the loaded data, or None
    description: str = ""  # where the data came from ("built-in: numbers", "corpus.tsv")
    src_lang: str = "src"
    tgt_lang: str = "tgt"
    val_fraction: float = 0.05
    trainer: Any = None  # the running playground.training.trainer.Trainer, so that Stop can reach it
    run_dir: str | None = None  # package folder of this session's latest run
    estimated: bool = False  # the Train tab has timed a configuration for this session
    estimate: tuple | None = None  # (the settings timed, as a dict; the steps expected): compared after the run
    translations: list = field(default_factory=list)  # one dict per row of the translation table
    attention: dict | None = None  # the last attention maps and what they were computed from
    visitor: Visitor | None = None  # shared mode: who this is (set on page load; an API client gets its own)
    waiting_files: list = field(default_factory=list)  # an uploaded file that waits for its aligned partner
    compared_models: int = 0  # models in the Compare tab's side-by-side table (its column widths follow)
    compared_runs: int = 0  # runs in the Compare tab's settings and scores tables

    _stats: tuple | None = None  # (the pairs list, its PairStats): statistics are computed once per data

    @property
    def pairs(self) -> list[tuple[str, str]]:
        """The loaded pairs themselves, packed (playground.data.packed.PackedPairs; swapping the direction replaces
        them)."""
        return self.data.pairs if self.data is not None else []

    def release(self) -> None:
        """Drop what this session holds (its tab closed, or it sat idle); a run it started keeps its own copy of the
        data. Who the visitor is stays: a visitor coming back still has their models."""
        self.data, self._stats, self.translations, self.attention = None, None, [], None
        self.waiting_files = []

    def stats(self):
        """playground.data.stats.pair_stats of the loaded pairs (cached until the data or its direction changes)."""
        from playground.data.stats import pair_stats

        pairs = self.pairs
        if self._stats is None or self._stats[0] is not pairs:
            self._stats = (pairs, pair_stats(pairs))
        return self._stats[1]


def release_session(demo: gr.Blocks, state: gr.State, request: gr.Request) -> None:
    """demo.unload hook: free the closed tab's Session at once. Gradio keeps an input-only gr.State (ours: handlers
    change the Session in place) for as long as the server runs, so without this every visitor's data stays."""
    holder = getattr(demo, "state_holder", None)
    stored = holder.session_data.get(request.session_hash) if holder and request.session_hash else None
    session = stored.state_data.pop(state._id, None) if stored else None
    if isinstance(session, Session):
        from playground.ui.sessions import FREED

        session.release()
        FREED.set()


# ----------------------------------------------------------------------------------------------------------
# Errors: people see a sentence, never a traceback


def _as_gradio_error(err: BaseException) -> gr.Error:
    if isinstance(err, gr.Error):
        return err
    if isinstance(err, PlaygroundError):
        error = gr.Error(str(err), print_exception=False)
        error.refused = err  # answers() shows it beside the control instead
        return error
    log.exception("unexpected error in a UI handler")  # the details stay in the server log, never reach the page
    return gr.Error("Something went wrong on the server; the details are in its log. Try again, or change the "
                    "settings you just changed.", print_exception=False)


def reaches_people(err: BaseException) -> bool:
    """Every exception, and a Rust extension's panic; not a KeyboardInterrupt, SystemExit or GeneratorExit."""
    return isinstance(err, Exception) or is_rust_panic(err)


def friendly(fn):
    """Turn PlaygroundError (and any other exception) raised by a handler into a readable gr.Error."""
    return reraising(fn, reaches_people, _as_gradio_error)


def refusal(err: PlaygroundError) -> str:
    """How a refused action reads next to the control that caused it (in Markdown, where a message's `<TAB>` would
    open an HTML tag and hide the rest)."""
    return "⚠️ " + str(err).replace("&", "&amp;").replace("<", "&lt;")


def answers(fn, outputs: list, note) -> dict:
    """`fn=` and `outputs=` for an event listener whose refusals are not failures: a PlaygroundError (a person's
    mistake, a name that is gone) puts its message in `note`, a Markdown beside the control, and leaves every other
    output as it was (gr.skip()). Raising would mark ALL outputs as failed (red "Error" badges, values gone) with
    the only copy of the message in a fading toast. Anything else still reaches people as a gr.Error (friendly).

    `note` may be one of `outputs` (fn returns it itself), or not: then it is added as the last output, and cleared
    when fn succeeds. API clients get the message as that output's value."""
    outputs = list(outputs)
    added = note not in outputs
    if added:
        outputs.append(note)
    where = outputs.index(note)
    single = len(outputs) - added == 1  # fn returns one value, not a tuple

    def out(values: tuple):
        return values[0] if len(values) == 1 else values  # Gradio takes one output's value bare

    def shaped(result):
        values = (result,) if single else tuple(result)
        return out((*values, "") if added else values)

    def refused(err: PlaygroundError):
        return out(tuple(refusal(err) if i == where else gr.skip() for i in range(len(outputs))))

    inner = friendly(fn)  # a gr.Error passes through friendly unchanged: fn may be friendly already
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def generator_wrapper(*args, **kwargs):
            try:
                for result in inner(*args, **kwargs):
                    yield shaped(result)
            except gr.Error as err:
                if not hasattr(err, "refused"):
                    raise
                yield refused(err.refused)
        return dict(fn=generator_wrapper, outputs=outputs)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return shaped(inner(*args, **kwargs))
        except gr.Error as err:
            if not hasattr(err, "refused"):
                raise
            return refused(err.refused)
    return dict(fn=wrapper, outputs=outputs)


# ----------------------------------------------------------------------------------------------------------
# Models on disk, and the cache of loaded ones


def visitor_of(library: Library, session: Session | None) -> Visitor:
    """Who this session is: the one person of a personal app; in a shared one the visitor the page load named
    (signed in, or the token the server gave the browser), else (an API client) a visitor of its own for the
    session, from the client address of its first request (anonymous visitors are bounded per address); a session
    that expired while idle (playground.ui.sessions) is the visitor it was. No session
    (building the page, before anybody asks) sees what everybody may see."""
    if not library.shared:
        return PERSONAL
    if session is None:
        return NOBODY
    if session.visitor is None:
        from playground.serving.visitors import address_key, server_secret
        from playground.ui.sessions import current_address, known_visitor

        address = address_key(current_address(), server_secret(library.models_dir))
        session.visitor = known_visitor() or Visitor.session(uuid.uuid4().hex, address)
    return session.visitor


def model_names(library: Library, session: Session | None) -> list[str]:
    """The packages this session may use, newest first."""
    return library.names(visitor_of(library, session))


def default_model(names: list[str], keep: str | None = None) -> str | None:
    """`keep` if it still exists, else the demo model if present, else the newest package (None when there is none)."""
    if keep in names:
        return keep
    if DEMO_MODEL in names:
        return DEMO_MODEL
    return names[0] if names else None


def model_dropdown(library: Library, session: Session, keep: str | None = None, names: list[str] | None = None) -> dict:
    """A gr.update for a model picker: fresh choices (`names` when the caller has listed them already), the
    selection kept when possible."""
    names = model_names(library, session) if names is None else names
    return gr.update(choices=names, value=default_model(names, keep))


def model_picker(library: Library, session: gr.State, api_name: str):
    """The model dropdown and its ↻ button, in a row of the caller's layout; ↻ refreshes the choices (newest
    first, the selection kept where it still exists). Returns (dropdown, the refresh event to chain on)."""
    names = model_names(library, None)
    with gr.Row():
        model = gr.Dropdown(names, value=default_model(names), label="Model", scale=4,
                            allow_custom_value=True)
        refresh = gr.Button("↻", scale=0, min_width=40)
    event = refresh.click(friendly(lambda session, keep=None: model_dropdown(library, session, keep)),
                          [session, model], [model], api_name=api_name, show_progress="hidden")
    return model, event


def package_folder(library: Library, session: Session | None, name: str | None) -> Path:
    """The folder of a picker's package; PackageError when none is chosen, it is gone or it is somebody else's
    (the same message: another visitor's models do not exist for this one)."""
    return library.folder(name, visitor_of(library, session))


def deep_size(value) -> int:
    """Bytes a JSON-like value takes as Python objects (each container and scalar counted; shared ones as often as
    they are referenced, so an upper bound): what keeping it costs, which its file size does not say (a 16 MB
    training.json of empty dicts is ~390 MB of objects)."""
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        total += sys.getsizeof(item)
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return total


class JsonCache:
    """Values read from a package's JSON files, kept while the files are unchanged, most recently used first, within
    a budget in bytes (deep_size), not a count: a value larger than a quarter of the budget is returned, not kept."""

    def __init__(self, budget_bytes: int):
        self.budget = budget_bytes
        self.items: OrderedDict[tuple[str, str], tuple[tuple, Any, int]] = OrderedDict()  # key -> (stamp, value, size)
        self.held = 0
        self.lock = threading.Lock()

    def get(self, folder: Path, kind: str, read):
        """read(folder)'s value for this folder, read again only when a file of the folder changed."""
        key = (str(folder), kind)
        try:
            stamp = tuple(sorted((p.name, s.st_size, s.st_mtime_ns) for p in folder.iterdir() for s in [p.stat()]))
        except OSError:
            self.drop(lambda k: k[0] == key[0])
            return read(folder)  # no such folder (any more): the reader says so
        with self.lock:
            cached = self.items.get(key)
            if cached is not None and cached[0] == stamp:
                self.items.move_to_end(key)
                return cached[1]
        self.drop(lambda k: k == key or not Path(k[0]).is_dir())  # a broken new version must not leave the old one
        value = read(folder)
        size = deep_size(value)
        if size <= self.budget // 4:
            with self.lock:
                self.items[key] = (stamp, value, size)
                self.held += size
                while self.held > self.budget:
                    self.held -= self.items.popitem(last=False)[1][2]
        return value

    def drop(self, which) -> None:
        with self.lock:
            for key in [k for k in self.items if which(k)]:
                self.held -= self.items.pop(key)[2]


INFO = JsonCache(env_int("PLAYGROUND_INFO_CACHE_MB", 32) * MB)


def package_info(folder: str | Path) -> dict:
    """playground.packages.store.package_info without the training history (config.json, training.json's summary, file
    sizes), read again only when a file of the package changes: the pickers and tables refresh on every tab switch.
    Shared between calls: never modify it. The cache (INFO) keeps the most recently used packages that still exist,
    within PLAYGROUND_INFO_CACHE_MB: a deleted package's files leave memory with it, and no package holds the
    server's memory by the size of its history; package_probe reads that."""
    from playground.packages.store import package_info as read_info

    def summary(folder: Path) -> dict:
        info = read_info(folder)
        if info["training"]:
            info["training"] = {k: v for k, v in info["training"].items() if k != "history"}
        return info

    return INFO.get(Path(folder), "summary", summary)


def package_probe(folder: str | Path) -> list:
    """The recorded cross-attention of a package's probe pair, one entry per validation (the Attention tab's slider
    reads it at every move): training.json's history, read on demand and cached as package_info is."""
    from playground.packages.format import read_training

    def probe(folder: Path) -> list:
        training = read_training(folder) or {}
        return list((training.get("history") or {}).get("probe") or [])

    return INFO.get(Path(folder), "probe", probe)


class ModelCache:
    """Loaded packages keyed by (folder, weights mtime): switching models is fast, a retrained one reloads."""

    def __init__(self, size: int = CACHE_SIZE):
        self.size = size
        self.items: OrderedDict[tuple[str, int], Any] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, folder: str | Path):
        from playground.packages.store import WEIGHTS, load_package
        from playground.serving.zerogpu import quick_device

        folder = Path(folder).resolve()
        try:
            key = (str(folder), (folder / WEIGHTS).stat().st_mtime_ns)
        except OSError as err:
            raise PackageError(f"No model package at {folder.name}: {err.strerror}.") from err
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key]
        package = load_package(folder, quick_device())  # the CPU on ZeroGPU
        with self.lock:
            for old in [k for k in self.items if k[0] == key[0]]:  # an older version of the same folder
                del self.items[old]
            self.items[key] = package
            while len(self.items) > self.size:
                self.items.popitem(last=False)
        return package


MODELS = ModelCache()


def load_model(library: Library, session: Session, name: str | None):
    """The loaded Package for a model picker's value (cached)."""
    return MODELS.get(package_folder(library, session, name))
