"""Runs side by side: the core comparison, `python -m playground compare`, and the Compare tab through gradio_client."""

from __future__ import annotations

import json
import os
import shutil
import urllib.request

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import pytest  # noqa: E402
from conftest import free_port  # noqa: E402
from gradio_client import Client  # noqa: E402

from playground.cli.main import main  # noqa: E402
from playground.insight.compare import differing_settings, load_runs  # noqa: E402
from playground.errors import PackageError  # noqa: E402
from playground.training.events import Done  # noqa: E402
from playground.training.config import TrainConfig  # noqa: E402
from playground.training.inputs import TrainData
from playground.training.trainer import run_training

PAIRS = [(" ".join(w), " ".join(reversed(w))) for w in
         [["a", "b", "c"], ["c", "d"], ["d", "e", "a", "b"], ["b", "b", "c", "e"], ["e", "d", "c"], ["a", "c", "e"]]] * 6
SETTINGS = dict(d_model=16, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=32, dropout=0.0, tokenizer="word",
                vocab_size=30, max_len=8, batch_tokens=64, schedule="inverse_sqrt", warmup_steps=4, max_steps=8,
                eval_every=4, eval_sentences=4, precision="fp32", device="cpu")


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    """Two finished runs that differ in their learning rate only."""
    folder = tmp_path_factory.mktemp("models")
    data = TrainData(PAIRS, PAIRS[:4], "seq", "rev", "reversal")
    for name, lr in (("slow", 1e-3), ("fast", 3e-3)):
        events = list(run_training(TrainConfig(lr=lr, **SETTINGS), data, folder / name))
        assert isinstance(events[-1], Done), events[-1]
    return folder


def test_differing_settings_and_scores(models_dir):
    runs = load_runs([models_dir / "slow", models_dir / "fast"])
    assert differing_settings(runs) == {"lr": [1e-3, 3e-3]}
    for run in runs:
        training = json.loads((models_dir / run.name / "training.json").read_text())
        assert run.scores["steps"] == 8 and run.scores["bleu"] == training["last"]["bleu"]
        assert run.steps == list(range(1, 9)) and [e["step"] for e in run.evals] == [4, 8]
        assert run.lr[-1] != 0 and len(run.elapsed) == 8 and run.elapsed == sorted(run.elapsed)
        assert run.seconds_at(8) == run.elapsed[-1] <= training["wall_s"] + 0.001  # recorded to the ms


def test_refusals(models_dir):
    with pytest.raises(PackageError, match="at least two"):
        load_runs([models_dir / "slow"])
    with pytest.raises(PackageError, match="once"):
        load_runs([models_dir / "slow", models_dir / "slow"])
    with pytest.raises(PackageError, match="no-such"):
        load_runs([models_dir / "slow", models_dir / "no-such"])


def test_cli_prints_the_differences_and_json(models_dir, capsys):
    assert main(["compare", str(models_dir / "slow"), str(models_dir / "fast")]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["setting", "slow", "fast"]
    assert out.splitlines()[1].split() == ["learning", "rate", "(lr)", "0.001", "0.003"]
    assert "BLEU" in out and "val loss" in out
    assert main(["compare", str(models_dir / "slow"), str(models_dir / "fast"), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["runs"] == ["slow", "fast"] and result["differing_settings"] == {"lr": [0.001, 0.003]}
    assert main(["compare", str(models_dir / "slow")]) == 2
    assert "at least two" in capsys.readouterr().err


def test_compare_tab_through_the_api(models_dir, tmp_path):
    from playground.ui.app import build_app

    shutil.copytree(models_dir, tmp_path / "models")
    demo = build_app(tmp_path / "models")
    port = free_port()
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True)
    try:
        client = Client(f"http://127.0.0.1:{port}/", verbose=False)
        message, settings, scores, loss, val, lr, bleu, chrf = client.predict(["slow", "fast"], "step",
                                                                             api_name="/compare")
        assert message == ""
        assert settings["headers"] == ["setting", "slow", "fast"] and settings["data"] == [["learning rate (lr)", "0.001", "0.003"]]
        assert [row[0] for row in scores["data"]][:2] == ["steps", "wall time (s)"]
        for figure in (loss, val, lr, bleu, chrf):
            traces = json.loads(figure["plot"])["data"]
            assert [t["name"] for t in traces] == ["slow", "fast"]
        by_time = client.predict(["slow", "fast"], "wall time", api_name="/compare")
        assert json.loads(by_time[3]["plot"])["layout"]["xaxis"]["title"]["text"] == "wall time (s)"
        refused = client.predict(["slow"], "step", api_name="/compare")
        assert "at least two" in refused[0]
        message, table = client.predict(["slow", "fast"], "a b c\nc d", api_name="/compare_translate")
        assert message == "" and table["headers"] == ["source", "slow", "fast"] and len(table["data"]) == 2
        # the translations take what the curves take: two to eight models, each once
        assert "compared once" in client.predict(["slow", "slow", "fast"], "a b c", api_name="/compare_translate")[0]
        assert "at most 8" in client.predict(["slow", "fast"] * 5, "a b c", api_name="/compare_translate")[0]
        # the step that sets the table's column widths runs on its own after compare_translate and, like every step,
        # answers a direct call: a caller's table of its choosing decides nothing (the widths follow the session)
        config = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/config").read())
        fit = next(d for d in config["dependencies"] if d.get("api_name") == "fit_columns")
        body = json.dumps({"data": [{"headers": [str(n) for n in range(5000)], "data": [[1] * 5000]}],
                           "fn_index": fit["id"], "session_hash": "stranger"}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/gradio_api/run/predict", data=body,
                                         headers={"Content-Type": "application/json"})
        assert json.loads(urllib.request.urlopen(request).read())["data"] == [{"__type__": "update"}]
        # a package made after the page was built (not among the dropdown's first choices) can be compared
        shutil.copytree(tmp_path / "models" / "fast", tmp_path / "models" / "later")
        assert client.predict(["slow", "later"], "step", api_name="/compare")[0] == ""
    finally:
        demo.close()
