"""Per-session state: each browser session's `Session`, freeing it when its tab closes, and who its visitor is.

Each browser session gets its own `Session` (held in a `gr.State`, so Gradio copies a fresh one per visitor): its
data, its training run and the last results the tabs show. The tabs share no other state but the caches of what is
on disk (playground.ui.caches).
"""

from __future__ import annotations

import importlib.util
import uuid
from dataclasses import dataclass, field
from typing import Any

import gradio as gr

from playground.serving.library import Library
from playground.serving.visitors import PERSONAL, Visitor
from playground.settings import env_str, on_space
from playground.ui.sessions import FREED, current_address, known_visitor

NOBODY = Visitor("nobody")  # sees the shipped models only: what a shared app's page holds before it knows who asks


@dataclass
class Session:
    """One browser session's data, training run and last results (never shared between sessions)."""

    data: Any = None  # playground.data.rows.ParallelData of the loaded data, or None
    description: str = ""  # where the data came from ("built-in: numbers", "corpus.tsv")
    src_lang: str = "src"
    tgt_lang: str = "tgt"
    val_fraction: float = 0.05
    trainer: Any = None  # the running run (playground.training.chunked.ChunkedRun), so that Stop can reach it
    run_dir: str | None = None  # package folder of this session's latest run
    run_pending: bool = False  # Start or Resume was pressed and the run has no trainer yet (queued or preparing)
    stop_asked: bool = False  # Stop was pressed while run_pending: the run ends before it trains
    estimated: bool = False  # the Train tab has timed a configuration for this session
    estimate: tuple | None = None  # (the settings timed, as a dict; the steps expected): compared after the run
    translations: list = field(default_factory=list)  # one dict per row of the translation table
    attention: dict | None = None  # the last attention maps and what they were computed from
    visitor: Visitor | None = None  # shared mode: who this is (set on page load; an API client gets its own)
    waiting_files: list = field(default_factory=list)  # an uploaded file that waits for its aligned partner
    compared_models: int = 0  # models in the Compare tab's side-by-side table (its column widths follow)
    compared_runs: int = 0  # runs in the Compare tab's settings and scores tables

    _stats: tuple | None = None  # (the pairs list, its PairStats): statistics are computed once per data
    _download_key: str | None = None  # download_key's, drawn at its first use

    @property
    def download_key(self) -> str:
        """A random key of this session alone, for its download folders (handlers.download_dir): id(session) is
        reused by a later session once this one is freed, and Gradio gives each session a deep copy of one Session,
        so a default value would be shared by all."""
        if self._download_key is None:
            self._download_key = uuid.uuid4().hex
        return self._download_key

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
        session.release()
        FREED.set()


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

        address = address_key(current_address(), server_secret(library.models_dir))
        session.visitor = known_visitor() or Visitor.session(uuid.uuid4().hex, address)
    return session.visitor


def oauth_available() -> bool:
    """Hugging Face sign-in works only on a Space with OAuth configured (`hf_oauth: true`) and Gradio's OAuth extra
    installed; a gr.LoginButton without them stops Gradio from starting the app."""
    return on_space() and bool(env_str("OAUTH_CLIENT_ID")) and \
        importlib.util.find_spec("authlib") is not None

