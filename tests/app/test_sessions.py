"""Several people at once: one in-process app on loopback, one gradio_client.Client per person (each its own
session), driven from threads. Each session loads its own data, trains its own tiny model and translates with it;
results never cross between sessions, the one-at-a-time training slot queues the others with a visible queue
position instead of hanging, and the same seed, data and device give the same loss curve through the app."""

from __future__ import annotations

import itertools
import json
import random
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
from gradio_client import Client, handle_file
from gradio_client.exceptions import ValidationError
from gradio_client.utils import Status
from helpers import client_of, launched

from playground.ui.app import build_app

pytestmark = [pytest.mark.sessions, pytest.mark.slow]

# small enough to train in a second or two on two busy CPU cores (the settings test_app.py uses)
TINY = dict(d_model=32, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=64, vocab_size=200,
            max_sentence_tokens=32, batch_tokens=512, max_steps=30, max_minutes=0, max_epochs=0, eval_every=15,
            eval_sentences=16, warmup_steps=10, lr=3e-3, schedule="inverse_sqrt", precision="fp32", device="cpu",
            seed=7)
FRUITS_EN = ["apple", "banana", "cherry", "grape", "lemon", "mango", "melon", "peach", "pear", "plum"]
FRUITS_DE = ["Apfel", "Banane", "Kirsche", "Traube", "Zitrone", "Mango", "Melone", "Pfirsich", "Birne", "Pflaume"]
TIMEOUT = 120  # seconds for any one session's whole story: a hang fails instead of blocking the suite



@pytest.fixture(scope="module")
def app(tmp_path_factory):
    models_dir = tmp_path_factory.mktemp("session-models")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models; also makes the determinism check independent of the core count
    with launched(build_app(models_dir)) as url:
        yield url, models_dir
    torch.set_num_threads(threads)


def fruits_tsv(path: Path) -> Path:
    """A made-up en→de fruit list: a vocabulary that shares no word with the reversal task's single characters."""
    rng = random.Random(0)
    pairs = {}
    while len(pairs) < 300:
        idx = [rng.randrange(len(FRUITS_EN)) for _ in range(rng.randint(1, 4))]
        pairs[" ".join(FRUITS_EN[i] for i in idx)] = " ".join(FRUITS_DE[i] for i in idx)
    path.write_text("en\tde\n" + "".join(f"{s}\t{t}\n" for s, t in pairs.items()), encoding="utf-8")
    return path


def vocabulary(package: Path) -> set[str]:
    tokens = json.loads((package / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
    return {t.lstrip("▁") for t in tokens if not t.startswith("<")} - {""}


@dataclass
class Person:
    name: str
    data: str | Path  # a built-in dataset's name, or a file to upload
    model: str
    text: str  # what this person translates afterwards
    statuses: list = field(default_factory=list)  # (monotonic time, Status, queue rank) as the train job reports it
    started: float | None = None  # when the first training update arrived (the run left the queue)
    ended: float | None = None
    final: str = ""
    saved_as: str = ""
    translation: dict | None = None
    next_tokens: dict | None = None
    summary: str = ""


def live(person: Person, url: str, start: threading.Barrier, trained: threading.Barrier,
         translated: threading.Barrier) -> Person:
    """One person's whole visit, in its own session: load data, train, translate, look at the next-token view."""
    client = client_of(url)
    if isinstance(person.data, Path):
        person.summary = client.predict([handle_file(str(person.data))], 0.05, api_name="/load_files")[0]
    else:
        person.summary = client.predict(person.data, 0.05, api_name="/load_builtin")[0]
    start.wait(timeout=TIMEOUT)  # everybody presses Start at the same moment
    job = client.submit(model_name=person.model, api_name="/train", **TINY)
    deadline = time.monotonic() + TIMEOUT
    while not job.done():
        assert time.monotonic() < deadline, f"{person.name}: training never finished: {job.status()}"
        s = job.status()
        if not person.statuses or person.statuses[-1][1:] != (s.code, s.rank):
            person.statuses.append((time.monotonic(), s.code, s.rank))
        if person.started is None and job.outputs():
            person.started = time.monotonic()
        time.sleep(0.02)
    person.ended = time.monotonic()
    person.final = job.result(timeout=10)[0]
    person.started = person.started or person.ended
    person.saved_as = re.search(r"Saved as \*\*`([^`]+)`\*\*", person.final).group(1)
    # nobody translates (loads a model) while a neighbour still trains: see test_a_neighbour_does_not_change_my_run
    trained.wait(timeout=3 * TIMEOUT)
    person.translation = client.predict(person.saved_as, person.text, "greedy", api_name="/translate")
    translated.wait(timeout=TIMEOUT)  # all have translated before anyone asks about "row 1 of my last results"
    rows = len(person.text.splitlines())  # a different number of sentences in each session
    person.next_tokens = client.predict(rows, 3, api_name="/next_tokens")  # the last row of my own table
    with pytest.raises(ValidationError, match=f"Table row must be a whole number from 1 to {rows}, not {rows + 1}"):
        client.predict(rows + 1, 3, api_name="/next_tokens")
    return person


def test_sessions_train_and_translate_at_once_without_crossing(app, tmp_path):
    url, models_dir = app
    people = [Person("reverse-1", "reverse", "twin", "a b c d\ne f g"),
              Person("fruits", fruits_tsv(tmp_path / "fruits.tsv"), "fruits", "apple cherry\nplum\npear grape"),
              Person("reverse-2", "reverse", "twin", "1 2 3")]  # the same name and settings as reverse-1
    start, trained, translated = (threading.Barrier(len(people)) for _ in range(3))
    with ThreadPoolExecutor(len(people)) as pool:
        futures = [pool.submit(live, p, url, start, trained, translated) for p in people]
        # a bystander in a fourth session presses Stop while the others train: it has nothing to stop, and stops
        # nobody else's run
        bystander = client_of(url)
        while not any(p.started for p in people) and not any(f.done() for f in futures):
            time.sleep(0.05)
        bystander.predict(api_name="/stop")
        for future in futures:
            future.result(timeout=3 * TIMEOUT)  # re-raises a session's failure

    # every run ended on its own budget, in its own package; the second "twin" did not overwrite the first
    for p in people:
        assert p.final.startswith("✅ **Done** (step budget reached): 30 steps"), (p.name, p.final)
    assert sorted(p.saved_as for p in people) == ["fruits", "twin", "twin-2"]
    # one training slot: the runs took turns (never two at once), and those waiting saw their place in the queue
    runs = sorted(people, key=lambda p: p.started)
    for before, after in itertools.pairwise(runs):
        assert after.started >= before.ended - 0.5, [(p.name, p.started, p.ended) for p in runs]
    waited = [p for p in runs[1:] if any(code == Status.IN_QUEUE and rank is not None for _, code, rank in p.statuses)]
    assert waited == runs[1:], {p.name: [(c.name, r) for _, c, r in p.statuses] for p in people}
    assert max(rank for p in people for _, code, rank in p.statuses if code == Status.IN_QUEUE) >= 1

    # each package holds its own session's data: languages, description and tokenizer vocabulary
    for p in people:
        config = json.loads((models_dir / p.saved_as / "config.json").read_text(encoding="utf-8"))
        training = json.loads((models_dir / p.saved_as / "training.json").read_text(encoding="utf-8"))
        fruit = p.name == "fruits"
        assert (config["src_lang"], config["tgt_lang"]) == (("en", "de") if fruit else ("seq", "rev"))
        assert ("fruits.tsv" in training["data"]["description"]) == fruit, training["data"]
        words = vocabulary(models_dir / p.saved_as)
        if fruit:
            assert {"Kirsche", "Pflaume", "banana"} <= words, sorted(words)
        else:
            assert all(len(w) == 1 for w in words), sorted(w for w in words if len(w) > 1)
    # each translated with its own model, and "row n of my last results" is its own row, not a neighbour's
    for p in people:
        table, note = p.translation[0], p.translation[1]
        lines = p.text.splitlines()
        assert f"**{p.saved_as}**" in note and ("(en → de)" if p.name == "fruits" else "(seq → rev)") in note
        assert [row[2] for row in table["data"]] == lines
        plot, *_ = p.next_tokens
        assert f"Row {len(lines)}: “{table['data'][-1][3][:60]}”" in plot["plot"], (p.name, table["data"])
        assert "pairs kept" in p.summary and ("300 pairs kept" in p.summary) == (p.name == "fruits"), p.summary
    # same seed, same data, same device: the same loss curve, step for step
    twins = [json.loads((models_dir / name / "training.json").read_text(encoding="utf-8"))["history"]
             for name in ("twin", "twin-2")]
    assert twins[0]["loss"] == twins[1]["loss"] and len(twins[0]["loss"]) == 30
    assert [e["val_loss"] for e in twins[0]["evals"]] == [e["val_loss"] for e in twins[1]["evals"]]


def test_swapping_direction_in_one_session_leaves_the_other_alone(app):
    first, second = client_of(app[0]), client_of(app[0])
    for client in (first, second):
        client.predict("numbers", 0.05, api_name="/load_builtin")
    *_, src, tgt, _ = first.predict(api_name="/swap_direction")
    assert (src, tgt) == ("de", "en")
    summary = second.predict(0.1, api_name="/set_val_fraction")
    assert "**Direction:** `en` → `de`" in summary and "10% held out" in summary
    summary = first.predict(0.05, api_name="/set_val_fraction")
    assert "**Direction:** `de` → `en`" in summary and "5% held out" in summary


def train_losses(client: Client, name: str, models_dir: Path) -> list[float]:
    result = client.predict(model_name=name, api_name="/train", **TINY)[0]
    assert result.startswith("✅ **Done**"), result
    saved = re.search(r"Saved as \*\*`([^`]+)`\*\*", result).group(1)
    return json.loads((models_dir / saved / "training.json").read_text(encoding="utf-8"))["history"]["loss"]


def test_a_neighbour_does_not_change_my_run(app):
    url, models_dir = app
    me, neighbour = client_of(url), client_of(url)
    me.predict("reverse", 0.05, api_name="/load_builtin")
    alone = train_losses(me, "alone", models_dir)

    stop, estimates = threading.Event(), []

    def keep_estimating():  # the neighbour times configurations (what opening the Train tab does) meanwhile
        while not stop.is_set():
            began = time.monotonic()
            neighbour.predict(api_name="/estimate", **TINY)
            estimates.append((began, time.monotonic()))

    with ThreadPoolExecutor(1) as pool:
        busy = pool.submit(keep_estimating)
        while not estimates and not busy.done():
            time.sleep(0.05)
        began = time.monotonic()
        with_neighbour = train_losses(me, "with-neighbour", models_dir)
        ended = time.monotonic()
        stop.set()
        busy.result(timeout=TIMEOUT)
    if not any(b < ended and e > began for b, e in estimates):
        pytest.skip("the neighbour's estimates did not overlap the run this time")
    assert with_neighbour == alone


def test_each_session_has_a_download_key_of_its_own():
    """Its attention pages' folder: id(session) was the key, and a session made after one was freed can have its id
    (then an old link served the new session's page)."""
    import copy

    from playground.ui.state import Session

    template = Session()  # gr.State gives every browser session a deep copy of it
    first, second = copy.deepcopy(template), copy.deepcopy(template)
    assert first.download_key == first.download_key != second.download_key
    assert copy.deepcopy(template).download_key not in (first.download_key, second.download_key)
