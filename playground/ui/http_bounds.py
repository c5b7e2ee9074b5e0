"""What one HTTP request may send before Gradio reads it: a body of bounded size, and no file named by its URL.

Gradio reads the whole body of an event (FastAPI parses its JSON) before a handler can look at it, so the size of
a request must be checked in front of Gradio: eight 100 MB bodies at once took the server from 470 MB to 3.9 GB,
and one translate request of 100 MB kept 536 MB after it had been refused by its characters. And a file input
given a FileData whose path is an http(s) URL makes Gradio download it (processing_utils.async_move_files_to_cache
-> Block.async_move_resource_to_block_cache), past the upload bounds and max_file_size: the playground's files
come from the visitor's own uploads (Gradio's /upload route, bounded there), never from an address. That route
streams files to disk, but keeps a part without a file name (a form field) in memory whole: eight such parts of
100 MB took it from 430 MB to 1.3 GB; here they are followed as they stream, and cut at FIELD_BYTES.

    PLAYGROUND_MAX_REQUEST_BODY_MB   bytes of one request's body besides uploads (default 4: the 50,000 characters
                                     a text may have, JSON-escaped, twice over)
"""

from __future__ import annotations

import json

from python_multipart.multipart import MultipartParser, parse_options_header

from playground.settings import MB, env_megabytes
from playground.ui.sessions import UploadBounds

URL_PREFIXES = ("http://", "https://")
FIELD_BYTES = 64 * 1024  # an upload's parts without a file name, together (Gradio's own uploads send none)


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
    """ASGI middleware in front of Gradio: a request's body is refused with 413 when its Content-Length, or the
    bytes it streams without one, pass PLAYGROUND_MAX_REQUEST_BODY_MB, before more of it is read; a body naming a
    file by an http(s) URL is refused with 422. An upload (which Gradio streams to disk, bounded by max_file_size and
    sessions.UploadBounds) is refused with 413 once its form fields pass FIELD_BYTES. What is within bounds reaches
    Gradio unchanged."""

    def __init__(self, app, max_body: int | None = None):
        self.app = app
        self.max_body = max_body or max_request_body_bytes()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            return await self.app(scope, receive, send)
        if scope["path"].rstrip("/").endswith("/upload"):
            return await self.upload(scope, receive, send)
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


    async def upload(self, scope, receive, send):
        """An upload reaches Gradio as it streams, followed by FormFields; once its form fields pass FIELD_BYTES,
        Gradio is told the client left (it stops reading) and the client gets 413 instead of Gradio's answer."""
        content_type, options = parse_options_header(dict(scope.get("headers", [])).get(b"content-type", b""))
        if content_type != b"multipart/form-data" or not options.get(b"boundary"):
            return await self.app(scope, receive, send)  # Gradio refuses it itself
        fields, refused = FormFields(options[b"boundary"]), False

        async def followed():
            nonlocal refused
            message = await receive()
            if message["type"] == "http.request" and not fields.fit(message.get("body", b"")):
                refused = True
                return {"type": "http.disconnect"}
            return message

        async def unless_refused(message):
            if not refused:
                await send(message)

        try:
            await self.app(scope, followed, unless_refused)
        except Exception:
            if not refused:
                raise
        if refused:
            await refuse(send, 413, f"An upload carries files; this one sent more than {FIELD_BYTES // 1024} kB "
                                    "of other form data. Upload the file as a file.")


class FormFields:
    """The bytes of a multipart body's parts that have no file name, counted as the body streams (python-multipart,
    the parser Gradio's own is built on)."""

    def __init__(self, boundary: bytes):
        self.bytes, self.in_field, self.header = 0, False, b""
        self.parser = MultipartParser(boundary, {
            "on_part_begin": self.part_begins, "on_header_field": self.header_text,
            "on_header_value": self.header_text, "on_header_end": self.header_ends,
            "on_part_data": self.part_data})

    def fit(self, chunk: bytes) -> bool:
        """Follow one more chunk of the body; False once the fields pass FIELD_BYTES (a body that is not multipart
        is left to Gradio to refuse)."""
        try:
            self.parser.write(chunk)
        except Exception:  # noqa: BLE001 - python-multipart's errors: Gradio answers those itself
            return True
        return self.bytes <= FIELD_BYTES

    def part_begins(self) -> None:
        self.in_field, self.header = True, b""

    def header_text(self, data: bytes, start: int, end: int) -> None:
        self.header = (self.header + data[start:end])[-4096:]

    def header_ends(self) -> None:
        if self.header.lower().startswith(b"content-disposition") and b"filename" in self.header.lower():
            self.in_field = False
        self.header = b""

    def part_data(self, data: bytes, start: int, end: int) -> None:
        if self.in_field:
            self.bytes += end - start


refuse = UploadBounds.refuse  # a sentence, without reading the rest of the request


def parsed(body: bytes):
    """The JSON of a body, or None when it is not JSON (Gradio refuses that itself)."""
    try:
        return json.loads(body)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
