"""What strangers' sessions may hold on a shared server, and for how long: the client address a request comes from,
idle sessions' data given back, one cap on all sessions' data together, and uploads bounded per address.

Gradio keeps a session's state for as long as the server runs unless a browser tab closes (demo.unload), which API
clients never do; its own expiry (gr.State's time_to_live) counts from the last time a handler *returned* the state,
and ours is changed in place, so it would never start. Here a sweeper drops a session idle for
PLAYGROUND_SESSION_IDLE_MINUTES, with the copies of its outputs Gradio keeps, and hands the memory back to the
system (its visitor is remembered, so a visitor coming back still has their models).

    PLAYGROUND_SESSION_IDLE_MINUTES   a session is let go after this long without a request (default 30)
    PLAYGROUND_MAX_SESSIONS_DATA_MB   all sessions' sentence pairs together (default: a quarter of the memory)
    PLAYGROUND_MAX_UPLOAD_MB_PER_ADDRESS / PLAYGROUND_MAX_UPLOAD_MB   uploads per hour from one client address / all
                                      (Hub imports and the downloads made for one session count as uploads)
    PLAYGROUND_MAX_WAITING_RUNS / PLAYGROUND_MAX_WAITING_EVENTS   runs / events of any kind one client address (or
                                      one signed-in account) may have waiting in the queue (default 2 / 60)

The client address itself (X-Forwarded-For behind a Space's proxy) is worked out by playground.serving.visitors.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections import OrderedDict, deque
from typing import Protocol, runtime_checkable

from playground.errors import DataError
from playground.limits import memory_limit_bytes
from playground.serving.visitors import client_address
from playground.settings import GB, MB, env_int, env_megabytes, env_number

log = logging.getLogger("playground.ui")
FREED = threading.Event()  # something big was let go since the last sweep: give the memory back then
UPLOAD_WINDOW_S = 3600  # Gradio's cache cleanup deletes uploads older than an hour (handlers.CACHE_CLEANUP)


# ----------------------------------------------------------------------------------------------------------
# Where a request comes from


def request_address(request) -> str:
    """client_address (playground.serving.visitors) of a gr.Request (None outside an event: "")."""
    if request is None:
        return ""
    headers = getattr(request, "headers", None) or {}
    client = getattr(request, "client", None)
    return client_address(headers.get("x-forwarded-for"), getattr(client, "host", None))


def requester(request) -> str:
    """Who a request counts against while it waits: the signed-in account ("hf:<name>", from Gradio's OAuth session),
    else its client address ("addr:<address>")."""
    try:
        oauth = request.session.get("oauth_info") or {}
    except (AssertionError, AttributeError):  # no session middleware (OAuth off): nobody is signed in
        oauth = {}
    name = (oauth.get("userinfo") or {}).get("preferred_username") if isinstance(oauth, dict) else None
    return f"hf:{name}" if name else f"addr:{request_address(request)}"


def bound_waiting(queue, run_ids: set[str], runs: int | None = None, events: int | None = None) -> None:
    """Refuse, as it joins Gradio's queue, an event that would give one requester (an address, or a signed-in
    account) more than `events` waiting events, a run (an event of a concurrency id in `run_ids`) more than `runs`
    waiting runs, or a call for the workers (handlers.WORKERS_QUEUE, never waiting in Gradio's queue) more than
    the worker pool would take from one address: sessions are free to make, so a bound per session would bound
    nothing, and a flood refused here costs the server a request, not an event. The queue itself is unbounded
    (ui.app), so visitors are never turned away because others wait."""
    from playground.limits import max_waiting_calls
    from playground.runtime.workers import too_many_calls
    from playground.ui.handlers import WORKERS_QUEUE, for_people

    runs = runs or env_int("PLAYGROUND_MAX_WAITING_RUNS", 2)
    events = events or env_int("PLAYGROUND_MAX_WAITING_EVENTS", 60)
    push = queue.push

    async def bounded_push(body, request, username):
        who = requester(request)
        waiting = [e for q in list(queue.event_queue_per_concurrency_id.values()) for e in list(q.queue)
                   if requester(e.request) == who]
        fn = queue.blocks.fns.get(body.fn_index)
        if fn is not None and fn.concurrency_id == WORKERS_QUEUE:
            active = [e for job in list(queue.active_jobs) for e in job or [] if requester(e.request) == who]
            held = sum(e.concurrency_id == WORKERS_QUEUE for e in [*active, *waiting])
            if held > max_waiting_calls():
                return False, for_people(too_many_calls(held)), "error"
        if fn is not None and fn.concurrency_id in run_ids and \
                sum(e.concurrency_id in run_ids for e in waiting) >= runs:
            return False, (f"Your network (or account) has {runs} training runs waiting for a free slot already, the "
                           "most this Space queues for one; start this one when one of them has begun."), "error"
        if len(waiting) >= events:
            return False, (f"Your network (or account) has {len(waiting)} requests waiting in this Space's queue, "
                           "the most it keeps for one; try again when they have been answered."), "error"
        return await push(body, request, username)

    queue.push = bounded_push


def current_address() -> str:
    """The client address of the event being handled (Gradio's request context), "" outside one."""
    from gradio.context import LocalContext

    return request_address(LocalContext.request.get(None))


# ----------------------------------------------------------------------------------------------------------
# All sessions' data together


_HOLDING: "weakref.WeakValueDictionary[int, object]" = weakref.WeakValueDictionary()  # id -> a Session with data
_HOLDING_LOCK = threading.Lock()


def max_sessions_data_bytes() -> int:
    default = max(512, (memory_limit_bytes() or 16 * GB) // 4 // MB)
    return env_megabytes("PLAYGROUND_MAX_SESSIONS_DATA_MB", default)


def sessions_data_bytes(besides=None) -> int:
    """Bytes of sentence pairs all live sessions hold (besides one, whose data is about to be replaced)."""
    with _HOLDING_LOCK:
        sessions = [s for s in _HOLDING.values() if s is not besides]
    return sum(s.data.pairs.nbytes for s in sessions if getattr(s, "data", None) is not None)


def check_room(session, new_bytes: int) -> None:
    """Refuse data that would bring all sessions' data past PLAYGROUND_MAX_SESSIONS_DATA_MB (the server's memory is
    shared by every visitor); called with the file's size before it is read, and with the pairs' size after."""
    held, cap = sessions_data_bytes(besides=session), max_sessions_data_bytes()
    if held + new_bytes > cap:
        FREED.set()  # the pairs read for nothing
        raise DataError(f"The server holds {held / MB:,.0f} MB of visitors' data right now; with these "
                        f"{new_bytes / MB:,.1f} MB it would pass the {cap / MB:,.0f} MB all sessions may hold "
                        "together (the operator sets PLAYGROUND_MAX_SESSIONS_DATA_MB). Try again in a few minutes "
                        "(idle sessions let their data go), load a smaller sample, or use a built-in dataset.")


def holding(session) -> None:
    """Count this session's data in sessions_data_bytes from now on (for as long as the session lives)."""
    with _HOLDING_LOCK:
        _HOLDING[id(session)] = session


# ----------------------------------------------------------------------------------------------------------
# Idle sessions


@runtime_checkable
class HeldSession(Protocol):
    """What the sweeper needs of a tab's state (playground.ui.state.Session): whether it trains, who it is, and
    letting its data go."""

    trainer: object
    visitor: object

    def release(self) -> None: ...


_KNOWN: "OrderedDict[str, object]" = OrderedDict()  # session hash -> the Visitor of a session that expired
KNOWN_SESSIONS = 100_000  # a few hundred bytes each


def expire_idle(state_holder, idle_s: float, now=None) -> int:
    """Drop every session idle for longer than idle_s (not one whose run is training): its Session's data and the
    copies of its outputs Gradio keeps per session (a length histogram of every pair, the preview table), which
    Gradio itself would keep until PLAYGROUND_MAX_SESSIONS newer ones push it out. Who its visitor was is kept
    (known_visitor), so a tab that comes back is still the same visitor. Returns how many went."""
    import datetime

    now = now or datetime.datetime.now()
    expired = 0
    for session_hash, last in list(state_holder.time_last_used.items()):
        stored = state_holder.session_data.get(session_hash)
        values = [v for v in stored.state_data.values() if isinstance(v, HeldSession)] if stored else []
        if (now - last).total_seconds() <= idle_s or any(v.trainer is not None for v in values):
            continue
        for session in values:
            session.release()
            if session.visitor is not None:
                _KNOWN[session_hash] = session.visitor
                while len(_KNOWN) > KNOWN_SESSIONS:
                    _KNOWN.popitem(last=False)
        with state_holder.lock:
            state_holder.session_data.pop(session_hash, None)
            state_holder.time_last_used.pop(session_hash, None)
        expired += 1
    return expired


def known_visitor():
    """The Visitor of the expired session the event being handled belongs to, or None."""
    from gradio.context import LocalContext

    request = LocalContext.request.get(None)
    return _KNOWN.get(getattr(request, "session_hash", None) or "")


def give_back_memory() -> None:
    """Hand the memory freed sessions leave to the operating system: the allocator keeps freed blocks for reuse
    (glibc's per-thread arenas kept ~170 MB after three 8 MB uploads were let go; malloc_trim gave half back)."""
    import ctypes
    import gc

    gc.collect()
    process = ctypes.CDLL(None)
    release = getattr(process, "MallocExtension_ReleaseFreeMemory", None)  # tcmalloc (playground.runtime.allocator)
    if release is not None:
        release()
    elif hasattr(process, "malloc_trim"):  # glibc
        process.malloc_trim(0)


def start_session_sweeper(demo) -> None:
    """A daemon thread that lets idle sessions go every PLAYGROUND_SESSION_SWEEP_S seconds (default 60)."""
    idle_s = env_number("PLAYGROUND_SESSION_IDLE_MINUTES", 30) * 60
    every = env_number("PLAYGROUND_SESSION_SWEEP_S", 60)
    demo_ref = weakref.ref(demo)

    def sweep_forever() -> None:
        while (demo := demo_ref()) is not None:
            holder = getattr(demo, "state_holder", None)
            del demo
            if holder is not None:
                try:
                    if count := expire_idle(holder, idle_s):
                        log.info("let %d idle sessions go", count)
                    if count or FREED.is_set():
                        FREED.clear()
                        give_back_memory()
                except Exception:  # noqa: BLE001 - a sweep that fails must not end the sweeper
                    log.exception("releasing idle sessions failed")
            time.sleep(every)

    threading.Thread(target=sweep_forever, name="playground-sessions", daemon=True).start()


# ----------------------------------------------------------------------------------------------------------
# Uploads: Gradio's /upload route takes files from anybody, with or without a session


SERVED = (deque(), threading.Lock())  # (when, address, bytes) of the app's uploads and Hub imports, and its lock


class UploadBounds:
    """ASGI middleware: the bytes POSTed to Gradio's upload route in the last hour (while Gradio's cache keeps them),
    per client address and in all, are bounded; a request over either bound, or without a Content-Length (so that
    its size is known before it is read), is answered 429 / 411 with a sentence. Gradio's max_file_size still
    bounds each file. A browser's and gradio_client's uploads carry no session, so this is the bound there is."""

    def __init__(self, app, per_address: int | None = None, total: int | None = None,
                 window_s: float = UPLOAD_WINDOW_S):
        self.app = app
        self.per_address = per_address or env_megabytes("PLAYGROUND_MAX_UPLOAD_MB_PER_ADDRESS", 600)
        self.total = total or env_megabytes("PLAYGROUND_MAX_UPLOAD_MB", 3000)
        self.window_s = window_s
        # (when, address, bytes), oldest first: the app's own count (SERVED), which its Hub imports join; bounds a
        # caller sized itself keep their own
        own = per_address is not None or total is not None
        self.recent: deque[tuple[float, str, int]]
        self.recent, self.lock = (deque(), threading.Lock()) if own else SERVED

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST" or not scope["path"].rstrip("/").endswith("/upload"):
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        length = headers.get("content-length", "")
        if not length.isdigit():
            return await self.refuse(send, 411, "An upload must say its size (Content-Length).")
        address = client_address(headers.get("x-forwarded-for"), (scope.get("client") or ("", 0))[0])
        refusal = self.admit(address, int(length))
        if refusal:
            return await self.refuse(send, 429, refusal)
        return await self.app(scope, receive, send)

    def admit(self, address: str, size: int, now: float | None = None, smaller: str = "upload a smaller file"
              ) -> str | None:
        """Record an upload of size bytes from address, or say why it is refused (`smaller`: how to send less)."""
        now = time.monotonic() if now is None else now
        with self.lock:
            while self.recent and now - self.recent[0][0] > self.window_s:
                self.recent.popleft()
            mine = sum(n for _, a, n in self.recent if a == address)
            everybody = sum(n for _, _, n in self.recent)
            if mine + size > self.per_address:
                first = next((t for t, a, _ in self.recent if a == address), now)
                advice = (f"Try again in {(self.window_s - (now - first)) / 60:.0f} minutes, or {smaller}." if mine
                          else f"{smaller[0].upper()}{smaller[1:]}.")
                return (f"This server takes at most {self.per_address / MB:,.0f} MB of uploads an hour from one "
                        f"network; yours has sent {mine / MB:,.0f} MB. {advice}")
            if everybody + size > self.total:
                wait = self.window_s - (now - self.recent[0][0])
                return (f"This server has taken {everybody / MB:,.0f} MB of uploads in the last hour, the most it "
                        f"takes ({self.total / MB:,.0f} MB). Try again in {wait / 60:.0f} minutes.")
            self.recent.append((now, address, size))
        return None

    @staticmethod
    async def refuse(send, status: int, message: str) -> None:
        body = message.encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


def admit_import(address: str, size: int) -> str | None:
    """A Hub import's bytes counted as one of the app's uploads from `address` (shared mode): None, or why not."""
    refusal = UploadBounds(None).admit(address, size)
    return f"Importing this model would pass this server's bound: {refusal}" if refusal else None


def admit_download(address: str, size: int, what: str, smaller: str) -> str | None:
    """A download the app wrote into Gradio's cache for one session (shared mode), counted as one of the uploads
    from `address`: Gradio keeps both an hour, and sessions cost nothing to open, so a bound per session is none.
    None, or why not (`what` is the file, `smaller`: how to get a smaller one)."""
    refusal = UploadBounds(None).admit(address, size, smaller=smaller)
    return f"{what} is not kept: downloads count as uploads here. {refusal}" if refusal else None
