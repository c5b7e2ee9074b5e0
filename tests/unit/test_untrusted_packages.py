"""Untrusted packages, made hostile on the spot and small on disk (a bomb is a header that claims sizes, never bytes
that are): refused from their headers and records at load and import; imports and runs never take each other's
names; the leftover sweep; `info` and `train` on the CLI refuse them without a traceback."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from helpers import DEMO, REPO, edit_json, make_huge, peak_rss, zip_folder

from playground import limits
from playground.cli.main import main
from playground.core.model import TransformerConfig
from playground.errors import PackageError, TrainingError
from playground.packages.format import CONFIG, TRAINING, WEIGHTS, is_package
from playground.packages.names import is_shipped, reserve_name, reserved
from playground.packages.store import check_package, list_packages, load_package, save_package
from playground.packages.sweep import sweep_leftovers
from playground.packages.zips import import_zip
from playground.runtime import memory
from playground.training.config import TrainConfig

# ----------------------------------------------------------------------------------------------------------
# 1. sizes are checked from the JSON and the header, against limits, before anything is allocated


def test_a_huge_package_is_refused_from_its_header_without_building_it(package, tmp_path, monkeypatch):
    make_huge(package)
    before, start = peak_rss(), time.perf_counter()
    with pytest.raises(PackageError, match=r"940,\d{3},\d{3} parameters; this server allows at most 300,000,000"):
        load_package(package)
    with pytest.raises(PackageError, match="this server allows at most 300,000,000"):
        import_zip(zip_folder(package, tmp_path / "huge.zip"), tmp_path / "models")
    # the version took 15 s and left 4.56 GB resident: now nothing the size of the model exists
    assert time.perf_counter() - start < 5 and peak_rss() - before < 300e6
    assert list_packages(tmp_path / "models") == []
    # under the parameter limit but over the memory this process has left: refused with both numbers
    monkeypatch.setenv("PLAYGROUND_MAX_PARAMETERS", "2000000000")
    monkeypatch.setattr(limits, "available_memory_bytes", lambda: 6 * 1024**3)
    with pytest.raises(PackageError, match=r"needs about 7\.0 GB to load, but this server has 6\.0 GB free"):
        load_package(package)
    edit_json(package / CONFIG, lambda c: c["model"].update(d_model=1_000_000, d_ff=1_000_000))
    with pytest.raises(PackageError, match="parameters; this server allows"):
        load_package(package)


def test_positions_are_capped_and_their_table_counted(package, monkeypatch):
    """max_positions sizes the sinusoidal table, a buffer no parameter count sees: 1e6 positions would be 1.8 GB."""
    edit_json(package / CONFIG, lambda c: c["model"].update(max_positions=1_000_000))
    before = peak_rss()
    with pytest.raises(PackageError, match=r"max_positions: must be .*4,?096"):
        load_package(package)
    assert peak_rss() - before < 100e6
    with pytest.raises(TrainingError, match="Max tokens per sentence must be from 1 to 4,094, not 1,000,000"):
        TrainConfig(max_steps=1, max_sentence_tokens=1_000_000, batch_tokens=10**7)
    big = TransformerConfig(100, 100, d_model=1024, n_heads=8, d_ff=1024, n_encoder_layers=1, n_decoder_layers=1,
                            max_positions=4096)
    assert memory.position_table(big) == 2 * 4096 * 1024
    monkeypatch.setattr(limits, "available_memory_bytes", lambda: (2 * big.num_parameters() + 4096 * 1024) * 4)
    with pytest.raises(PackageError, match="needs about"):  # the weights fit, the tables on top do not
        memory.check_model_loads(big)


# ----------------------------------------------------------------------------------------------------------
# 2. every JSON file is schema-checked; a broken package is one broken row, never a broken listing or app


@pytest.mark.parametrize("change, message", [
    (lambda c: c.pop("src_lang"), "lacks src_lang"),
    (lambda c: c["model"].update(d_model="128"), "model.d_model: must be a whole number"),
    (lambda c: c["model"].update(dropout=[0.1]), "model.dropout: must be a number"),
    (lambda c: c.update(tokenizer={"kind": "bpe", "joint": "yes"}), "tokenizer.joint: must be true or false"),
    (lambda c: c.update(versions=json.loads("[" * 50 + "]" * 50)), "nests deeper"),
])
def test_config_fields_are_checked_by_name(package, change, message):
    edit_json(package / CONFIG, change)
    with pytest.raises(PackageError, match=message):
        load_package(package)


# ----------------------------------------------------------------------------------------------------------
# 3. each file type has its own size limit; readers never read past it; the JSON cache lets deleted packages go


# ----------------------------------------------------------------------------------------------------------
# 4. a session's data is bounded, and freed when its tab closes


# ----------------------------------------------------------------------------------------------------------
# 5. names are reserved atomically by whatever writes a package; the CLI never overwrites without being told


def test_an_import_during_a_run_never_takes_the_runs_name(package, tmp_path):
    models = tmp_path / "models"
    with reserve_name(models, "tiny") as run_folder:  # a training run called "tiny" has started, saved nothing yet
        imported = import_zip(zip_folder(package, tmp_path / "tiny.zip"), models)
        assert run_folder.name == "tiny" and imported.name == "tiny-2"
        with pytest.raises(PackageError, match="being written by another run"):
            with reserve_name(models, "tiny", exact=True):  # a resume of the same name meanwhile
                pass
        pkg = load_package(imported)
        save_package(run_folder, pkg.model, pkg.tokenizer, src_lang="en", tgt_lang="de")  # the run's save
    assert {p.name for p in list_packages(models)} == {"tiny", "tiny-2"}
    assert not any(p.name.startswith(".") for p in models.iterdir())  # the reservation went with the run


def test_an_import_under_a_reserved_name_lands_there_or_nowhere(package, tmp_path):
    """The web app reserves the name first (Library.add); the import must not slip to an unregistered tiny-2."""
    models, upload = tmp_path / "models", zip_folder(package, tmp_path / "tiny.zip")
    with reserve_name(models, "given", exact=True):  # another operation writes "given" right now
        with pytest.raises(PackageError, match="being written by another run or upload"):
            import_zip(upload, models, name="given")
    assert import_zip(upload, models, name="given").name == "given"
    with pytest.raises(PackageError, match="A model named given exists already"):
        import_zip(upload, models, name="given")
    assert [p.name for p in list_packages(models)] == ["given"]


def test_cli_train_refuses_an_existing_package_and_never_touches_a_shipped_one(package, tmp_path, monkeypatch,
                                                                               capsys):
    args = ["train", "--data", "builtin:reverse", "--max-steps", "1"]
    before = (package / WEIGHTS).stat().st_mtime_ns
    assert main([*args, "--out", str(package)]) == 2
    err = capsys.readouterr().err
    assert "exists already" in err and "pass --overwrite to replace it" in err
    assert (package / WEIGHTS).stat().st_mtime_ns == before
    monkeypatch.chdir(REPO)
    shipped = DEMO
    assert is_shipped(shipped) and is_shipped(Path("models/demo-en-de")) and not is_shipped(package)
    stamp = (shipped / WEIGHTS).stat().st_mtime_ns
    assert main([*args, "--out", "demo-en-de", "--overwrite"]) == 2
    assert "ships with the playground" in capsys.readouterr().err
    assert (shipped / WEIGHTS).stat().st_mtime_ns == stamp
    assert not reserved(DEMO)


def test_cli_train_refuses_to_average_into_an_existing_package(package, tmp_path, capsys):
    """--average-last writes <out>-avg at the end: an existing one is refused up front, not replaced hours later."""
    avg = tmp_path / "run-avg"
    shutil.copytree(package, avg)
    before = (avg / WEIGHTS).stat().st_mtime_ns
    args = ["train", "--data", "builtin:reverse", "--max-steps", "1", "--average-last", "2",
            "--out", str(tmp_path / "run")]
    assert main(args) == 2
    assert "run-avg exists already" in capsys.readouterr().err
    assert (avg / WEIGHTS).stat().st_mtime_ns == before and not (tmp_path / "run").exists()
    assert not reserved(tmp_path / "run") and not reserved(tmp_path / "run-avg")  # both reservations were let go


# ----------------------------------------------------------------------------------------------------------
# 6. leftovers that belong to no live operation are swept; snapshots count and go with their package


def test_the_sweep_never_takes_a_package_named_like_snapshots(package, tmp_path):
    """A visitor's own package "x-snapshots" (no package "x" beside it) is a package, not a run's leftovers."""
    models = tmp_path / "models"
    tiny = load_package(package)
    save_package(models / "x-snapshots", tiny.model, tiny.tokenizer)
    save_package(models / "x.snapshots", tiny.model, tiny.tokenizer)
    assert sweep_leftovers(models) == []
    assert is_package(models / "x-snapshots") and is_package(models / "x.snapshots")


# ----------------------------------------------------------------------------------------------------------
# 7. small ones: `info` on hostile folders, wrong-typed form values, huge seeds


@pytest.mark.parametrize("spoil, message", [
    (lambda f: (f / CONFIG).write_text("[" * 10_000 + "]" * 10_000), "nests too deeply"),
    (lambda f: edit_json(f / CONFIG, lambda c: c.pop("model")), "lacks model"),
    (lambda f: edit_json(f / CONFIG, lambda c: c["model"].update(n_heads=3)), "divisible"),
    (lambda f: (f / WEIGHTS).write_bytes((f / WEIGHTS).read_bytes()[:200]), "corrupt or truncated"),
    (lambda f: (f / "tokenizer.json").write_text('{"version": "1.0"}'), "tokenizer"),
    (lambda f: edit_json(f / TRAINING, lambda t: t.update(steps="many")), "steps: must be a whole number"),
    (lambda f: edit_json(f / TRAINING, lambda t: t.update(config={"d_model": "wide"})),
     "config.d_model: must be a whole number"),
])
def test_info_checks_what_loading_checks_and_never_prints_a_traceback(package, spoil, message, capsys):
    assert main(["info", "--model", str(package)]) == 0
    assert "tiny: en → de" in capsys.readouterr().out
    spoil(package)
    assert main(["info", "--model", str(package)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and message in err and "Traceback" not in err
    with pytest.raises(PackageError):
        check_package(package)


# ----------------------------------------------------------------------------------------------------------
# The whole app under a memory limit, sent the hostile package and oversized forms


