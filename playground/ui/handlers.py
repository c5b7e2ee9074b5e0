"""What every event handler goes through: one error wrapper that says a failure to people, and quick-call bounds.

A handler is a plain module-level function of the tab it serves; the tab's `build` wires it, wrapped once: by
`said_beside` where a refusal is said beside the control that caused it, else by `readable` (a gr.Error). `bind` gives
a handler its first arguments (the Library) the way a closure in `build` would, keeping the signature Gradio reads.
"""

from __future__ import annotations

import functools
import inspect
import logging
import re
import typing
from pathlib import Path
from typing import Callable

import gradio as gr

from playground.errors import PlaygroundError, is_rust_panic, numbered, reraising

log = logging.getLogger("playground.ui")


# ----------------------------------------------------------------------------------------------------------
# Quick calls: bounded by time and size


# The listener options of an event whose handler runs a quick call or a job: no concurrency limit of Gradio's, so
# that a call waiting for a worker holds a thread and one of Gradio's 40 jobs, not one of its event's few slots
# (where it kept other visitors' calls of that event waiting behind one address's); the worker pool alone decides
# who works, in turn across addresses (playground.runtime.workers.Admission). Their one concurrency id lets a shared
# app refuse, as it joins the queue, a call past what one address may have there (sessions.bound_waiting)
WORKERS_QUEUE = "workers"
IN_WORKERS = dict(concurrency_limit=None, concurrency_id=WORKERS_QUEUE)


def quick_call(task: Callable, advice: str, seconds: float | None = None) -> Callable:
    """A quick call (translate, attention, steps, compare, Inside views, checking an upload): `task` (a function of
    playground.serving.work) runs in a worker process under the time limit one may take (limits.quick_call_seconds(),
    or `seconds`; past it the worker is killed, the call says `advice`, and the next call gets a fresh worker), and is
    marked so that a CPU training step in this process waits for it (foreground.quick). A client's calls take one
    worker at a time (work_owner)."""
    from playground.runtime.foreground import quick
    from playground.serving import work

    return quick(sent_to(work.run, task, advice, seconds))


def job_call(task: Callable, advice: str) -> Callable:
    """A job (reading an uploaded data file, exporting a package): `task` (a function of playground.serving.jobs)
    runs in a process of its own under limits.job_seconds(), the client's jobs one at a time. Not a quick call: a
    training step does not wait for it."""
    from playground.serving import jobs

    return sent_to(jobs.run, task, advice)


def sent_to(run: Callable, task: Callable, advice: str, seconds: float | None = None) -> Callable:
    """task(*args) sent through `run` (a pool's: playground.serving.work.run, jobs.run) on behalf of this event's
    client, stopped when it has gone or after `seconds` (None: the pool's time limit)."""
    @functools.wraps(task)
    def in_worker(*args):
        return run(task, *args, advice=advice, gone=client_gone(), owner=work_owner(), seconds=seconds)
    return in_worker


def work_owner() -> str:
    """Whose turn a quick call on this thread takes in the worker pool: its client's address (the rightmost-hop rule
    of playground.serving.visitors); "" (nobody's: no turn) for an internal one, which in personal mode and behind
    a proxy that says nothing is everybody's, and outside an event."""
    from playground.serving.visitors import internal
    from playground.ui.sessions import current_address

    address = current_address()
    return "" if internal(address) else address


def client_gone() -> Callable[[], bool] | None:
    """For the event handler running on this thread, a check whether its client has gone: Gradio marks the event not
    alive when the page closes or the API client disconnects, but cannot stop a thread; the worker pool asks this
    while it waits and then kills the work. None outside an event (a test calling a handler)."""
    from gradio.context import LocalContext

    queue, event_id = getattr(LocalContext.blocks.get(None), "_queue", None), LocalContext.event_id.get(None)
    if queue is None or event_id is None:
        return None

    def gone() -> bool:
        running = [e for job in getattr(queue, "active_jobs", []) or [] for e in job or [] if e._id == event_id]
        return bool(running) and not running[0].alive
    return gone


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
        many = len(cut) > 1
        note = (f"✂️ Line{'s' if many else ''} {numbered(cut)} of the {what} {'were' if many else 'was'} cut to "
                f"{per_line:,} characters (the most one line may have here).")
    return [line[:per_line] for line in lines], note


# ----------------------------------------------------------------------------------------------------------
# Binding a handler's first arguments


def bind(fn: Callable, *first) -> Callable:
    """fn with its first arguments given, as a plain function (a generator function when fn is one) whose signature
    and type hints are the rest of fn's: Gradio reads them for gr.Request and gr.OAuthProfile parameters, the API's
    parameter names and streaming, and a functools.partial shows it none of them."""
    signature = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn)  # resolved in fn's own module, where its annotations' names are
    except (NameError, TypeError):
        hints = {}
    rest = list(signature.parameters.values())[len(first):]

    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def bound(*args, **kwargs):
            yield from fn(*first, *args, **kwargs)
    else:
        @functools.wraps(fn)
        def bound(*args, **kwargs):
            return fn(*first, *args, **kwargs)
    bound.__signature__ = signature.replace(parameters=rest)
    bound.__annotations__ = {k: v for k, v in hints.items() if k in {p.name for p in rest} or k == "return"}
    return bound


def cleared_export() -> tuple:
    """An exported file and its note, cleared: a file made from another view or model would be taken for the one on
    screen."""
    return None, ""


# every 10 min, Gradio deletes the uploads and downloads in its cache older than an hour; the sweeper removes our
# download folders there at the same age (app.start_sweeper)
CACHE_CLEANUP = (600, 3600)


def download_dir(*key: str, empty: bool = True) -> Path:
    """An empty folder for one kind of download (playground.packages.sweep.export_dir) inside Gradio's cache, which
    then serves the file where it is: a file returned from elsewhere is copied there, and a download was stored twice
    (a 4.7 MB chart page, a package zip, an export) until the sweep."""
    from gradio.utils import get_upload_folder  # the folder Blocks.GRADIO_CACHE is

    from playground.packages.sweep import export_dir

    return export_dir(*key, root=get_upload_folder(), empty=empty)


# ----------------------------------------------------------------------------------------------------------
# The one error wrapper: people see a sentence, never a traceback


# What a message says for the operator and the command line, left out of the page: a visitor can neither set the
# server's variables nor run its commands (the CLI and the server log keep the whole message)
OPERATOR_ONLY = [re.compile(r";? ?the operator (?:sets|can raise the limit with) PLAYGROUND_[A-Z0-9_]+"),
                 re.compile(r"[,;]? (?:or )?(?:use|files go through) `python -m playground[^`]*`(?: for files)?")]


def for_people(message: str) -> str:
    """A refusal as the page says it: without the operator's variables and the CLI's commands."""
    for pattern in OPERATOR_ONLY:
        message = pattern.sub("", message)
    return message.replace(" ()", "")


def _as_gradio_error(err: BaseException) -> gr.Error:
    if isinstance(err, gr.Error):
        return err
    if isinstance(err, PlaygroundError):
        error = gr.Error(for_people(str(err)), print_exception=False)
        error.refused = err  # said_beside() shows it beside the control instead
        return error
    log.exception("unexpected error in a UI handler")  # the details stay in the server log, never reach the page
    return gr.Error("Something went wrong on the server; the details are in its log. Try again, or change the "
                    "settings you just changed.", print_exception=False)


def reaches_people(err: BaseException) -> bool:
    """Every exception, and a Rust extension's panic; not a KeyboardInterrupt, SystemExit or GeneratorExit."""
    return isinstance(err, Exception) or is_rust_panic(err)


def unwrapped(fn: Callable) -> Callable:
    """The handler inside a readable wrapper (fn itself when it is none). The mark is checked against __wrapped__:
    functools.wraps copies it onto whatever wraps a readable handler, which is not one itself."""
    handler = getattr(fn, "__readable__", None)
    return handler if handler is not None and handler is getattr(fn, "__wrapped__", None) else fn


def readable(fn: Callable) -> Callable:
    """fn with PlaygroundError (and any other exception) turned into a readable gr.Error. A handler is wrapped once:
    readable(readable(fn)) is readable(fn), and said_beside() wraps the handler itself, not its readable wrapper."""
    if unwrapped(fn) is not fn:
        return fn
    wrapper = reraising(fn, reaches_people, _as_gradio_error)
    wrapper.__readable__ = fn  # the handler itself
    return wrapper


def refusal(err: PlaygroundError) -> str:
    """How a refused action reads next to the control that caused it (in Markdown, where a message's `<TAB>` would
    open an HTML tag and hide the rest)."""
    return "⚠️ " + for_people(str(err)).replace("&", "&amp;").replace("<", "&lt;")


def said_beside(fn: Callable, outputs: list, note) -> dict:
    """`fn=` and `outputs=` for an event listener whose refusals are not failures: a PlaygroundError (a person's
    mistake, a name that is gone) puts its message in `note`, a Markdown beside the control, and leaves every other
    output as it was (gr.skip()). Raising would mark ALL outputs as failed (red "Error" badges, values gone) with
    the only copy of the message in a fading toast. Anything else still reaches people as a gr.Error (readable).

    `note` may be one of `outputs` (fn returns it itself), or not: then it is added as the last output, and cleared
    when fn succeeds. API clients get the message as that output's value."""
    handler = unwrapped(fn)  # wrapped once, even when given a readable handler
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

    def refused(err: BaseException):
        err = getattr(err, "refused", err)  # a PlaygroundError a readable helper it called turned into a gr.Error
        return out(tuple(refusal(err) if i == where else gr.skip() for i in range(len(outputs))))

    def is_refusal(err: BaseException) -> bool:
        return isinstance(err, PlaygroundError) or hasattr(err, "refused")

    if inspect.isgeneratorfunction(handler):
        @functools.wraps(handler)
        def noted(*args, **kwargs):
            try:
                for result in handler(*args, **kwargs):
                    yield shaped(result)
            except (PlaygroundError, gr.Error) as err:
                if not is_refusal(err):
                    raise
                yield refused(err)
    else:
        @functools.wraps(handler)
        def noted(*args, **kwargs):
            try:
                return shaped(handler(*args, **kwargs))
            except (PlaygroundError, gr.Error) as err:
                if not is_refusal(err):
                    raise
                return refused(err)
    return dict(fn=readable(noted), outputs=outputs)
