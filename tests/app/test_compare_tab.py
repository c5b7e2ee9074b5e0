"""The Compare tab through the running app's API: curves, settings and translations side by side."""

from __future__ import annotations

import json
import shutil
import urllib.request

from helpers import client_of, launched


def test_compare_tab_through_the_api(two_runs, tmp_path):
    from playground.ui.app import build_app

    shutil.copytree(two_runs, tmp_path / "models")
    demo = build_app(tmp_path / "models")
    with launched(demo) as url:
        client = client_of(url)
        message, settings, scores, loss, val, lr, bleu, chrf = client.predict(["slow", "fast"], "step",
                                                                             api_name="/compare")
        assert message == ""
        assert settings["headers"] == ["setting", "slow", "fast"]
        assert settings["data"] == [["learning rate (lr)", "0.001", "0.003"]]
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
        config = json.loads(urllib.request.urlopen(f"{url}config").read())
        fit = next(d for d in config["dependencies"] if d.get("api_name") == "fit_columns")
        body = json.dumps({"data": [{"headers": [str(n) for n in range(5000)], "data": [[1] * 5000]}],
                           "fn_index": fit["id"], "session_hash": "stranger"}).encode()
        request = urllib.request.Request(f"{url}gradio_api/run/predict", data=body,
                                         headers={"Content-Type": "application/json"})
        assert json.loads(urllib.request.urlopen(request).read())["data"] == [{"__type__": "update"}]
        # a package made after the page was built (not among the dropdown's first choices) can be compared
        shutil.copytree(tmp_path / "models" / "fast", tmp_path / "models" / "later")
        assert client.predict(["slow", "later"], "step", api_name="/compare")[0] == ""
