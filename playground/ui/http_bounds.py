"""What one HTTP request may send before Gradio reads it: a body of bounded size, and no file named by its URL.

Gradio reads the whole body of an event (FastAPI parses its JSON) before a handler can look at it, so the size of
a request must be checked in front of Gradio: eight 100 MB bodies at once took the server from 470 MB to 3.9 GB,
and one translate request of 100 MB kept 536 MB after it had been refused by its characters. And a file input
given a FileData whose path is an http(s) URL makes Gradio download it (processing_utils.async_move_files_to_cache
-> Block.async_move_resource_to_block_cache), past the upload bounds and max_file_size: the playground's files
come from the visitor's own uploads (Gradio's /upload route, bounded there), never from an address.

    PLAYGROUND_MAX_REQUEST_BODY_MB   bytes of one request's body besides uploads (default 4: the 50,000 characters
                                     a text may have, JSON-escaped, twice over)
"""

from __future__ import annotations

import json

from playground.settings import MB, env_megabytes
from playground.ui.sessions import UploadBounds

URL_PREFIXES = ("http://", "https://")


def max_request_body_bytes() -> int:
    return env_megabytes("PLAYGROUND_MAX_REQUEST_BODY_MB", 4)


def names_a_url(value) -> bool:
    """Whether a JSON value holds a file (a dict with a "path") whose path is an http(s) address, at any depth."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            path = item.get("path")
            if isinstance(path, str) and path.strip().lower().startswith(URL_PREFIXES):
                return True
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


class RequestBounds:
    """ASGI middleware in front of Gradio: a request's body (other than an upload's, which Gradio streams to disk)
    is refused with 413 when its Content-Length, or the bytes it streams without one, pass
    PLAYGROUND_MAX_REQUEST_BODY_MB, before more of it is read; a body naming a file by an http(s) URL is refused with
    422. What is within bounds reaches Gradio unchanged."""

    def __init__(self, app, max_body: int | None = None):
        self.app = app
        self.max_body = max_body or max_request_body_bytes()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS") or scope["path"].rstrip(
                "/").endswith("/upload"):
            return await self.app(scope, receive, send)
        too_large = (f"This request sends more than the {self.max_body / MB:,.0f} MB one request may send here (the "
                     "operator sets PLAYGROUND_MAX_REQUEST_BODY_MB). Send less text, or upload files as files.")
        length = dict(scope.get("headers", [])).get(b"content-length", b"")
        if length and (not length.isdigit() or int(length) > self.max_body):
            return await refuse(send, 413, too_large)
        body, more = bytearray(), True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            body += message.get("body", b"")
            if len(body) > self.max_body:
                return await refuse(send, 413, too_large)
            more = message.get("more_body", False)
        if b"http" in body.lower() and names_a_url(parsed(bytes(body))):
            return await refuse(send, 422, "A file must be uploaded, not named by its address: this server does not "
                                           "download files for a request. Upload the file itself.")
        delivered = False

        async def replay():
            nonlocal delivered
            if delivered:
                return await receive()  # the client going away, as Gradio watches for it
            delivered = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        return await self.app(scope, replay, send)


refuse = UploadBounds.refuse  # a sentence, without reading the rest of the request


def parsed(body: bytes):
    """The JSON of a body, or None when it is not JSON (Gradio refuses that itself)."""
    try:
        return json.loads(body)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
