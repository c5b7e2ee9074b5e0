"""The Inside tab's views through the running app's API: every view renders for every model, decoding step by
step three ways, what is missing is said, attention over the demo's training."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from gradio_client import Client, handle_file
from helpers import DEMO, PAIRS, client_of, launched, peaked, refusal_of, tiny_model

from playground.core.tokenizer import train_tokenizer
from playground.packages.store import save_package

pytestmark = pytest.mark.usefixtures("one_thread")




DEMO_FILES = ("config.json", "model.safetensors", "tokenizer.json", "training.json", "README.md")


@pytest.fixture(scope="module")
def views_models(tmp_path_factory) -> Path:
    """The demo model (when the checkout has it), plus one with learned positions and separate vocabularies."""
    folder = tmp_path_factory.mktemp("view-models")
    if DEMO.is_dir():
        (folder / DEMO.name).mkdir()
        for name in DEMO_FILES:
            shutil.copy2(DEMO / name, folder / DEMO.name / name)
    separate = train_tokenizer(PAIRS, kind="word", vocab_size=60, joint=False)
    save_package(folder / "learned-separate", peaked(tiny_model(separate, positional_encoding="learned",
                                                                tie_embeddings=False)), separate,
                 src_lang="en", tgt_lang="de")
    return folder


@pytest.fixture(scope="module")
def views_app(views_models):
    from playground.ui.app import build_app

    with launched(build_app(views_models)) as url:
        yield url


@pytest.fixture(scope="module")
def views_client(views_app, tmp_path_factory) -> Client:
    """A session that has loaded a few pairs (one browser tab)."""
    client = client_of(views_app)
    data = tmp_path_factory.mktemp("view-data") / "pairs.tsv"
    data.write_text("en\tde\n" + "".join(f"{s}\t{t}\n" for s, t in PAIRS[:4] + [
        ("The queen does not paint the mother.", "Die Königin malt die Mutter nicht."),
        ("My friend always sleeps.", "Mein Freund schläft immer.")]), encoding="utf-8")
    client.predict([handle_file(str(data))], 0.2, api_name="/load_files")
    return client


def figure_json(output: dict) -> dict:
    assert output["type"] == "plotly"
    return json.loads(output["plot"])


def view_models(views_models: Path) -> list[str]:
    return sorted(p.name for p in views_models.iterdir())


def test_views_render_for_every_model(views_client, views_models):
    assert "demo-en-de" in view_models(views_models) or not DEMO.is_dir()
    for name in view_models(views_models):
        heatmap, curves, _, note = views_client.predict(name, "target", [], api_name="/positional_encoding")
        assert figure_json(heatmap)["data"][0]["type"] == "heatmap" and len(figure_json(curves)["data"]) >= 1
        assert name in note and ("learned" in note) == (name == "learned-separate")
        padding, self_mask, look_ahead, note = views_client.predict(name, 3, 0, 2, api_name="/masks")
        assert len(figure_json(padding)["data"][0]["z"]) == 3 and "3 pairs" in note
        assert "<eos>" in str(figure_json(self_mask)["data"][0]["x"])
        assert figure_json(look_ahead)["data"][0]["y"][0] == "0:<bos>"
        batching, note = views_client.predict(name, 64, 0, api_name="/batching")
        assert len(figure_json(batching)["data"]) == 5 and "Random batches pad" in note
        embeddings, note = views_client.predict(name, 20, api_name="/embeddings")
        assert figure_json(embeddings)["data"] and "most frequent tokens of your data" in note


def test_decoding_step_by_step_in_three_ways(views_client, views_models):
    name = view_models(views_models)[0]
    source = "The queen does not paint the mother."
    plot, table, note = views_client.predict(name, source, "greedy", api_name="/decode_steps")
    assert table["headers"][:4] == ["step", "token taken", "greedy ✓ (p)", "sampled ● (p)"]
    assert all(row[2].startswith(row[1]) for row in table["data"])  # greedy: the greedy choice is the one taken
    plot, table, note = views_client.predict(name, source, "sample", temperature=1.5, top_k=3, seed=4, k=3,
                                             api_name="/decode_steps")
    assert "sampled" in note and all(row[3].startswith(row[1]) for row in table["data"])
    plot, table, note = views_client.predict(name, source, "beam", beam_size=3, length_penalty=0.6,
                                             api_name="/decode_steps")
    assert table["headers"][:3] == ["step", "beam", "sum of log p"] and "Beam size 3" in note
    assert any(row[1] == "ended" and row[3] != "" for row in table["data"])
    assert "star" in plot["plot"]  # finished hypotheses


def test_views_explain_what_is_missing(views_app, views_models):
    client = client_of(views_app)  # a new session: no data loaded
    name = view_models(views_models)[0]
    padding, *_ = client.predict(name, api_name="/masks")
    assert "Load data on the Data tab" in figure_json(padding)["layout"]["annotations"][0]["text"]
    _, note = client.predict(name, 20, api_name="/embeddings")
    assert "first tokens of the vocabulary" in note
    assert "Type a source sentence" in refusal_of(client.predict(name, "  ", "greedy", api_name="/decode_steps"))


@pytest.mark.skipif(not DEMO.is_dir(), reason="the checkout has no demo model")
def test_attention_over_training_of_the_demo(views_client):
    training = json.loads((DEMO / "training.json").read_text(encoding="utf-8"))
    probe = training["history"]["probe"]
    last = figure_json(views_client.predict("demo-en-de", len(probe) - 1, api_name="/attention_probe"))
    layers = len(probe[-1]["cross"])
    assert len(last["data"]) == layers  # one heatmap per decoder layer
    assert f"validation {len(probe)} of {len(probe)}" in last["layout"]["title"]["text"]
