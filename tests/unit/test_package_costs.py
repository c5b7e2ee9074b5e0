"""What reading a package may cost, checked from its bytes and lengths before the work (issue 32, rows B, F, K):
attention probes of a bounded shape, histories thinned as they are read, JSON values counted before parsing, and a
tokenizer's size, strings and added tokens counted before the tokenizers library parses it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from helpers import edit_json, peak_rss, tiny_package, zip_folder

from playground.errors import PackageError
from playground.insight.compare import load_runs
from playground.packages import schema
from playground.packages.format import (
    TOKENIZER,
    TRAINING,
    check_containers,
    read_training,
    thinned_history,
)
from playground.packages.store import load_package
from playground.packages.tokenizer_checks import check_tokenizer_cost
from playground.packages.zips import import_zip


def probe(layers: int, targets: int, sources: int, **changes) -> dict:
    return {"step": 10, "cross": [[[0.25] * sources for _ in range(targets)] for _ in range(layers)],
            "src_tokens": ["a"] * sources, "tgt_tokens": ["b"] * targets, **changes}


def check_probe(entry: dict) -> None:
    schema.validate({"history": {"probe": [entry]}}, schema.TRAINING, "training.json")


def test_a_probe_past_the_attention_cells_is_refused_from_its_lengths(monkeypatch):
    monkeypatch.setenv("PLAYGROUND_MAX_ATTENTION_CELLS", "10000")
    check_probe(probe(2, 50, 100))  # 10,000: within
    with pytest.raises(PackageError, match=r"history\.probe\[0\]\.cross: holds 1 x 101 x 100 attention weights; "
                                           r"at most 10,000 .*PLAYGROUND_MAX_ATTENTION_CELLS"):
        check_probe(probe(1, 101, 100))


@pytest.mark.parametrize("entry, problem", [
    (probe(1, 3, 4, cross=[[[0.1] * 4] * 3, [[0.1] * 4] * 2]), "maps of one shape"),
    (probe(1, 3, 4, cross=[[[0.1] * 4, [0.1] * 5, [0.1] * 4]]), "maps of one shape"),
    (probe(1, 3, 4, cross=[[[0.1] * 4, [0.1] * 4, [0.1, "x", 0.1, 0.1]]]), "must hold numbers"),
    (probe(1, 3, 4, cross=[]), "a list of maps"),
    (probe(1, 3, 4, src_tokens=["a"] * 5), "has 3 x 4 positions but 3 target and 5 source labels"),
    ({"step": 1, "src_tokens": [], "tgt_tokens": []}, "the maps in `cross`"),
])
def test_a_probe_must_have_the_shape_the_trainer_writes(entry, problem):
    with pytest.raises(PackageError, match=problem):
        check_probe(entry)


def test_a_probe_the_trainer_wrote_passes(tmp_path):
    from helpers import DEMO

    training = read_training(DEMO)
    assert training["history"]["probe"] and len(training["history"]["steps"]) == 1500  # a real history: unchanged


def test_long_curves_are_checked_at_c_speed_and_a_bad_value_is_still_named(monkeypatch):
    history = {"steps": list(range(1, 1_000_001)), "loss": [1.5] * 1_000_000, "lr": [0.001] * 1_000_000}
    checked = []  # value by value (and the nesting depth likewise), a million-step history took 4 s
    for kind in (schema.Int, schema.Num):
        monkeypatch.setattr(kind, "check", lambda self, value, where, real=kind.check: checked.append(where) or
                            real(self, value, where))
    schema.validate({"history": history}, schema.TRAINING, "training.json")
    assert len(checked) < 100  # the record's few scalars; the curves as whole lists
    history["loss"][777_777] = "low"
    with pytest.raises(PackageError, match=r"history\.loss\[777777\]: must be a number, not str"):
        schema.validate({"history": history}, schema.TRAINING, "training.json")
    history["loss"][777_777], history["steps"][5] = 1.0, -1
    with pytest.raises(PackageError, match=r"history\.steps\[5\]: must be between 0"):
        schema.validate({"history": history}, schema.TRAINING, "training.json")
    assert schema.depth({"a": [1, [2, {"b": [3]}]], "c": 4}) == 6 and schema.depth([]) == 1


def test_a_history_is_thinned_as_it_is_read_keeping_pairs_and_the_last_point(tmp_path, monkeypatch):
    assert thinned_history({"steps": [1, 2, 3], "note": "x"}, 2) == {"steps": [1, 3], "note": "x"}
    assert thinned_history({"steps": [1, 2, 3, 4, 5]}, 2) == {"steps": [1, 4, 5]}
    folder = tiny_package(tmp_path / "long", history=50_000)
    monkeypatch.setenv("PLAYGROUND_MAX_HISTORY_POINTS", "1000")
    history = read_training(folder)["history"]
    assert len(history["steps"]) <= 1001 and history["steps"][-1] == 50_000
    written = json.loads((folder / TRAINING).read_text())["history"]
    loss = dict(zip(written["steps"], written["loss"]))
    assert [loss[step] for step in history["steps"]] == history["loss"]  # each kept step with its own loss


def test_a_long_runs_record_is_saved_within_its_files_limits_and_loads_again(tmp_path):
    from helpers import tiny_model

    from playground.core.tokenizer import train_tokenizer
    from playground.packages.store import save_package

    tokenizer = train_tokenizer([("a b c", "c b a")] * 3, kind="word", vocab_size=20)
    steps, probes = 300_000, [probe(2, 20, 20, step=s) for s in range(600, 300_001, 600)]  # 500 validations
    history = {"steps": list(range(1, steps + 1)), "loss": [2.5] * steps, "lr": [0.001] * steps,
               "elapsed": [0.01 * i for i in range(steps)], "evals": [], "probe": probes}
    folder = save_package(tmp_path / "long-run", tiny_model(tokenizer), tokenizer,
                          training={"steps": steps, "history": history})
    assert (folder / TRAINING).stat().st_size < 8 * 1024**2  # written whole, it was past the 16 MB limit
    saved = load_package(folder).training["history"]
    assert len(saved["steps"]) <= 20_001 and saved["steps"][-1] == steps
    assert 100 <= len(saved["probe"]) <= 320 and saved["probe"][-1]["step"] == 300_000  # 250,000 weights of 800


def test_compare_reads_long_histories_in_bounded_time_and_memory(tmp_path):
    folders = []
    for i in range(3):
        folder = tiny_package(tmp_path / f"run-{i}")
        edit_json(folder / TRAINING, lambda t: t.update(wall_s=100.0, history={
            "steps": list(range(1, 400_001)), "loss": [2.0] * 400_000, "lr": [0.001] * 400_000, "evals": []}))
        folders.append(folder)
    before, start = peak_rss(), time.perf_counter()
    runs = load_runs(folders)
    assert time.perf_counter() - start < 10 and peak_rss() - before < 250e6
    assert all(len(run.steps) <= 20_001 for run in runs) and runs[0].steps[-1] == 400_000
    # by wall time: the thinned steps still find their seconds (spread evenly over the run, none recorded)
    assert runs[0].seconds_at(400_000) == pytest.approx(100.0) and runs[0].seconds_at(200_000) == pytest.approx(
        50.0, abs=0.1)


def test_json_with_more_values_than_a_package_file_has_is_refused_before_parsing():
    check_containers(b"[" + b"0," * 1000 + b"0]", "training.json")
    with pytest.raises(PackageError, match=r"holds about 3,000,002 values; a package file has at most 3,000,000"):
        check_containers(b"[" + b"0," * 3_000_001 + b"0]", "training.json")


# ----------------------------------------------------------------------------------------------------------
# Tokenizers: counted before they are parsed


def spoiled_tokenizer(folder: Path, change) -> Path:
    edit_json(folder / TOKENIZER, change)
    return folder


@pytest.mark.parametrize("change, message", [
    (lambda t: t["model"]["vocab"].update({f"w{i}": 100 + i for i in range(5000)}),
     r"holds about [\d,]+ strings; a tokenizer of the \d+ tokens config.json gives has at most [\d,]+"),
    (lambda t: t["added_tokens"].extend({"id": 100 + i, "content": f"<x{i}>", "special": True} for i in range(100)),
     r"has 104 added tokens; a playground tokenizer has its 4 special tokens \(at most 100 are read\)"),
    (lambda t: t["model"]["vocab"].update({f"w{i}": 100 + i for i in range(20)}),
     r"has \d+ tokens but config.json says the vocabulary has \d+"),
    (lambda t: t.pop("model"), "lacks a tokenizer's model"),
])
def test_a_tokenizer_is_counted_before_the_library_parses_it(tmp_path, change, message):
    folder = spoiled_tokenizer(tiny_package(tmp_path / "spoiled"), change)
    with pytest.raises(PackageError, match=message):
        load_package(folder)


def test_a_tokenizer_past_its_byte_limit_is_refused_from_the_zip_before_extraction(tmp_path, monkeypatch):
    folder = spoiled_tokenizer(tiny_package(tmp_path / "big"),
                               lambda t: t["model"]["vocab"].update({f"w{i:08d}": 100 + i for i in range(30_000)}))
    monkeypatch.setenv("PLAYGROUND_MAX_TOKENIZER_BYTES", str(256 * 1024))
    with pytest.raises(PackageError, match=r"tokenizer.json in the zip expands to [\d,]+ bytes; at most 262,144"):
        import_zip(zip_folder(folder, tmp_path / "big.zip"), tmp_path / "models")
    with pytest.raises(PackageError, match="larger than the 262,144 bytes allowed"):
        check_tokenizer_cost(folder / TOKENIZER, 100)


def test_the_shipped_tokenizer_passes(tmp_path):
    from helpers import DEMO

    config = json.loads((DEMO / "config.json").read_text())["model"]
    check_tokenizer_cost(DEMO / TOKENIZER, config["src_vocab_size"])
