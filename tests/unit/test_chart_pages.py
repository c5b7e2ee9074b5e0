"""A chart saved as a page of its own (the Attention tab's HTML export): the page plotly's own writer makes, with
plotly.js streamed into it from plotly's file rather than read into memory for each page."""

from __future__ import annotations

import re

import plotly.graph_objects as go
import plotly.io._html
import pytest

from playground.insight.plots import write_html

PLOT_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")  # each page's div id


@pytest.mark.parametrize("offline", [True, False])
def test_the_page_is_plotlys_own_page_without_plotly_js_in_memory(tmp_path, monkeypatch, offline):
    fig = go.Figure(go.Heatmap(z=[[0.1, 0.9], [0.6, 0.4]], x=["a", "ü"], y=["c", "d"]))
    fig.write_html(str(tmp_path / "plotlys.html"), include_plotlyjs=True if offline else "cdn", full_html=True)
    write_html(fig, tmp_path / "first.html", offline)  # reads plotly.js once, to learn how plotly's pages load it

    def whole_bundle():
        raise AssertionError("plotly.js read into memory for a page")

    monkeypatch.setattr(plotly.io._html, "get_plotlyjs", whole_bundle)
    write_html(fig, tmp_path / "ours.html", offline)
    ours, plotlys = ((tmp_path / name).read_text(encoding="utf-8") for name in ("ours.html", "plotlys.html"))
    assert PLOT_ID.sub("id", ours) == PLOT_ID.sub("id", plotlys)
    assert ('src="https://cdn.plot.ly' in ours) is not offline and (len(ours) > 1_000_000) is offline
    assert sorted(p.name for p in tmp_path.iterdir()) == ["first.html", "ours.html", "plotlys.html"]  # no .partial


def test_a_write_that_fails_leaves_no_half_page(tmp_path, monkeypatch):
    fig = go.Figure(go.Heatmap(z=[[0.1, 0.9]]))
    write_html(fig, tmp_path / "first.html", True)  # plotly's loaders learned, so the streamed writer runs below

    def disk_full(source, destination, *args):
        destination.write(source.read(1000))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("playground.insight.plots.shutil.copyfileobj", disk_full)
    with pytest.raises(OSError, match="No space left"):
        write_html(fig, tmp_path / "page.html", True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["first.html"]
