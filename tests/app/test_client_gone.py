"""A quick call whose client has gone: Gradio cannot stop the handler's thread, but marks its event not alive when
the page's event stream closes; playground.ui.handlers.client_gone reads that, so that the worker pool stops the
work then instead of at its deadline."""

from __future__ import annotations

import threading
import time

import httpx
from helpers import launched


def test_a_handler_sees_its_client_go_when_the_page_closes_its_stream():
    import gradio as gr

    from playground.ui.handlers import client_gone

    seen, asked = [], threading.Event()

    def slow(text: str) -> str:
        gone = client_gone()
        asked.set()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if gone is not None and gone():
                seen.append(time.monotonic())
                return "stopped"
            time.sleep(0.1)
        return text

    with gr.Blocks() as demo:
        text = gr.Textbox()
        text.submit(slow, text, text, api_name="slow")
    demo.queue()
    with launched(demo) as url:
        fn_index = next(d["id"] for d in httpx.get(url + "config").json()["dependencies"] if d["api_name"] == "slow")
        httpx.post(url + "gradio_api/queue/join", json={"data": ["a"], "fn_index": fn_index, "session_hash": "page"})
        with httpx.stream("GET", url + "gradio_api/queue/data", params={"session_hash": "page"}, timeout=30) as events:
            next(line for line in events.iter_lines() if "process_starts" in line)
            assert asked.wait(10)
        left = time.monotonic()  # the page closed its stream
        while not seen and time.monotonic() < left + 28:
            time.sleep(0.1)
    # the handler saw it go: Gradio checks the stream at least every 10 s (later on a loaded machine), well before the
    # handler's own 30 s were up
    assert seen and seen[0] - left < 25
    assert client_gone() is None  # outside an event there is nothing to ask
