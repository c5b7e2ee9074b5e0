"""The web UI: one Blocks app assembled from one small builder per tab (the heavy lifting is in playground/)."""

from __future__ import annotations

import functools
import hashlib
import hmac
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from playground.limits import max_data_bytes, max_file_bytes, workers
from playground.serving import work
from playground.serving.library import Library
from playground.serving.mode import models_location, shared_mode
from playground.serving.visitors import NewVisitors, Visitor, address_key, issue_token, server_secret
from playground.settings import env_int, env_str
from playground.ui import sessions, texts
from playground.ui.handlers import CACHE_CLEANUP, bind, readable
from playground.ui.http_bounds import RequestBounds
from playground.ui.numbers import KEEP_TYPED
from playground.ui.pickers import labelled, model_dropdown, model_names
from playground.ui.state import Session, oauth_available, release_session
from playground.ui.tabs import attention as attention_tab
from playground.ui.tabs import compare as compare_tab
from playground.ui.tabs import data as data_tab
from playground.ui.tabs import inside as inside_tab
from playground.ui.tabs import models as models_tab
from playground.ui.tabs import train as train_tab
from playground.ui.tabs import translate as translate_tab

QUEUE_SIZE = 20  # personal mode: waiting requests beyond this are turned away with Gradio's "queue is full"
RUN_QUEUES = {"train", "cpu-train"}  # the Train tab's concurrency ids (tabs/train.py, wire_runs)
SHARED_QUEUE_SIZE = 10_000  # shared mode: a few kB each; per address they are bounded far lower (bound_waiting)
log = logging.getLogger("playground.ui")
CSS = """
#train-status { font-variant-numeric: tabular-nums; }
#train-status progress { width: 10em; height: 0.8em; vertical-align: middle; }
/* the queue position and timer Gradio shows on the status line: below its text, in room kept for them (over it, they
   hid the waiting line at 1024 px) */
#train-status { padding-bottom: 1.8em; }
#train-status .meta-text-center, #train-status .meta-text { top: auto; bottom: 0; transform: none; }
/* a number refused beside its slider (playground.ui.numbers): Gradio floats the message over the slider's label and
   box (its own inline style places it); here it takes its own line, above the label */
div.block > div.wrap:has(> .validation-error) { position: static !important; padding: 0;
    margin-bottom: var(--spacing-md); background: none; }
div.block > div.wrap > div.validation-error { position: static; width: 100%; justify-content: space-between;
    text-align: left; border: 1px solid var(--error-border-color); border-radius: var(--radius-sm); }
/* tables: a header or a number never breaks inside a word (the columns are sized for them); long text still wraps.
   The column menu (⋮) floats over its header on hover instead of taking 20 px of every header's width */
.table-wrap span.header { word-break: normal; overflow-wrap: normal; hyphens: none; }
.table-wrap th .cell-menu-button { position: absolute; right: 0; opacity: 0; }
.table-wrap th:hover .cell-menu-button, .table-wrap th:focus-within .cell-menu-button { opacity: 1; }
"""

def mode_line(library: Library) -> str:
    """The one line that says whether this app is one person's or shared with strangers."""
    if not library.shared:
        return "**Personal mode**: one person on this machine; every model in the models folder is yours."
    return ("**Shared mode**: your models are visible to you alone (sign in to keep them across browsers); "
            f"up to {library.quotas.models_per_visitor} models per visitor, runs of at most "
            f"{library.quotas.run_minutes or 0:g} minutes, one at a time.")


def storage_secret(secret: bytes) -> str:
    """What gr.BrowserState encrypts the visitor token with in localStorage. Gradio sends it to every browser in
    /config, so it is public: derived from the server's secret (stable across restarts, as the token must be), never
    the secret itself. What keeps a token from being made up is its signature
    (playground.serving.visitors.issue_token)."""
    return hmac.new(secret, b"browser-storage", hashlib.sha256).hexdigest()[:32]


def build_app(models_dir: str | os.PathLike | None = None, *, shared: bool | None = None) -> gr.Blocks:
    """The whole app; `models_dir` holds the packages (created when missing; None: models_location decides).
    `shared` None: shared_mode() decides (on a Space, or PLAYGROUND_SHARED=1). Nothing heavy runs here (the
    quick calls' worker processes start when the first page opens, or at the first call)."""
    shared = shared_mode() if shared is None else shared
    persistent = True
    if models_dir is None:
        models_dir, persistent = models_location(shared)
    library = Library(models_dir, shared=shared, persistent=persistent)
    start_sweeper(library)
    secret = server_secret(library.models_dir) if shared else b""
    with gr.Blocks(title="Transformer Playground", delete_cache=CACHE_CLEANUP) as demo:
        session = gr.State(Session())
        token = gr.BrowserState("", storage_key="playground-visitor", secret=storage_secret(secret) if shared else None)
        header(library)
        tabs = build_tabs(session, library)
        refresh = wire_tabs(tabs, session, library)
        demo.load(readable(bind(welcome, library, secret, NewVisitors())), [session, token], [token],
                  api_visibility="private", show_progress="hidden", queue=False).then(**refresh)
        demo.unload(bind(release_session, demo, session))
    # shared: no overall cap that strangers could fill, so a pile of queued runs never turns a quick call away
    # ("queue is full"), but a bound per address and account (sessions.bound_waiting); runs queue behind their own
    # concurrency id and each visitor has at most one running (serving.library.Library.run_slot)
    # events of one kind whose work is this process's own running at once: as many as the quick calls' workers
    # (PLAYGROUND_WORKERS, 2 CPU cores on a free Space); those that run a quick call have no limit here
    # (handlers.IN_WORKERS): the worker pool admits them, one per address, in turn; training: 1 at a time
    demo.queue(default_concurrency_limit=workers(), max_size=queue_size(shared), api_open=not shared)
    if shared:
        sessions.bound_waiting(demo._queue, RUN_QUEUES)
        queue_everything(demo)
        sessions.start_session_sweeper(demo)
    return demo


def header(library: Library) -> None:
    """The introduction, the machine and mode it runs in, the sign-in button (shared, where OAuth works) and the
    glossary."""
    from playground.serving.zerogpu import device_line

    with gr.Row():
        gr.Markdown(texts.INTRO + f"  \n<small>Running on {device_line()}.</small>  \n"
                    f"<small>{mode_line(library)}</small>", elem_id="intro")
        if library.shared and oauth_available():  # one sign-in for the page: it names the visitor (and their pushes)
            gr.LoginButton(scale=0, min_width=180)
    with gr.Accordion("Words used here", open=False, elem_id="glossary"):
        gr.Markdown(texts.GLOSSARY)


@dataclass
class Tabs:
    """What each tab's builder returned, and the tab pages whose opening refreshes the pickers."""

    train: train_tab.TrainTab
    translate: object
    attention: object
    models: object
    inside: object
    compare: object
    pages: dict  # tab id -> gr.Tab


def build_tabs(session: gr.State, library: Library) -> Tabs:
    with gr.Tabs():
        with gr.Tab("1 · Data", id="data"):
            data_tab.build(session)
        with gr.Tab("2 · Train", id="train") as train_page:
            train = train_tab.build(session, library, train_page)
        with gr.Tab("3 · Translate", id="translate") as translate_page:
            translate = translate_tab.build(session, library)
        with gr.Tab("4 · Attention", id="attention") as attention_page:
            attention = attention_tab.build(session, library)
        with gr.Tab("5 · Models", id="models") as models_page:
            models = models_tab.build(session, library)
        with gr.Tab("6 · Inside", id="inside") as inside_page:
            inside = inside_tab.build(session, library)
        with gr.Tab("7 · Compare", id="compare") as compare_page:
            compare = compare_tab.build(session, library)
    pages = dict(train=train_page, translate=translate_page, attention=attention_page, models=models_page,
                 inside=inside_page, compare=compare_page)
    return Tabs(train, translate, attention, models, inside, compare, pages)


def wire_tabs(tabs: Tabs, session: gr.State, library: Library) -> dict:
    """What one tab does that others show: every model picker refreshed after a run, a change on Models and on
    opening a tab; the Attention tab starting from the last translation. Returns the pickers' refresh (the page
    load chains it too)."""
    translate, attention, models, inside, compare = (tabs.translate, tabs.attention, tabs.models, tabs.inside,
                                                     tabs.compare)
    picker_inputs = [session, translate.model, attention.model, models.model, tabs.train.resume_from, inside.model,
                     compare.models]
    picker_outputs = [translate.model, attention.model, models.model, models.table, tabs.train.resume_from,
                      inside.model, compare.models]
    refresh = dict(fn=readable(bind(pickers, library)), inputs=picker_inputs, outputs=picker_outputs,
                   api_visibility="private", show_progress="hidden")
    after_run = {**refresh, "fn": readable(functools.partial(bind(pickers, library), after_run=True))}
    for event in (tabs.train.start_event, tabs.train.resume_event, *tabs.train.continue_events):
        event.then(**after_run).then(**models.show_card)  # the card of a package the run rewrote: its steps, scores
    for event in models.changed:
        event.then(**refresh)
    # the Attention tab starts from the sentence and model last translated
    translate.translated.then(first_line, [translate.text, translate.model], [attention.source, attention.model],
                              api_visibility="private", show_progress="hidden")
    for page in tabs.pages.values():
        page.select(**refresh)
    for view in inside.redraw:
        tabs.pages["inside"].select(**view)
    return refresh


# ----------------------------------------------------------------------------------------------------------
# Handlers


def pickers(library: Library, session: Session, translate_model: str | None, attention_model: str | None,
            models_model: str | None, resume_from: str | None, inside_model: str | None,
            compared: list[str] | None, after_run: bool = False):
    """Fresh choices for every model picker, keeping what each had selected where it still exists; after a
    run, "Resume from", the Models tab and the Inside tab turn to the model this session just trained."""
    names = model_names(library, session)
    own = Path(session.run_dir).name if session.run_dir else None
    own = own if own in names else None

    def pick(keep):
        return model_dropdown(library, session, keep, names)

    ran = own if after_run else None  # else a zip imported later would make way for the last run's model
    return (pick(translate_model), pick(attention_model), pick(ran or models_model),
            models_tab.models_table(library, session),
            train_tab.resume_dropdown(library, session, ran or resume_from), pick(ran or inside_model),
            gr.update(choices=labelled(library, session, names), value=[n for n in compared or [] if n in names]))


def first_line(text: str | None, model: str | None):
    """The first sentence translated, and its model, for the Attention tab."""
    return next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), gr.skip()), model


def welcome(library: Library, secret: bytes, new_visitors: NewVisitors, session: Session, token: str | None,
            profile: gr.OAuthProfile | None, request: gr.Request):
    """Name the visitor of this page (shared mode): the Hugging Face account when signed in (the models the
    browser made before signing in come along), else the browser's token, which only this server can have
    made (serving.visitors.issue_token): a missing or made-up one gets a new one, a new anonymous visitor, as long
    as its client address has not had its hour's share of new ones (serving.visitors.NewVisitors). The quick calls'
    workers start now, in the background (once): this visitor's first translation finds them ready."""
    work.pool()
    if not library.shared:
        return gr.skip()
    address = address_key(sessions.request_address(request), secret)
    visitor = Visitor.browser(token, secret, address)
    if visitor is None and new_visitors.allow(address):
        token = issue_token(secret)
        visitor = Visitor.browser(token, secret, address)
    elif visitor is None:  # this address had its hour's tokens: a visitor for this page only (state.visitor_of)
        token, visitor = "", None
    session.visitor = visitor
    if profile is not None:
        signed = Visitor.signed(profile.username)
        if session.visitor is not None:
            library.adopt(session.visitor, signed)
        session.visitor = signed
    return token


def queue_size(shared: bool) -> int:
    """Gradio's bound on waiting events. Always a number: on ZeroGPU (SPACES_ZERO_GPU=true) Gradio's queue() turns
    None into 1, so a second visitor waiting would be told "Queue is full". Shared: PLAYGROUND_QUEUE_SIZE (a
    bound of memory only: what one address may have waiting is bounded by sessions.bound_waiting)."""
    return env_int("PLAYGROUND_QUEUE_SIZE", SHARED_QUEUE_SIZE) if shared else QUEUE_SIZE


def queue_everything(demo: gr.Blocks) -> None:
    """Shared mode: every event through the queue, where its concurrency limit holds. api_open=False refuses a
    direct POST /gradio_api/run/… only for queued events; an unqueued one (a quick private step) would still run
    there, as many at once as a stranger sends."""
    for fn in demo.fns.values():
        fn.queue = True


_SWEEPERS: set[Path] = set()  # models folders with a sweeper thread in this process


def start_sweeper(library: Library) -> None:
    """Remove leftovers (crashed imports and saves, dead reservations, orphaned snapshots, old download folders, the
    registry entries of operations that died before writing their package) now and every PLAYGROUND_SWEEP_S seconds
    (default 600), in a daemon thread: one per models folder and process."""
    from gradio.utils import get_upload_folder

    from playground.packages.sweep import sweep_downloads, sweep_leftovers

    models_dir = library.models_dir
    key = models_dir.resolve()
    if key in _SWEEPERS:
        return
    _SWEEPERS.add(key)
    every = env_int("PLAYGROUND_SWEEP_S", 600)

    def sweep() -> None:
        for path in sweep_leftovers(models_dir) + sweep_downloads(get_upload_folder(), CACHE_CLEANUP[1]):
            log.info("removed leftover %s", path)
        for name in library.repair_registry():
            log.info("freed the name %s of an operation that died before writing it", name)

    def sweep_forever() -> None:
        while True:
            time.sleep(every)
            try:
                sweep()
            except OSError:
                log.exception("sweeping leftovers failed")

    sweep()  # before the first page: nothing of a crashed run is listed
    threading.Thread(target=sweep_forever, name="playground-sweeper", daemon=True).start()


def launch_options(shared: bool | None = None) -> dict:
    """Theme, CSS and a script (numbers.KEEP_TYPED; Gradio 6 takes them in launch(), not in Blocks()), the upload
    limit Gradio enforces (the data reader's own, playground.limits.max_data_bytes), how many sessions Gradio keeps
    (PLAYGROUND_MAX_SESSIONS), the bounds on what one request may send (http_bounds.RequestBounds) and, shared, on
    uploads per client address and in all (sessions.UploadBounds). Gradio's own words lack one its screen-reader
    announcements use ("common.complete", read out as that after every event): given here."""
    from starlette.middleware import Middleware

    shared = shared_mode() if shared is None else shared
    # no "Runs" link in the footer: Gradio's history of a browser's calls, easily taken for training runs
    # uploads: a data file, or a model's zip (an OPUS-MT checkpoint's is about 300 MB)
    return {"theme": gr.themes.Soft(), "css": CSS, "head": KEEP_TYPED,
            "max_file_size": max(max_data_bytes(), max_file_bytes("model.safetensors")),
            "state_session_capacity": env_int("PLAYGROUND_MAX_SESSIONS", 1000),
            "footer_links": ["api", "gradio", "settings"], "run_history": False,
            "i18n": gr.I18n(en={"common.complete": "Done"}),
            "app_kwargs": {"middleware": [Middleware(RequestBounds),
                                          *([Middleware(sessions.UploadBounds)] if shared else [])]}}


def launch(demo: gr.Blocks, **kwargs):
    """Serve on 0.0.0.0:7860; GRADIO_SERVER_NAME / GRADIO_SERVER_PORT override, as do keyword arguments."""
    options = {"server_name": env_str("GRADIO_SERVER_NAME", "0.0.0.0"),
               "server_port": int(env_str("GRADIO_SERVER_PORT", "7860")), **launch_options(), **kwargs}
    return demo.launch(**options)
