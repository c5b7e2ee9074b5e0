"""Hostile uploads and heavy visitors (issue 19): one test per finding, each making its hostile input on the spot and
small on disk (a bomb is a header that claims sizes, never bytes that are), then the whole app in a subprocess under
a memory limit, sent the hostile package and oversized forms: it refuses them clearly and keeps serving."""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import socket
import struct
import subprocess
import sys
import time
import zipfile
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import pytest  # noqa: E402
import torch  # noqa: E402
from conftest import app_in_subprocess, refusal_of  # noqa: E402

from playground import limits  # noqa: E402

from playground.runtime import memory
from playground.cli.main import main  # noqa: E402
from playground.training.config import TrainConfig  # noqa: E402
from playground.errors import PackageError, PlaygroundError, TrainingError  # noqa: E402
from playground.core.model import Transformer, TransformerConfig  # noqa: E402
from playground.serving.library import Library  # noqa: E402
from playground.packages.format import CARD, CONFIG, TRAINING, WEIGHTS, is_package  # noqa: E402
from playground.packages.names import is_shipped, reserve_name, reserved  # noqa: E402
from playground.packages.store import (check_package, delete_package, list_packages, load_package,  # noqa: E402
                                       package_info, save_package)
from playground.packages.sweep import sweep_leftovers  # noqa: E402
from playground.packages.zips import import_zip  # noqa: E402

GB = 1e9
REPO = Path(__file__).resolve().parent.parent
# the 0.94B-parameter package: d_model 2048, d_ff 8192, 8+8 layers
HUGE = dict(d_model=2048, d_ff=8192, n_heads=8, n_encoder_layers=8, n_decoder_layers=8)


@pytest.fixture
def package(tmp_path, model, tokenizer) -> Path:
    return save_package(tmp_path / "src" / "tiny", model, tokenizer, src_lang="en", tgt_lang="de",
                        training={"steps": 3, "epochs": 0.5, "wall_s": 1.0, "device": "cpu", "last": {"bleu": 12.5}})


def edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def claiming_weights(path: Path, cfg: TransformerConfig) -> None:
    """A safetensors file whose header claims every tensor of Transformer(cfg) but holds no data: bytes, not GBs."""
    with torch.device("meta"):
        state = Transformer(cfg).state_dict()
    header, offset = {}, 0
    for name, tensor in state.items():
        size = tensor.numel() * 4
        header[name] = {"dtype": "F32", "shape": list(tensor.shape), "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)


def make_huge(folder: Path) -> Path:
    """Turn a real package into the issue's 6 MB zip bomb in kind: config.json and a weights header for 0.94B."""
    edit_json(folder / CONFIG, lambda c: c["model"].update(HUGE))
    claiming_weights(folder / WEIGHTS, TransformerConfig.from_dict(json.loads((folder / CONFIG).read_text())["model"]))
    return folder


def zip_folder(folder: Path, dest: Path) -> Path:
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(folder.iterdir()):
            if f.is_file():
                zf.write(f, f"{folder.name}/{f.name}")
    return dest


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# ----------------------------------------------------------------------------------------------------------
# 1. sizes are checked from the JSON and the header, against limits, before anything is allocated


def test_1_a_huge_package_is_refused_from_its_header_without_building_it(package, tmp_path, monkeypatch):
    make_huge(package)
    before, start = peak_rss(), time.perf_counter()
    with pytest.raises(PackageError, match=r"940,\d{3},\d{3} parameters; this server allows at most 300,000,000"):
        load_package(package)
    with pytest.raises(PackageError, match="PLAYGROUND_MAX_PARAMETERS"):
        import_zip(zip_folder(package, tmp_path / "huge.zip"), tmp_path / "models")
    # the version took 15 s and left 4.56 GB resident: now nothing the size of the model exists
    assert time.perf_counter() - start < 5 and peak_rss() - before < 300e6
    assert list_packages(tmp_path / "models") == []
    # under the parameter limit but over the memory this process has left: refused with both numbers
    monkeypatch.setenv("PLAYGROUND_MAX_PARAMETERS", "2000000000")
    monkeypatch.setattr(limits, "available_memory_bytes", lambda: 6 * 1024**3)
    with pytest.raises(PackageError, match=r"needs about 7\.5 GB to load, but this server has 6\.4 GB free"):
        load_package(package)
    edit_json(package / CONFIG, lambda c: c["model"].update(d_model=1_000_000, d_ff=1_000_000))
    with pytest.raises(PackageError, match="parameters; this server allows"):
        load_package(package)


def test_1_positions_are_capped_and_their_table_counted(package, monkeypatch):
    """max_len sizes the sinusoidal table, a buffer no parameter count sees: 1e6 positions would be 1.8 GB."""
    edit_json(package / CONFIG, lambda c: c["model"].update(max_len=1_000_000))
    before = peak_rss()
    with pytest.raises(PackageError, match=r"max_len: must be .*4,?096"):
        load_package(package)
    assert peak_rss() - before < 100e6
    with pytest.raises(TrainingError, match="maximum length must be from 1 to 4094 tokens"):
        TrainConfig(max_steps=1, max_len=1_000_000, batch_tokens=10**7)
    big = TransformerConfig(100, 100, d_model=1024, n_heads=8, d_ff=1024, n_encoder_layers=1, n_decoder_layers=1,
                            max_len=4096)
    assert memory.position_table(big) == 2 * 4096 * 1024
    monkeypatch.setattr(limits, "available_memory_bytes", lambda: (2 * big.num_parameters() + 4096 * 1024) * 4)
    with pytest.raises(PackageError, match="needs about"):  # the weights fit, the tables on top do not
        memory.check_model_loads(big)


def test_1_the_memory_limit_comes_from_the_cgroup_then_the_host(monkeypatch):
    files = {"/sys/fs/cgroup/memory.max": 6 * 1024**3, "/sys/fs/cgroup/memory.current": 1024**3}
    monkeypatch.setattr(limits, "_read_number", files.get)
    monkeypatch.setattr(limits, "_host_available", lambda: 20 * 1024**3)
    assert limits.memory_limits()["cgroup"] == (6 * 1024**3, 1024**3)
    assert limits.available_memory_bytes() <= 5 * 1024**3 and limits.memory_limit_bytes() <= 6 * 1024**3
    v1 = {"/sys/fs/cgroup/memory/memory.limit_in_bytes": 4 * 1024**3,
          "/sys/fs/cgroup/memory/memory.usage_in_bytes": 3 * 1024**3}
    monkeypatch.setattr(limits, "_read_number", v1.get)
    assert limits.available_memory_bytes() <= 1024**3  # cgroup v1 (what this machine has)
    monkeypatch.setattr(limits, "_read_number", {"/sys/fs/cgroup/memory/memory.limit_in_bytes": 2**63 - 4096}.get)
    assert "cgroup" not in limits.memory_limits()  # v1's "unlimited" is the host's memory
    monkeypatch.setattr(limits, "_read_number", files.get)

    # /train and /estimate: the run the issue saw accepted (11.8 GB under a 6 GB limit) is refused, with the numbers
    from playground.training.estimate import estimate_training
    from playground.runtime.memory import check_training_fits
    from playground.training.config import TrainConfig

    cfg = TrainConfig(d_model=1536, n_heads=8, n_encoder_layers=6, n_decoder_layers=6, d_ff=2048, vocab_size=8000,
                      max_steps=10, device="cpu", precision="fp32")
    with pytest.raises(TrainingError, match=r"needs about \d+\.\d GB but cpu has 5\.4 GB free"):
        check_training_fits(cfg.model_config(8000, 8000, True), cfg.batch_tokens, torch.device("cpu"), "fp32")
    start = time.perf_counter()
    with pytest.raises(TrainingError, match="GB free"):
        estimate_training(cfg)  # refused before the model is built, let alone stepped
    assert time.perf_counter() - start < 3
    with pytest.raises(TrainingError, match="this server allows at most 300,000,000"):
        estimate_training(TrainConfig(d_model=65536, n_heads=8, max_steps=10, device="cpu"))


# ----------------------------------------------------------------------------------------------------------
# 2. every JSON file is schema-checked; a broken package is one broken row, never a broken listing or app


def test_2_a_mistyped_training_record_is_refused_at_import_and_shown_broken_on_disk(package, tmp_path):
    from playground.ui.app import build_app
    from playground.ui.tabs.models import models_frame

    models = tmp_path / "models"
    good = load_package(package)
    save_package(models / "good", good.model, good.tokenizer, src_lang="en", tgt_lang="de")
    edit_json(package / TRAINING, lambda t: t.update(last={"bleu": "high"}))
    with pytest.raises(PackageError, match=r"training\.json in .* is invalid: last\.bleu: must be a number"):
        import_zip(zip_folder(package, tmp_path / "bad.zip"), models)
    assert sorted(p.name for p in models.iterdir()) == ["good"]  # nothing written, no leftovers
    # the same package copied into models/ by hand: its own row says broken, the others list, the app starts
    os.rename(package, models / "tiny")
    frame = models_frame(Library(models), None)
    rows = {row["name"]: row for _, row in frame.iterrows()}
    assert rows["tiny"]["direction"] == "⚠️ broken" and "last.bleu" in rows["tiny"]["architecture"]
    assert rows["good"]["direction"] == "en → de"
    build_app(models).close()


@pytest.mark.parametrize("change, message", [
    (lambda c: c.pop("src_lang"), "lacks src_lang"),
    (lambda c: c["model"].update(d_model="128"), "model.d_model: must be a whole number"),
    (lambda c: c["model"].update(dropout=[0.1]), "model.dropout: must be a number"),
    (lambda c: c.update(tokenizer={"kind": "bpe", "joint": "yes"}), "tokenizer.joint: must be true or false"),
    (lambda c: c.update(versions=json.loads("[" * 50 + "]" * 50)), "nests deeper"),
])
def test_2_config_fields_are_checked_by_name(package, change, message):
    edit_json(package / CONFIG, change)
    with pytest.raises(PackageError, match=message):
        load_package(package)


# ----------------------------------------------------------------------------------------------------------
# 3. each file type has its own size limit; readers never read past it; the JSON cache lets deleted packages go


def zip_claiming(folder: Path, dest: Path, name: str, claimed: int) -> Path:
    """A zip of the package whose central directory says `name` expands to `claimed` bytes (it does not)."""
    zip_folder(folder, dest)
    data = bytearray(dest.read_bytes())
    entry = data.find(b"PK\x01\x02")  # the central directory's entries: the sizes zipfile reports
    while entry != -1:
        name_length = struct.unpack_from("<H", data, entry + 28)[0]
        if data[entry + 46:entry + 46 + name_length].decode().endswith("/" + name):
            struct.pack_into("<I", data, entry + 24, claimed)  # the uncompressed size
        entry = data.find(b"PK\x01\x02", entry + 4)
    dest.write_bytes(bytes(data))
    return dest


def test_3_a_card_bomb_is_refused_and_no_reader_reads_past_its_limit(package, tmp_path, monkeypatch):
    from playground.ui import caches
    from playground.ui.tabs.models import card

    bomb = zip_claiming(package, tmp_path / "bomb.zip", CARD, 1_500_000_000)
    with pytest.raises(PackageError, match=r"README\.md in the zip expands to 1,500,000,000 bytes; at most 262,144"):
        import_zip(bomb, tmp_path / "models")
    assert not (tmp_path / "models").exists() or not any((tmp_path / "models").iterdir())

    models = tmp_path / "models"
    models.mkdir(exist_ok=True)
    os.rename(package, models / "tiny")
    with open(models / "tiny" / CARD, "r+b") as f:  # a sparse gigabyte: it takes no disk, and must take no memory
        f.truncate(1 << 30)
    before = peak_rss()
    with pytest.raises(PackageError, match=r"README\.md in tiny is larger than the 262,144 bytes allowed"):
        card(Library(models), None, "tiny")
    assert peak_rss() - before < 100e6
    # training.json over its limit: refused by name, not read whole
    monkeypatch.setenv("PLAYGROUND_MAX_TRAINING_BYTES", "100")
    with pytest.raises(PackageError, match="PLAYGROUND_MAX_TRAINING_BYTES"):
        package_info(models / "tiny")
    monkeypatch.delenv("PLAYGROUND_MAX_TRAINING_BYTES")
    (models / "tiny" / CARD).write_text("# tiny")
    # the UI's JSON cache: a deleted package's training record does not stay in memory
    caches.package_info(models / "tiny")
    assert (str(models / "tiny"), "summary") in caches.INFO.items
    delete_package(models, "tiny")
    demo = load_package(REPO / "models" / "demo-en-de")
    save_package(models / "other", demo.model, demo.tokenizer)
    caches.package_info(models / "other")
    assert (str(models / "tiny"), "summary") not in caches.INFO.items


# ----------------------------------------------------------------------------------------------------------
# 4. a session's data is bounded, and freed when its tab closes


def test_4_a_session_keeps_its_pairs_packed():
    from playground.data.packed import PackedPairs
    from playground.data.stats import pair_stats, split_pairs

    pairs = [(f"the {i}th sentence", f"der {i}. Satz ü") for i in range(2000)] + [("émoji 🙂", "")]
    packed = PackedPairs(pairs)
    assert list(packed) == pairs and len(packed) == len(pairs) and packed[-1] == pairs[-1]
    assert packed[5:8] == pairs[5:8] and packed.swapped()[3] == pairs[3][::-1]
    assert split_pairs(packed, 0.1, seed=3) == split_pairs(pairs, 0.1, seed=3)
    assert pair_stats(packed) == pair_stats(pairs)
    as_list = sum(sys.getsizeof(p) + sys.getsizeof(p[0]) + sys.getsizeof(p[1]) for p in pairs)
    assert packed.nbytes < as_list / 3  # a third of the memory, or less
    with pytest.raises(IndexError):
        packed[len(pairs)]


def test_4_session_data_is_capped_and_released_when_the_tab_closes(tmp_path, monkeypatch):
    import httpx
    from gradio_client import Client, handle_file

    from playground.ui.app import build_app

    corpus = tmp_path / "corpus.tsv"
    corpus.write_text("".join(f"sentence number {i} here\tSatz Nummer {i} hier\n" for i in range(40_000)))
    monkeypatch.setenv("PLAYGROUND_MAX_SESSION_DATA_MB", "1")
    monkeypatch.setenv("GRADIO_HEARTBEAT_INTERVAL", "0.2")  # the server notices a closed tab within a beat
    demo = build_app(tmp_path / "models")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True)
    try:
        client = Client(f"http://127.0.0.1:{port}/", verbose=False)
        assert re.search(r"pairs\) is too large: 2\.\d MB in memory; the limit is 1\.0 MB per session\. "
                         r".*PLAYGROUND_MAX_SESSION_DATA_MB",
                         refusal_of(client.predict([handle_file(str(corpus))], 0.05, api_name="/load_files")))
        assert "pairs kept" in client.predict("reverse", 0.05, api_name="/load_builtin")[0]
        stored = demo.state_holder.session_data[client.session_hash].state_data
        assert any(getattr(v, "data", None) is not None for v in stored.values())
        # a browser tab holds a heartbeat stream open; closing the tab ends it, and the unload hook frees the data
        with httpx.stream("GET", f"http://127.0.0.1:{port}/gradio_api/heartbeat/{client.session_hash}") as beat:
            next(beat.iter_lines())
        deadline = time.monotonic() + 10
        while any(getattr(v, "data", None) is not None for v in stored.values()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(getattr(v, "data", None) is not None for v in stored.values())
    finally:
        demo.close()


# ----------------------------------------------------------------------------------------------------------
# 5. names are reserved atomically by whatever writes a package; the CLI never overwrites without being told


def test_5_an_import_during_a_run_never_takes_the_runs_name(package, tmp_path):
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


def test_5_an_import_under_a_reserved_name_lands_there_or_nowhere(package, tmp_path):
    """The web app reserves the name first (Library.add); the import must not slip to an unregistered tiny-2."""
    models, upload = tmp_path / "models", zip_folder(package, tmp_path / "tiny.zip")
    with reserve_name(models, "given", exact=True):  # another operation writes "given" right now
        with pytest.raises(PackageError, match="being written by another run or upload"):
            import_zip(upload, models, name="given")
    assert import_zip(upload, models, name="given").name == "given"
    with pytest.raises(PackageError, match="A model named given exists already"):
        import_zip(upload, models, name="given")
    assert [p.name for p in list_packages(models)] == ["given"]


def test_5_reservations_live_in_the_process_and_a_fork_can_take_its_own(tmp_path):
    """Nothing on disk (a bucket mount has no exclusive mkdir); a child forked while a thread of the parent held the
    reservations' lock (ZeroGPU forks its worker from the server) gets a lock of its own instead of a deadlock."""
    import threading

    from playground.packages import names as package_module
    with reserve_name(tmp_path, "x", exact=True):
        assert not any(tmp_path.iterdir())
    held, release = threading.Event(), threading.Event()

    def hold():
        with package_module.RESERVING:
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's verdict is its exit status
        os._exit(0 if package_module.RESERVING.acquire(timeout=5) else 1)
    release.set()
    holder.join()
    assert os.waitpid(child, 0)[1] == 0


def test_5_cli_train_refuses_an_existing_package_and_never_touches_a_shipped_one(package, tmp_path, monkeypatch,
                                                                               capsys):
    args = ["train", "--data", "builtin:reverse", "--max-steps", "1"]
    before = (package / WEIGHTS).stat().st_mtime_ns
    assert main([*args, "--out", str(package)]) == 2
    err = capsys.readouterr().err
    assert "exists already" in err and "pass --overwrite to replace it" in err
    assert (package / WEIGHTS).stat().st_mtime_ns == before
    monkeypatch.chdir(REPO)
    shipped = REPO / "models" / "demo-en-de"
    assert is_shipped(shipped) and is_shipped(Path("models/demo-en-de")) and not is_shipped(package)
    stamp = (shipped / WEIGHTS).stat().st_mtime_ns
    assert main([*args, "--out", "demo-en-de", "--overwrite"]) == 2
    assert "ships with the playground" in capsys.readouterr().err
    assert (shipped / WEIGHTS).stat().st_mtime_ns == stamp
    assert not reserved(REPO / "models" / "demo-en-de")


def test_5_cli_train_refuses_to_average_into_an_existing_package(package, tmp_path, capsys):
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


def dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def test_6_the_sweep_removes_what_no_live_operation_owns(package, tmp_path):
    models, tmp = tmp_path / "models", tmp_path / "tmp"
    tmp.mkdir()
    tiny = load_package(package)
    kept = save_package(models / "kept", tiny.model, tiny.tokenizer)
    gone = dead_pid()
    leftovers = [models / f".import-{gone}-x1", models / f".kept.tmp-{gone}-abcd", models / ".old-run.lock",
                 models / ".running.lock", models / ".deleted.snapshots", tmp / f"package-{gone}-zz"]
    live = [models / f".import-{os.getpid()}-x2", models / ".kept.snapshots", models / ".running.snapshots",
            tmp / f"package-{os.getpid()}-yy"]
    for path in leftovers + live:
        path.mkdir(parents=True)
    (models / ".deleted.snapshots" / "step-00000010").mkdir()
    (models / ".kept.snapshots" / "weights.bin").write_bytes(b"\0" * 5000)
    (models / ".old-run.lock" / "pid").write_text(str(gone))
    (models / ".running.lock" / "pid").write_text(str(os.getpid()))  # on-disk reservations are no more
    with reserve_name(models, "running", exact=True):  # a run in progress: its snapshots stay
        assert sorted(sweep_leftovers(models, tmp)) == sorted(leftovers)
    assert all(p.exists() for p in live) and not any(p.exists() for p in leftovers)
    assert package_info(kept)["snapshot_bytes"] == 5000  # counted toward the package's size (and quotas)
    delete_package(models, "kept")
    assert not (models / ".kept.snapshots").exists()


def test_6_the_sweep_never_takes_a_package_named_like_snapshots(package, tmp_path):
    """A visitor's own package "x-snapshots" (no package "x" beside it) is a package, not a run's leftovers."""
    models = tmp_path / "models"
    tiny = load_package(package)
    save_package(models / "x-snapshots", tiny.model, tiny.tokenizer)
    save_package(models / "x.snapshots", tiny.model, tiny.tokenizer)
    assert sweep_leftovers(models, tmp_path) == []
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
def test_7_info_checks_what_loading_checks_and_never_prints_a_traceback(package, spoil, message, capsys):
    assert main(["info", "--model", str(package)]) == 0
    assert "tiny: en → de" in capsys.readouterr().out
    spoil(package)
    assert main(["info", "--model", str(package)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and message in err and "Traceback" not in err
    with pytest.raises(PackageError):
        check_package(package)


@pytest.mark.parametrize("field, value, message", [
    ("d_model", "wide", "d_model must be a number, not 'wide'"),
    ("lr", [1e-3], "lr must be a number"),
    ("tie_embeddings", "yes", "tie_embeddings must be true or false"),
    ("activation", 3, "activation must be text"),
    ("seed", 2**70, "seed must be a whole number from 0 to 9223372036854775807"),
])
def test_7_wrong_typed_form_values_name_their_field(field, value, message):
    from playground.training.form import build_config, preset_values

    with pytest.raises(TrainingError, match=message):
        build_config({**preset_values("tiny"), field: value})


@pytest.mark.parametrize("field, value", [("dropout", 1.5), ("dropout", -0.1), ("attention_dropout", 1.0)])
def test_7_a_dropout_outside_0_1_is_refused_before_training(field, value, capsys):
    """A probability outside [0, 1) would train on zeroed or rescaled activations (dropout.keep_mask does no check)."""
    from playground.cli.main import main
    from playground.training.form import build_config, preset_values

    label = field.replace("_", " ").capitalize()  # the form names the field and its range
    with pytest.raises(TrainingError, match=rf"{label} must be from 0 to below 1, not {value:g}"):
        build_config({**preset_values("tiny"), field: value})
    flag = "--" + field.replace("_", "-")
    assert main(["train", "--data", "builtin:reverse", "--out", "never-made", "--preset", "tiny", "--max-steps", "1",
                 flag, str(value)]) == 2
    err = capsys.readouterr().err
    assert "must be in [0, 1)" in err and "Traceback" not in err


def test_7_a_huge_decoding_seed_is_refused_with_a_message(package):
    from playground.ui.tabs.translate import decode_options, run_translation

    opts = decode_options("sample", 1.0, 0, 1.0, 2**70, 5, 1.0, 1, 20)
    with pytest.raises(PlaygroundError, match="seed must be a whole number from 0 to 9223372036854775807"):
        run_translation(str(package), ["a b"], opts)


def test_7_an_unexpected_error_reaches_the_page_without_its_details():
    from playground.ui.handlers import friendly

    @friendly
    def handler():
        raise ValueError(f"Overflow when unpacking long long in {REPO}")

    with pytest.raises(Exception) as shown:
        handler()
    assert "Something went wrong" in str(shown.value) and "Overflow" not in str(shown.value)
    assert str(REPO) not in str(shown.value)


# ----------------------------------------------------------------------------------------------------------
# The whole app under a memory limit, sent the hostile package and oversized forms


MEMORY_LIMIT = 6 * 1024**3  # a Space's reality, as the attack ran


def test_the_app_under_a_memory_limit_refuses_hostile_input_and_keeps_serving(package, tmp_path):
    from gradio_client import handle_file

    card_bomb = zip_claiming(package, tmp_path / "card-bomb.zip", CARD, 1_500_000_000)
    edit_json(package / TRAINING, lambda t: t.update(last={"bleu": "high"}))
    mistyped = zip_folder(package, tmp_path / "mistyped.zip")
    hostile = zip_folder(make_huge(package), tmp_path / "huge.zip")
    models = tmp_path / "models"
    with app_in_subprocess(models, MEMORY_LIMIT) as (server, client, _):
        oversized = dict(d_model=2048, n_heads=8, n_encoder_layers=6, n_decoder_layers=6, d_ff=8192,
                         max_steps=10, device="cpu")
        too_much_memory = dict(d_model=1024, n_heads=8, n_encoder_layers=6, n_decoder_layers=6, d_ff=4096,
                               batch_tokens=100_000, max_steps=10, device="cpu")
        assert "pairs kept" in client.predict("reverse", 0.05, api_name="/load_builtin")[0]
        for attempt in range(2):  # the second upload was the one that killed the server
            assert re.search("this server allows at most 300,000,000", refusal_of(
                client.predict(handle_file(str(hostile)), api_name="/import_model")))
        assert re.search(r"README\.md in the zip expands to 1,500,000,000 bytes", refusal_of(
            client.predict(handle_file(str(card_bomb)), api_name="/import_model")))
        assert re.search(r"last\.bleu: must be a number", refusal_of(
            client.predict(handle_file(str(mistyped)), api_name="/import_model")))
        assert re.search("this server allows at most 300,000,000", refusal_of(
            client.predict(api_name="/estimate", **oversized)))
        assert re.search(r"needs about [\d.]+ GB but cpu has [\d.]+ GB free", refusal_of(
            client.predict(api_name="/estimate", **too_much_memory)))
        assert re.search("this server allows at most 300,000,000", refusal_of(
            client.predict(model_name="oversized", api_name="/train", **oversized)))
        assert re.search(r"needs about [\d.]+ GB but cpu has [\d.]+ GB free", refusal_of(
            client.predict(model_name="too-much", api_name="/train", **too_much_memory)))
        # still serving, nothing written
        client.predict(None, api_name="/list_models")
        assert server.poll() is None
        assert "pairs kept" in client.predict("numbers", 0.05, api_name="/load_builtin")[0]
        status = Path(f"/proc/{server.pid}/status").read_text()
        peak = int(status.split("VmHWM:")[1].split()[0]) * 1024
        print(f"\npeak RSS of the app through the hostile suite: {peak / 1e6:.0f} MB (limit {MEMORY_LIMIT / 1e9:.1f} GB)")
        assert peak < 1.5 * GB
        assert not [p for p in models.iterdir()]  # no package, no leftover, no reservation
