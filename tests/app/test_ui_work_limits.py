"""Work limits the UI's handlers apply before the work starts: attention maps and the all-heads grid, request
lines, next-token candidates, and a Rust panic that reaches people as a message."""

from __future__ import annotations

import time

import pytest
from helpers import WIDE, make_package

from playground import limits
from playground.core.attention_maps import attention_cells, attention_maps
from playground.errors import PlaygroundError
from playground.packages.store import load_package
from playground.runtime.request_bounds import attention_cell_limit

pytestmark = pytest.mark.usefixtures("one_thread")


def test_attention_of_a_64_head_4096_position_package_is_cut_before_it_is_computed(tmp_path, tokenizer):
    package = load_package(make_package(tmp_path / "wide", tokenizer, **WIDE))
    ids = package.tokenizer.encode_src("the cat sees the dog " * 1000)[:4094]
    assert len(ids) == 4094
    # the request: 64 x 18 x 4,094^2 weights (77 GB of floats); now cut to the longest prefix that fits
    assert attention_cells(package.model.cfg, 4095, 4095) > 10**10
    start = time.perf_counter()
    maps = attention_maps(package.model, package.tokenizer, ids + [3], [2] + ids, limits.max_attention_cells())
    cells = sum(maps[kind].size for kind in ("encoder", "decoder", "cross"))
    assert cells <= limits.max_attention_cells() and maps["cut"] == (4095, 4095)
    assert maps["cross"].shape[:2] == (6, 64) and len(maps["src_tokens"]) == maps["encoder"].shape[-1] >= 4
    assert time.perf_counter() - start < 5
    # the Attention tab says so beside the button
    from playground.ui.tabs.attention import compute_maps, cut_note

    att = compute_maps(str(package.path), "the cat " * 3000, "my target (teacher-forced)", "die Katze " * 3000)
    assert "✂️ The maps of all" in cut_note(att) and "PLAYGROUND_" not in cut_note(att)  # no operator words
    # a model with so many layers x heads that not even 4 tokens fit is refused, not drawn
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PLAYGROUND_MAX_ATTENTION_CELLS", "1000")
        with pytest.raises(PlaygroundError, match="fewer than 4 tokens"):
            attention_cell_limit(package.model.cfg)


def test_the_all_heads_grid_refuses_more_maps_than_it_can_draw():
    import numpy as np

    from playground.ui.tabs.attention import MAX_GRID_MAPS, VIEWS, render

    att = {"maps": {"cross": np.zeros((12, 16, 3, 3), dtype=np.float32)}, "src_tokens": list("abc"),
           "tgt_tokens": list("abc")}
    figure = render(att, "cross", VIEWS[2], 0, 0)
    assert 12 * 16 > MAX_GRID_MAPS and not figure.data  # an empty chart with the reason, not 192 heatmaps
    assert "pick one head" in figure.layout.annotations[0].text


def test_a_request_past_its_characters_is_refused_and_long_lines_are_cut_and_said():
    from playground.ui.handlers import request_lines

    with pytest.raises(PlaygroundError, match=r"has 100,000,019 characters; one request may send at most 50,000"):
        request_lines("\n".join(["x" * 5_000_000] * 20), "text")  # the 20 lines of 5 MB
    lines, note = request_lines("short\n" + "y" * 3000 + "\nz", "text")
    assert [len(line) for line in lines] == [5, 2000, 1] and "Line 2 of the text was cut to 2,000 characters" in note
    assert request_lines("a\nb", "text") == (["a", "b"], "")


def test_next_token_candidates_are_bounded():
    from playground.ui.tabs.translate import check_candidates

    with pytest.raises(PlaygroundError, match="from 1 to 20"):
        check_candidates(10**9)
    assert check_candidates(5) == 5


def test_a_rust_panic_reaches_people_as_a_message_and_never_hangs_the_request():
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers

    from playground.errors import is_rust_panic
    from playground.ui.handlers import readable

    raw = Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.Split(Regex("(a+)+$"), behavior="isolated")

    @readable
    def handler():
        return raw.encode("a" * 40 + "b")

    with pytest.raises(Exception) as shown:
        handler()
    assert is_rust_panic(shown.value.__cause__) and "Something went wrong" in str(shown.value)
