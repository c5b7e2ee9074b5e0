"""The queue of a shared app on ZeroGPU as visitors meet it (SPACES_ZERO_GPU=true, as a real Space sets it, with
tests/app/spaces_standin.py as its `spaces`): many visitors at once are queued and told their position, never turned
away; what one client address (whatever X-Forwarded-For it writes itself) may have waiting, runs and new visitor
tokens included, is bounded. Raw HTTP, as a browser's or a stranger's client sends it."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import spaces_standin
from helpers import launched

from playground.ui.app import RUN_QUEUES, build_app

pytestmark = pytest.mark.sessions


def event_of(demo, api_name: str):
    return next(fn for fn in demo.fns.values() if fn.api_name == api_name)


def hold(demo, api_name: str):
    """Every slot of this event's concurrency id taken (as by runs on all of ZeroGPU's GPUs): what joins waits."""
    fn = event_of(demo, api_name)
    demo._queue.create_event_queue_for_fn(fn)
    waiting = demo._queue.event_queue_per_concurrency_id[fn.concurrency_id]
    waiting.current_concurrency = waiting.concurrency_limit
    return waiting


def join(url: str, demo, api_name: str, session_hash: str, forwarded_for: str, data=None) -> httpx.Response:
    fn = event_of(demo, api_name)
    return httpx.post(url + "gradio_api/queue/join", headers={"X-Forwarded-For": forwarded_for}, timeout=60, json={
        "data": data if data is not None else [None] * len(fn.inputs), "fn_index": fn._id,
        "session_hash": session_hash, "trigger_id": None, "event_data": None})


def messages(url: str, session_hash: str) -> list[dict]:
    """What the queue tells one session until its event has completed."""
    seen = []
    with httpx.stream("GET", url + "gradio_api/queue/data", params={"session_hash": session_hash},
                      timeout=120) as stream:
        for line in stream.iter_lines():
            if line.startswith("data:"):
                seen.append(json.loads(line[5:]))
                if seen[-1].get("msg") == "process_completed":
                    break
    return seen


@pytest.fixture
def zerogpu_space(tmp_path, monkeypatch):
    spaces_standin.install(monkeypatch)  # SPACES_ZERO_GPU=true, as on a ZeroGPU Space
    monkeypatch.setenv("SPACE_ID", "someone/playground")  # behind the Space's proxy: X-Forwarded-For is read
    monkeypatch.setenv("PLAYGROUND_NEW_VISITORS_PER_HOUR", "3")
    demo = build_app(tmp_path / "models", shared=True)
    demo.models_dir = tmp_path / "models"
    with launched(demo) as url:
        yield demo, url


def test_eighty_visitors_at_once_on_zerogpu_are_queued_and_told_their_position(zerogpu_space):
    demo, url = zerogpu_space
    assert demo._queue.max_size >= 80  # gradio's queue() makes None 1 on ZeroGPU
    held = hold(demo, "list_models")
    # a classroom of 8 behind one address, and 72 visitors from addresses of their own
    addresses = ["203.0.113.5"] * 8 + [f"198.51.100.{i}" for i in range(72)]
    hashes = [f"visitor{i}" for i in range(len(addresses))]
    joined = [join(url, demo, "list_models", h, a) for h, a in zip(hashes, addresses)]
    assert [r.status_code for r in joined] == [200] * 80, {r.text for r in joined}
    with ThreadPoolExecutor(len(hashes)) as pool:
        streams = pool.map(lambda h: messages(url, h), hashes)
        held.current_concurrency = 0  # the GPUs free again: the queue moves
        answered = list(streams)
    first_ranks = [next(m["rank"] for m in seen if m.get("msg") == "estimation") for seen in answered]
    assert sorted(first_ranks) == list(range(80))  # each told its place in the queue
    assert all(seen[-1]["msg"] == "process_completed" and seen[-1]["success"] for seen in answered)


def test_one_address_has_a_few_runs_waiting_whatever_it_writes_in_x_forwarded_for(zerogpu_space):
    demo, url = zerogpu_space
    assert {event_of(demo, name).concurrency_id for name in ("train", "resume", "continue_on_gpu",
                                                             "continue_on_cpu")} <= RUN_QUEUES
    hold(demo, "train")
    # six API sessions of one client, each a visitor of its own, each with a made-up address before the one the
    # proxy appends
    statuses = [join(url, demo, "train", f"runner{i}", f"192.0.2.{i}, 203.0.113.5") for i in range(6)]
    assert [r.status_code for r in statuses] == [200, 200, 400, 400, 400, 400]
    assert "2 training runs waiting" in statuses[2].json()["detail"]
    assert join(url, demo, "train", "elsewhere", "198.51.100.7").status_code == 200  # another network waits too
    # quick calls from the same address still join
    assert join(url, demo, "list_models", "runner0", "203.0.113.5").status_code == 200


def test_one_address_gets_a_few_new_visitor_tokens_an_hour(zerogpu_space):
    from playground.serving.visitors import server_secret, verify_token

    demo, url = zerogpu_space

    def welcome(session_hash: str, forwarded_for: str) -> str:
        """The page load's private step, called as a stranger's script would: a fresh token each time it can."""
        assert join(url, demo, "welcome", session_hash, forwarded_for, [None, None]).status_code == 200
        return next(m for m in messages(url, session_hash) if m.get("msg") == "process_completed")["output"]["data"][0]

    tokens = [welcome(f"page{i}", f"192.0.2.{i}, 203.0.113.5") for i in range(5)]
    assert tokens[3:] == ["", ""]  # PLAYGROUND_NEW_VISITORS_PER_HOUR: these pages are visitors for the page only
    secret = server_secret(demo.models_dir)
    assert len(set(tokens[:3])) == 3 and all(verify_token(t, secret) for t in tokens[:3])
    assert verify_token(welcome("other", "198.51.100.8"), secret)  # another network gets its own


def test_a_signed_in_visitor_waits_as_their_account_wherever_they_are(monkeypatch):
    from types import SimpleNamespace

    from playground.ui.sessions import requester

    monkeypatch.setenv("SPACE_ID", "someone/playground")
    signed = {"oauth_info": {"userinfo": {"preferred_username": "ada"}}}
    for address in ("203.0.113.5", "198.51.100.7"):
        request = SimpleNamespace(session=signed, headers={"x-forwarded-for": address}, client=None)
        assert requester(request) == "hf:ada"
    anonymous = SimpleNamespace(session={}, headers={"x-forwarded-for": "6.6.6.6, 203.0.113.5"}, client=None)
    assert requester(anonymous) == "addr:203.0.113.5"


def test_a_shared_app_refuses_a_call_past_the_bound_as_it_joins_the_queue():
    import asyncio
    from types import SimpleNamespace

    from playground.ui.handlers import WORKERS_QUEUE
    from playground.ui.sessions import bound_waiting

    # calls for the workers never wait in Gradio's queue (no concurrency limit): they are counted while they run
    def request(address: str):
        return SimpleNamespace(headers={}, client=SimpleNamespace(host=address))

    async def push(body, request, username):
        return True, "event-id", "success"

    flooder = request("203.0.113.7")
    at_work = [SimpleNamespace(request=flooder, concurrency_id=WORKERS_QUEUE) for _ in range(5)]
    queue = SimpleNamespace(push=push, event_queue_per_concurrency_id={}, active_jobs=[at_work, None],
                            blocks=SimpleNamespace(fns={0: SimpleNamespace(concurrency_id=WORKERS_QUEUE),
                                                        1: SimpleNamespace(concurrency_id="list_models")}))
    bound_waiting(queue, set(), events=60)
    joined, message, state = asyncio.run(queue.push(SimpleNamespace(fn_index=0), flooder, None))
    assert (joined, state) == (False, "error")  # five at the workers already: the most an address may have
    assert message.startswith("Your network has 5 requests at this server's workers already")
    assert "PLAYGROUND_" not in message
    assert asyncio.run(queue.push(SimpleNamespace(fn_index=1), flooder, None))[0]  # other events still join
    assert asyncio.run(queue.push(SimpleNamespace(fn_index=0), request("198.51.100.1"), None))[0]  # and other addresses
