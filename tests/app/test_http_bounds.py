"""The ASGI middleware in front of Gradio (playground.ui.http_bounds): a body past its bound is refused before it
is read, and a file named by its URL before Gradio downloads it; what is within bounds reaches Gradio unchanged."""

from __future__ import annotations

import asyncio
import json

import pytest

from playground.ui.http_bounds import RequestBounds, names_a_url

LIMIT = 1000


class Gradio:
    """The app behind the middleware: records the body it reads."""

    def __init__(self):
        self.bodies = []

    async def __call__(self, scope, receive, send):
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        self.bodies.append(body)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def request(chunks: list[bytes], length: int | None = None, path: str = "/gradio_api/queue/join",
            method: str = "POST", headers: tuple = ()) -> tuple[Gradio, int, bytes, int]:
    """Send a request through the middleware: (the app, the status, the answer, how many chunks were read)."""
    app, sent, read = Gradio(), [], 0
    headers = [*headers, *([(b"content-length", str(length).encode())] if length is not None else [])]
    scope = {"type": "http", "method": method, "path": path, "headers": headers, "client": ("127.0.0.1", 1)}

    async def receive():
        nonlocal read
        read += 1
        if read > len(chunks):
            return {"type": "http.disconnect"}
        return {"type": "http.request", "body": chunks[read - 1], "more_body": read < len(chunks)}

    async def send(message):
        sent.append(message)

    asyncio.run(RequestBounds(app, max_body=LIMIT)(scope, receive, send))
    return app, sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:]), read


def test_a_body_said_to_be_too_large_is_refused_before_a_byte_is_read():
    app, status, answer, read = request([b"x" * 100] * 50, length=100_000_000)
    assert status == 413 and b"PLAYGROUND_MAX_REQUEST_BODY_MB" in answer and read == 0 and app.bodies == []


def test_a_body_streamed_without_its_size_is_refused_once_past_the_bound():
    app, status, answer, read = request([b"x" * 300] * 100)
    assert status == 413 and read == 4 and app.bodies == []  # 1,200 bytes read of 30,000


def test_a_body_within_bounds_reaches_gradio_unchanged():
    body = json.dumps({"data": ["demo-en-de", "a cat"], "fn_index": 3}).encode()
    app, status, answer, _ = request([body[:20], body[20:]], length=len(body))
    assert status == 200 and app.bodies == [body]


@pytest.mark.parametrize("path, method", [("/gradio_api/upload", "POST"), ("/gradio_api/info", "GET")])
def test_uploads_and_reads_are_left_to_gradio(path, method):
    app, status, _, _ = request([b"x" * 600] * 3, length=1800, path=path, method=method)
    assert status == 200 and app.bodies == [b"x" * 1800]


def test_a_file_named_by_its_url_is_refused_before_gradio_sees_it():
    url_file = {"path": " HTTPS://example.com/pairs.tsv", "meta": {"_type": "gradio.FileData"}}
    body = json.dumps({"data": [[{"path": "/tmp/gradio/a.tsv"}, url_file], 0.05]}).encode()
    app, status, answer, _ = request([body], length=len(body))
    assert status == 422 and b"not named by its address" in answer and app.bodies == []
    assert names_a_url([{"a": {"path": "http://x"}}]) and not names_a_url({"path": "/tmp/http/x", "url": "http://x"})


def multipart(*parts: tuple[bytes, bytes]) -> list[bytes]:
    """A multipart body of (Content-Disposition, data) parts, in chunks of 10 kB as a client streams it."""
    body = b"".join(b"--XyZ\r\nContent-Disposition: %s\r\n\r\n%s\r\n" % part for part in parts) + b"--XyZ--\r\n"
    return [body[i:i + 10_000] for i in range(0, len(body), 10_000)]


def upload(chunks: list[bytes]) -> tuple[Gradio, int, bytes, int]:
    return request(chunks, path="/gradio_api/upload",
                   headers=((b"content-type", b"multipart/form-data; boundary=XyZ"),))


def test_an_uploads_files_stream_through_but_its_form_fields_are_cut_at_their_bound():
    files = multipart((b'form-data; name="files"; filename="a.tsv"', b"a\tb\n" * 100_000),
                      (b'form-data; name="files"; filename="b.tsv"', b"c\td\n" * 100_000))
    app, status, _, read = upload(files)
    assert status == 200 and app.bodies == [b"".join(files)] and read == len(files)  # 800 kB of files: past LIMIT
    field = multipart((b'form-data; name="files"; filename="a.tsv"', b"a\tb\n" * 1000),
                      (b'form-data; name="note"', b"x" * 10_000_000))
    app, status, answer, read = upload(field)
    assert status == 413 and b"more than 64 kB of other form data" in answer and read < 10 < len(field)
