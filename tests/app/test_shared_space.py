"""The app in shared mode, as strangers on a Space use it: in-process servers on loopback, one gradio_client.Client
per visitor (an API client is one visitor per session). A visitor never reaches another's model on any endpoint
(the same message as a missing one), nobody deletes the shipped demo, quotas refuse with a message that says what
to do, eviction frees space in the stated order, runs are capped in length and keep their package. Personal mode
keeps everything visible, the shipped models still read-only."""

from __future__ import annotations

import json
import os
import re
import time
import zipfile
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import torch
from gradio_client import Client, handle_file
from helpers import MB, client_of, launched, named, refusal_of, tiny_package, visitor

from playground.core.model import Transformer, TransformerConfig
from playground.core.tokenizer import train_tokenizer
from playground.packages.store import load_package, save_package
from playground.packages.zips import export_zip
from playground.serving.library import REGISTRY
from playground.ui.app import build_app

pytestmark = pytest.mark.sessions

TINY = dict(d_model=32, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=64, vocab_size=200,
            max_sentence_tokens=32, batch_tokens=512, max_steps=20, max_minutes=0, max_epochs=0, eval_every=10,
            eval_sentences=8, warmup_steps=10, lr=3e-3, schedule="inverse_sqrt", precision="fp32", device="cpu", seed=7)
DEMO = "demo-en-de"
CAP_MINUTES = 0.04  # a run-length cap of 2.4 s


@contextmanager
def serving(models_dir: Path, shared: bool, **env: str):
    """An app built with these environment variables (the quotas a Space's owner sets), served on loopback."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        demo = build_app(models_dir, shared=shared)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    try:
        with launched(demo) as url:
            yield url
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def space(tmp_path_factory):
    models_dir = tmp_path_factory.mktemp("space-models")
    with serving(models_dir, True, PLAYGROUND_MAX_RUN_MINUTES=str(CAP_MINUTES), PLAYGROUND_MAX_MODELS="5") as url:
        yield url, models_dir


@pytest.fixture(scope="module")
def package_zip(tmp_path_factory) -> Path:
    """A tiny valid package as a zip, to upload."""
    tokenizer = train_tokenizer([("a b c", "c b a"), ("b c d", "d c b")] * 3, kind="word", vocab_size=20)
    cfg = TransformerConfig(tokenizer.src_vocab_size, tokenizer.tgt_vocab_size, d_model=8, n_heads=2,
                            n_encoder_layers=1, n_decoder_layers=1, d_ff=16, max_positions=12)
    torch.manual_seed(0)
    folder = save_package(tmp_path_factory.mktemp("zip") / "upload", Transformer(cfg), tokenizer)
    return export_zip(folder, tmp_path_factory.mktemp("zipped"))


def names(client: Client) -> list[str]:
    """The whole names of the packages this client may use (the Models table shows them without its code)."""
    _, picker = client.predict(api_name="/list_models")
    return [name for _, name in picker["choices"]]


def refusal(client: Client, *args, api_name: str, **kwargs) -> str:
    return refusal_of(client.predict(*args, api_name=api_name, **kwargs))


def two_visitors_and_a_run(url: str, model_name: str, settings: dict) -> tuple[Client, Client, str]:
    """Alice and Bob, two visitors with the reverse set loaded; Alice has trained `model_name`: its Done line."""
    alice, bob = client_of(url), client_of(url)
    for client in (alice, bob):
        client.predict("reverse", 0.05, api_name="/load_builtin")
    return alice, bob, alice.predict(model_name=model_name, api_name="/train", **settings)[0]


def test_a_visitor_never_reaches_another_visitors_model(space):
    url, models_dir = space
    alice, bob, done = two_visitors_and_a_run(url, "alices", TINY)
    assert done.startswith("✅ **Done** (step budget reached): 20 steps"), done
    alices = named(names(alice), "alices")  # saved under Alice's code
    assert DEMO in names(alice) and alices not in names(bob) and DEMO in names(bob)
    picker = bob.predict(None, api_name="/translate_models")
    assert "alices" not in str(picker)

    # every endpoint that takes a model name answers Bob as if Alice's model did not exist
    calls = {"/translate": (("a b c", "greedy"), {}), "/model_card": ((), {}), "/export_model": ((), {}),
             "/attention": (("a b c",), {"target": ""}), "/decode_steps": (("a b c",), {}),
             "/positional_encoding": ((), {}), "/delete_model": ((True,), {})}
    for api_name, (args, kwargs) in calls.items():
        theirs = refusal(bob, alices, *args, api_name=api_name, **kwargs)
        missing = refusal(bob, "nobodys", *args, api_name=api_name, **kwargs)
        assert f"no model package named '{alices}'" in theirs, (api_name, theirs)
        assert theirs.replace(alices, "nobodys") == missing, api_name
    theirs = refusal(bob, alices, api_name="/resume", **TINY)
    assert theirs.replace(alices, "nobodys") == refusal(bob, "nobodys", api_name="/resume", **TINY)
    # Alice's model is untouched and still hers
    assert (models_dir / alices / "model.safetensors").is_file()
    table, note, *_ = alice.predict(alices, "a b c", "greedy", api_name="/translate")
    assert "**alices**" in note and alices not in note and len(table["data"]) == 1  # her name, as she gave it
    # the same name for Bob is his own package beside hers, never an overwrite, and no suffix tells him of hers
    done = bob.predict(model_name="alices", api_name="/train", **{**TINY, "max_steps": 5})[0]
    bobs = named(names(bob), "alices")
    assert bobs != alices and bobs not in names(alice) and "Saved as **`alices`**" in done and bobs not in done
    # the registry lives beside the packages; an exported zip carries no visitor's identity
    owners = json.loads((models_dir / REGISTRY).read_text(encoding="utf-8"))
    assert owners[alices]["owner"] != owners[bobs]["owner"]
    exported, _ = alice.predict(alices, api_name="/export_model")
    assert owners[alices]["owner"].split(":")[1].encode() not in Path(exported).read_bytes()


def test_a_run_never_takes_over_another_visitors_averaged_name(space, package_zip, tmp_path):
    url, models_dir = space
    alice, bob = client_of(url), client_of(url)
    victim = tmp_path / "victim-avg.zip"
    victim.write_bytes(package_zip.read_bytes())
    assert alice.predict(handle_file(str(victim)), api_name="/import_model")[0].startswith("✅ Imported")
    victims = named(names(alice), "victim-avg")
    weights = (models_dir / victims / "model.safetensors").read_bytes()
    bob.predict("reverse", 0.05, api_name="/load_builtin")
    done = bob.predict(model_name="victim", api_name="/train", **{**TINY, "average_last": 2})[0]
    assert done.startswith("✅ **Done**") and str(models_dir) not in done, done  # the package's name, no path
    assert "Saved as **`victim`**" in done and "averaged into **`victim-avg`**" in done, done
    run = named(names(bob), "victim")
    owners = json.loads((models_dir / REGISTRY).read_text(encoding="utf-8"))
    assert owners[victims]["owner"] != owners[f"{run}-avg"]["owner"] == owners[run]["owner"]
    assert (models_dir / victims / "model.safetensors").read_bytes() == weights
    assert victims in names(alice) and victims not in names(bob) and f"{run}-avg" in names(bob)


def test_an_estimate_of_a_model_no_visitor_may_keep_is_refused(space):
    huge = {**TINY, "d_model": 1024, "d_ff": 4096, "n_heads": 8, "n_encoder_layers": 6, "n_decoder_layers": 6}
    message = refusal(client_of(space[0]), api_name="/estimate", **huge)
    assert re.search(r"takes about [\d,]+ MB on disk; this Space keeps at most 1500 MB per visitor", message), message


def test_nobody_deletes_the_demo(space):
    for client in (client_of(space[0]), client_of(space[0])):
        assert "read-only" in refusal(client, DEMO, True, api_name="/delete_model")
        assert "read-only" in refusal(client, DEMO, api_name="/resume", **TINY)
        table, note, *_ = client.predict(DEMO, "a small dog", "greedy", api_name="/translate")
        assert f"**{DEMO}**" in note


def test_the_sixth_model_is_refused_with_what_to_delete(space, package_zip):
    carol = client_of(space[0])
    for n in range(5):
        status = carol.predict(handle_file(str(package_zip)), api_name="/import_model")[0]
        assert status.startswith("✅ Imported"), status
    mine = sorted(n for n in names(carol) if n != DEMO)
    assert len(mine) == 5
    message = refusal(carol, handle_file(str(package_zip)), api_name="/import_model")
    assert f"You have 5 models, the most this Space keeps per visitor (5): delete one on the Models tab first " \
           f"(yours: {', '.join(mine)})" in message
    carol.predict("reverse", 0.05, api_name="/load_builtin")
    assert "You have 5 models" in refusal(carol, model_name="sixth", api_name="/train", **TINY)
    carol.predict(mine[0], True, api_name="/delete_model")
    assert carol.predict(handle_file(str(package_zip)), api_name="/import_model")[0].startswith("✅ Imported")
    assert not set(mine) & set(names(client_of(space[0])))  # and nobody else sees them


def test_a_run_stops_at_the_length_cap_and_keeps_its_package(space):
    url, models_dir = space
    dave = client_of(url)
    dave.predict("reverse", 0.05, api_name="/load_builtin")
    began = time.monotonic()
    done = dave.predict(model_name="endless", api_name="/train", **{**TINY, "max_steps": 10**6, "eval_every": 10**6})[0]
    assert "(time budget reached)" in done and "This app ends a run after 0.04 minutes" in done, done
    assert time.monotonic() - began < 60
    steps = int(re.search(r"([\d,]+) steps", done).group(1).replace(",", ""))
    assert load_package(models_dir / named(names(dave), "endless")).training["steps"] == steps > 0


def test_a_run_from_the_same_visitors_second_tab_waits_for_the_first(space):
    # two tabs of one visitor (one address): a second Start in the *same* tab during its run is refused at once
    # (test_app), so the queue is what orders runs from two tabs
    tabs = [visitor(space[0], "198.51.100.23") for _ in range(2)]
    for tab in tabs:
        tab.predict("reverse", 0.05, api_name="/load_builtin")
    jobs = [tab.submit(model_name=name, api_name="/train", **TINY) for tab, name in zip(tabs, ("first", "second"))]
    started: list[float | None] = [None, None]  # when each run left the queue (its first update) and ended
    ended: list[float | None] = [None, None]
    deadline = time.monotonic() + 120
    while not all(job.done() for job in jobs):
        assert time.monotonic() < deadline, [job.status() for job in jobs]
        for i, job in enumerate(jobs):
            if started[i] is None and job.outputs():
                started[i] = time.monotonic()
            if ended[i] is None and job.done():
                ended[i] = time.monotonic()
        time.sleep(0.02)
    ended = [t or time.monotonic() for t in ended]
    started = [t or time.monotonic() for t in started]
    assert all(job.result()[0].startswith("✅ **Done**") for job in jobs)
    # the two submissions race to the queue, so either may run first: the other one started after it ended
    first, later = sorted((0, 1), key=lambda i: started[i])
    assert started[later] >= ended[first] - 0.5, (started, ended)


def test_eviction_frees_old_anonymous_models_least_recently_used_first(tmp_path, package_zip, monkeypatch):
    from playground.serving.library import Library

    libraries = []  # the app's Library: its registry lives in memory, the file is only what it writes
    monkeypatch.setattr("playground.ui.app.Library",
                        lambda *a, **k: libraries.append(Library(*a, **k)) or libraries[-1])
    probe = tmp_path / "probe"
    with serving(probe, True) as url:  # how much one uploaded package takes on disk
        client_of(url).predict(handle_file(str(package_zip)), api_name="/import_model")
    size = sum(p.stat().st_size for p in (probe / named(os.listdir(probe), "upload")).iterdir())
    models_dir = tmp_path / "full"
    with serving(models_dir, True, PLAYGROUND_MAX_TOTAL_MB=str(3.5 * size / MB)) as url:
        frank, grace = client_of(url), client_of(url)
        for _ in range(3):
            frank.predict(handle_file(str(package_zip)), api_name="/import_model")
        owned = [n for n in names(frank) if n != DEMO]
        library = libraries[-1]
        registry = library.owners.read()
        day = 24 * 3600
        for name, age in zip(sorted(owned), (2 * day, 3 * day, 3600)):  # two older than a day; one used recently
            registry[name]["used"] = time.time() - age
        library.owners.write(registry)
        older, recent = sorted(owned)[0], sorted(owned)[2]  # sorted(owned)[1], three days old, goes first

        grace.predict(handle_file(str(package_zip)), api_name="/import_model")  # room for one: the LRU old one goes
        assert set(names(frank)) == {older, recent, DEMO}
        grace.predict(handle_file(str(package_zip)), api_name="/import_model")
        assert set(names(frank)) == {recent, DEMO}
        message = refusal(grace, handle_file(str(package_zip)), api_name="/import_model")
        assert "models folder of this Space is full" in message  # the recent one is never evicted
        assert len([n for n in names(grace) if n != DEMO]) == 2


def test_personal_mode_shows_everything_and_keeps_the_shipped_models(tmp_path, package_zip):
    with serving(tmp_path / "personal", False) as url:
        me, another_tab = client_of(url), client_of(url)
        me.predict(handle_file(str(package_zip)), api_name="/import_model")
        assert "upload" in names(another_tab) and DEMO in names(another_tab)
        assert "read-only" in refusal(another_tab, DEMO, True, api_name="/delete_model")
        another_tab.predict("upload", True, api_name="/delete_model")  # one person: every other model is theirs
        assert "upload" not in names(me)


def test_a_refused_run_reserves_no_name_and_evicts_nobody(tmp_path):
    """The tab's one-run rule is checked before the Library is asked for a name (which may evict old models)."""
    from playground.errors import TrainingError
    from playground.serving.library import Library
    from playground.training.form import preset_values
    from playground.ui.state import Session
    from playground.ui.tabs import data as data_tab
    from playground.ui.tabs.train import train

    library = Library(tmp_path / "models", shared=True)
    session = Session()
    data_tab.load_builtin(session, "reverse")
    session.trainer = object()  # this tab is training already
    with pytest.raises(TrainingError, match="already training"):
        next(train(library, session, "second", **preset_values("tiny")))
    assert library.owners.read() == {} and not library.pending


def test_a_translation_row_is_looked_up_again_by_name_for_its_visitor(tmp_path):
    """The next-token view of a table row resolves the row's model now, for this visitor: a model deleted since,
    or a name another visitor holds now, is "no such model", never loaded."""
    from playground.errors import PackageError
    from playground.serving.library import Library
    from playground.ui.state import Session
    from playground.ui.tabs.translate import next_token_view

    session = Session()
    session.translations.append({"model": "someone-elses", "src_ids": [5], "out_ids": [6], "text": "x"})
    with pytest.raises(PackageError, match="no model package named 'someone-elses'"):
        next_token_view(Library(tmp_path / "models", shared=True), session, 1, 3,
                        rows_of=lambda *args: pytest.fail("a model was loaded"))


def test_the_upload_bound_counts_an_hour_per_address_and_in_all():
    from playground.ui.sessions import UploadBounds

    bounds = UploadBounds(None, per_address=10 * MB, total=25 * MB, window_s=3600)  # the app comes later
    assert bounds.admit("a", 6 * MB, now=0) is None and bounds.admit("b", 9 * MB, now=1) is None
    assert "from one network; yours has sent 6 MB. Try again in 50 minutes" in bounds.admit("a", 6 * MB, now=600)
    assert bounds.admit("c", 9 * MB, now=700) is None
    assert "uploads in the last hour" in bounds.admit("d", 2 * MB, now=800)  # 24 of 25 MB taken
    assert bounds.admit("a", 6 * MB, now=3601) is None  # a's first upload is an hour old: deleted by Gradio by now
    assert "at most 10 MB of uploads an hour from one network; yours has sent 0 MB. Upload a smaller file." in \
        bounds.admit("e", 11 * MB, now=3700)


def test_offline_attention_pages_count_with_the_uploads_of_their_address(tmp_path, monkeypatch):
    """An offline page (plotly.js inside, 4.8 MB) is kept an hour in Gradio's cache for its session, and sessions cost
    nothing to open: one network's pages count with its uploads, checked before the page is written."""
    monkeypatch.setenv("PLAYGROUND_TRUST_FORWARDED", "1")
    monkeypatch.setenv("PLAYGROUND_MAX_UPLOAD_MB_PER_ADDRESS", "12")  # room for two offline pages an hour

    def attention(url: str, address: str) -> Client:
        client = visitor(url, address)
        client.predict(DEMO, "A man rides a bike.", "the model's translation", "", "cross", "one head", 0, 0,
                       api_name="/attention")
        return client

    def export(client: Client, offline: bool) -> tuple:
        return client.predict("cross", "one head", 0, 0, offline, api_name="/export_attention_html")

    with serving(tmp_path / "models", True) as url:
        pages = [export(attention(url, "198.51.100.41"), True) for _ in range(2)]  # two sessions of one network
        assert all(note == "" and Path(path).stat().st_size > 4_000_000 for path, note in pages)
        third = attention(url, "198.51.100.41")
        _, note = export(third, True)
        assert "The offline page is not kept" in note and "at most 12 MB of uploads an hour" in note
        assert 'export without "HTML for offline viewing"' in note
        path, note = export(third, False)  # a page that loads plotly.js when opened: a few kB, not counted
        assert note == "" and Path(path).stat().st_size < 100_000
        path, note = export(attention(url, "198.51.100.42"), True)  # another network
        assert note == "" and Path(path).stat().st_size > 4_000_000


def test_uploads_without_a_session_are_bounded_per_address_whatever_the_client_writes(monkeypatch):
    import asyncio

    from playground.ui.sessions import UploadBounds

    monkeypatch.setenv("SPACE_ID", "someone/playground")
    monkeypatch.delenv("PLAYGROUND_PROXY_HOPS", raising=False)
    passed = []

    async def app(scope, receive, send):
        passed.append(scope["path"])

    bounds = UploadBounds(app, per_address=10 * MB, total=100 * MB)

    def upload(forwarded_for: str) -> int:
        sent = []

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": "/gradio_api/upload", "client": ("10.16.3.80", 4000),
                 "headers": [(b"x-forwarded-for", forwarded_for.encode()), (b"content-length", str(4 * MB).encode())]}
        asyncio.run(bounds(scope, None, send))
        return sent[0]["status"] if sent else 200

    # one client, a new made-up address in front of the one the proxy appends each time: one network's 10 MB
    statuses = [upload(f"198.18.0.{i}, 203.0.113.5") for i in range(5)]
    assert statuses == [200, 200, 429, 429, 429] and len(passed) == 2
    assert upload("198.51.100.9") == 200  # somebody else


def test_the_client_address_is_the_proxys_word_only_behind_a_proxy(monkeypatch):
    from playground.serving.visitors import client_address

    monkeypatch.delenv("SPACE_ID", raising=False)
    monkeypatch.delenv("PLAYGROUND_TRUST_FORWARDED", raising=False)
    monkeypatch.delenv("PLAYGROUND_PROXY_HOPS", raising=False)
    assert client_address("1.2.3.4", "10.0.0.9") == "10.0.0.9"  # self-hosted: a header anybody can send
    monkeypatch.setenv("SPACE_ID", "someone/playground")
    assert client_address("1.2.3.4", "10.0.0.9") == "1.2.3.4"  # a proxy that sets the header
    # a client writes its own header: a proxy that appends puts what it saw on the right, whatever came before
    assert client_address("6.6.6.6, 1.2.3.4", "10.0.0.9") == "1.2.3.4"
    assert client_address("1.2.3.4, 6.6.6.6", "10.0.0.9") == "6.6.6.6"
    assert client_address("6.6.6.6, 1.2.3.4, 10.16.3.80, 172.17.0.2", "10.0.0.9") == "1.2.3.4"  # internal hops
    assert client_address("nonsense, 2001:db8::7", "10.0.0.9") == "2001:db8::/64"  # one IPv6 customer's network
    assert client_address("2001:db8::8", "10.0.0.9") == "2001:db8::/64"
    assert client_address("6.6.6.6, 10.1.1.1", "10.0.0.9") == "6.6.6.6"  # the platform's own, skipped
    monkeypatch.setenv("PLAYGROUND_PROXY_HOPS", "2")  # an operator who knows two proxies append
    assert client_address("6.6.6.6, 1.2.3.4, 5.5.5.5", "10.0.0.9") == "1.2.3.4"
    assert client_address(None, "10.0.0.9") == "10.0.0.9"


def call_queued(url: str, api_name: str, data: list, session_hash: str, address: str) -> list:
    """Call an event by its name through the queue as a raw HTTP client does (the private ones too)."""
    config = httpx.get(url + "config").json()
    fn = next(d for d in config["dependencies"] if d.get("api_name") == api_name)
    headers = {"X-Forwarded-For": address}
    httpx.post(url + "gradio_api/queue/join", headers=headers, json={
        "data": data, "fn_index": fn["id"], "session_hash": session_hash, "trigger_id": None, "event_data": None,
    }).raise_for_status()
    with httpx.stream("GET", url + "gradio_api/queue/data", params={"session_hash": session_hash}, headers=headers,
                      timeout=60) as stream:
        for line in stream.iter_lines():
            message = json.loads(line[5:]) if line.startswith("data:") else {}
            if message.get("msg") == "process_completed":
                assert message["success"], message
                return message["output"]["data"]
    raise AssertionError("no answer")


def test_visitors_are_issued_by_the_server_and_bounded_per_address(tmp_path):
    from playground.serving.visitors import address_key, verify_token

    upload = export_zip(tiny_package(tmp_path / "mine"), tmp_path)
    size = sum(p.stat().st_size for p in (tmp_path / "mine").iterdir())
    models = tmp_path / "models"
    with serving(models, True, PLAYGROUND_TRUST_FORWARDED="1", PLAYGROUND_MAX_ADDRESS_MODELS="3",
                 PLAYGROUND_MAX_TOTAL_MB=str(4.5 * size / MB)) as url:
        secret = (models / ".browser-secret").read_bytes()
        # the hidden welcome step: a self-chosen token, or a made-up signature, is answered with a new, signed one
        chosen = "a" * 32
        issued = call_queued(url, "welcome", [None, chosen], "s1", "203.0.113.5")[0]
        assert issued != chosen and verify_token(issued, secret)
        forged = issued.split(".")[0] + "." + "A" * 22
        again = call_queued(url, "welcome", [None, forged], "s2", "203.0.113.5")[0]
        assert verify_token(again, secret) not in (None, verify_token(issued, secret))
        assert call_queued(url, "welcome", [None, issued], "s3", "203.0.113.5")[0] == issued  # the same visitor

        # the attacker: many sessions (each a visitor) from one address, each writing an X-Forwarded-For
        # of its own, to which the Space's proxy appends the address it saw: the address's bound holds
        attacker = [visitor(url, f"198.18.0.{i}, 203.0.113.5") for i in range(5)]
        results = [refusal_of(out) if out[0].startswith("⚠️") else out[0]
                   for out in (a.predict(handle_file(str(upload)), api_name="/import_model") for a in attacker)]
        assert [r.startswith("✅ Imported") for r in results] == [True] * 3 + [False] * 2, results
        assert all("visitors from your network hold 3 models" in r for r in results[3:])
        registry = json.loads((models / REGISTRY).read_text())
        assert {e["address"] for e in registry.values()} == {address_key("203.0.113.5", secret)}
        assert "203.0.113.5" not in (models / REGISTRY).read_text()  # no visitor's IP address kept on disk
        # the folder holds 4.5 packages: a newcomer elsewhere gets room (the heaviest holder's oldest goes) and
        # keeps it: the attacker's next model is refused, not made by pushing the newcomer out
        newcomer = visitor(url, "198.51.100.77")

        def holdings() -> dict[str, int]:
            entries = json.loads((models / REGISTRY).read_text()).values()
            return {a: sum(e["address"] == address_key(a, secret) for e in entries)
                    for a in ("203.0.113.5", "198.51.100.77")}

        oldest = min(registry, key=lambda name: registry[name]["used"])
        for _ in range(2):
            assert newcomer.predict(handle_file(str(upload)), api_name="/import_model")[0].startswith("✅ Imported")
        assert holdings() == {"203.0.113.5": 2, "198.51.100.77": 2}
        assert json.loads((models / REGISTRY).read_text()).get(oldest, {}).get("address") != \
            address_key("203.0.113.5", secret)
        assert "models folder of this Space is full" in refusal_of(  # under its address bound, but no lighter
            attacker[3].predict(handle_file(str(upload)), api_name="/import_model"))
        assert holdings() == {"203.0.113.5": 2, "198.51.100.77": 2}
        assert newcomer.predict(None, api_name="/list_models")  # still serving


def test_the_pickers_and_the_models_table_show_a_visitors_own_names_without_their_code(tmp_path):
    import gradio as gr
    from helpers import ALICE, BOB, shared_library

    from playground.packages.format import RESUME_STATE
    from playground.ui.pickers import model_dropdown
    from playground.ui.state import Session
    from playground.ui.tabs.models import card, models_frame, pick
    from playground.ui.tabs.train import resume_dropdown

    library = shared_library(tmp_path / "models")
    folder = tiny_package(library.add("enfr", ALICE, 10_000), history=10)
    (folder / RESUME_STATE).write_text("{}")  # a run's package: "Resume from" offers it
    alices = folder.name
    session = Session(visitor=ALICE, run_dir=str(library.models_dir / alices))
    picker = model_dropdown(library, session, alices)
    assert picker["choices"] == [("enfr", alices), (DEMO, DEMO)] and picker["value"] == alices
    assert resume_dropdown(library, session)["choices"] == [("enfr", alices)]
    assert model_dropdown(library, Session(visitor=BOB))["choices"] == [(DEMO, DEMO)]
    # the Models table lists it as "enfr" too, and a click on its row picks the package itself
    assert list(models_frame(library, session)["name"]) == ["enfr", DEMO]
    assert card(library, session, alices)[0].startswith("# enfr\n")
    row = gr.SelectData(None, {"index": [0, 0], "value": "enfr", "row_value": ["enfr"]})
    assert pick(library, session, row)["value"] == alices
    # her own "demo-en-de" keeps its code: the page never shows two packages under one name
    own_demo = tiny_package(library.add(DEMO, ALICE, 10_000)).name
    assert own_demo != DEMO and dict(model_dropdown(library, session)["choices"])[own_demo] == own_demo
    assert sorted(models_frame(library, session)["name"]) == sorted(["enfr", DEMO, own_demo])


def test_visitors_downloading_one_package_share_one_zip_on_the_server(space):
    """Each anonymous session is a visitor: keyed by visitor, thirty sessions downloading the demo kept thirty zips in
    Gradio's cache for its hour (176 MB for this demo). Keyed by the package (and format), they share one, replaced
    whole."""
    from gradio.utils import get_upload_folder

    from playground.packages.sweep import temp_prefix

    url, _ = space
    started = time.time()
    downloads = [client_of(url).predict(DEMO, False, api_name="/export_model")[0] for _ in range(3)]
    assert all(zipfile.ZipFile(path).testzip() is None for path in downloads)
    served = [p for p in Path(get_upload_folder()).glob(f"{temp_prefix('download')}*/{DEMO}.zip")
              if p.stat().st_mtime >= started]
    assert len(served) == 1 and not list(served[0].parent.glob(".*partial"))
    # the exports for CTranslate2 too: one served zip, and no export's working folder left beside it
    exports = [client_of(url).predict(DEMO, "int8", api_name="/export_ctranslate2")[0] for _ in range(2)]
    assert all(zipfile.ZipFile(path).testzip() is None for path in exports)
    served = [p for p in Path(get_upload_folder()).glob(f"{temp_prefix('download')}*/{DEMO}-ct2-int8.zip")
              if p.stat().st_mtime >= started]
    assert len(served) == 1 and [p.name for p in served[0].parent.iterdir()] == [served[0].name]
