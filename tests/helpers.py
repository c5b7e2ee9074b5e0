"""Plain functions and constants the tests share: tiny data and settings that train in a second, the repository's
paths, the app served in this process or in a subprocess with a gradio_client Client of it, and small makers of
packages and files. Gradio is imported only inside the functions that serve the app, so unit tests can import this."""

from __future__ import annotations

import contextlib
import errno
import functools
import itertools
import json
import os
import random
import resource
import shutil
import socket
import struct
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

import pytest
import torch

from playground.core.model import Transformer, TransformerConfig
from playground.core.tokenizer import train_tokenizer
from playground.packages.format import CONFIG, WEIGHTS
from playground.packages.store import save_package
from playground.serving.library import Library
from playground.serving.quotas import Quotas
from playground.serving.visitors import Visitor
from playground.training.config import TrainConfig
from playground.training.events import Done, Step
from playground.training.inputs import TrainData
from playground.training.trainer import run_training

if TYPE_CHECKING:
    from gradio_client import Client


# --------------------------------------------------------------------------------------------------------------------
# Paths, and tiny data, settings and models that train in a second


REPO = Path(__file__).resolve().parent.parent


DEMO = REPO / "models" / "demo-en-de"


PAIRS = [("the cat sees the dog", "die Katze sieht den Hund"), ("a dog runs", "ein Hund läuft"),
         ("the small bird sings", "der kleine Vogel singt"), ("we see a red ball", "wir sehen einen roten Ball")] * 3


WORDS = "a b c d e f g h i j".split()


def reverse_pairs(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    pairs = []
    for _ in range(n):
        length = int(torch.randint(3, 7, (1,), generator=g))
        seq = [WORDS[int(i)] for i in torch.randint(0, len(WORDS), (length,), generator=g)]
        pairs.append((" ".join(seq), " ".join(reversed(seq))))
    return pairs


def tiny_cfg(**changes) -> TrainConfig:
    values = dict(d_model=32, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=64, dropout=0.0, tokenizer="word",
                  vocab_size=50, max_sentence_tokens=16, batch_tokens=256, schedule="inverse_sqrt", lr=3e-3,
                  warmup_steps=10, max_steps=12, eval_every=6, eval_sentences=8, precision="fp32", device="cpu")
    return TrainConfig.of(**{**values, **changes})


# the same tiny model as CLI flags (the tokenizer included), for tests that train through `python -m playground train`
TINY_MODEL_FLAGS = ["--d-model", "32", "--n-heads", "2", "--n-encoder-layers", "1", "--n-decoder-layers", "1",
                    "--d-ff", "64", "--tokenizer", "word", "--vocab-size", "50"]


DATA = TrainData(reverse_pairs(80), reverse_pairs(10, seed=1), "seq", "rev", "reverse test")


# Adam's first steps move each weight by about ±lr wherever |gradient| >> eps, so a gradient that is zero in theory
# but rounding noise in practice (the key biases, which softmax ignores) could flip sign between two summation
# orders; eps = 1e-6 keeps such noise from moving weights and leaves every real gradient's update as it is.
TINY_FLAGS = [*TINY_MODEL_FLAGS, "--dropout", "0", "--max-sentence-tokens", "16", "--batch-tokens", "256",
              "--schedule", "inverse_sqrt", "--lr", "3e-3", "--warmup-steps", "10", "--eps", "1e-6",
              "--eval-every", "100", "--eval-sentences", "4", "--precision", "fp32", "--device", "cpu"]


def events_of(trainer, stop_after=None):
    events = []
    for event in trainer.run():
        events.append(event)
        if stop_after is not None and isinstance(event, Step) and event.step == stop_after:
            trainer.stop()
    return events


def train_two_runs(folder: Path) -> Path:
    """Two finished runs in `folder`, "slow" and "fast", that differ in their learning rate only."""
    words = [["a", "b", "c"], ["c", "d"], ["d", "e", "a", "b"], ["b", "b", "c", "e"], ["e", "d", "c"], ["a", "c", "e"]]
    pairs = [(" ".join(w), " ".join(reversed(w))) for w in words] * 6
    settings = dict(d_model=16, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=32, dropout=0.0,
                    tokenizer="word", vocab_size=30, max_sentence_tokens=8, batch_tokens=64, schedule="inverse_sqrt",
                    warmup_steps=4, max_steps=8, eval_every=4, eval_sentences=4, precision="fp32", device="cpu")
    data = TrainData(pairs, pairs[:4], "seq", "rev", "reversal")
    for name, lr in (("slow", 1e-3), ("fast", 3e-3)):
        events = list(run_training(TrainConfig.of(lr=lr, **settings), data, folder / name))
        assert isinstance(events[-1], Done), events[-1]
    return folder


def peaked(model: Transformer) -> Transformer:
    """A random model made confident, so searches end with <eos> instead of wandering."""
    with torch.no_grad():
        model.output.weight.mul_(8)
    return model


def tiny_model(tokenizer, **overrides) -> Transformer:
    torch.manual_seed(0)
    cfg = TransformerConfig(src_vocab_size=tokenizer.src_vocab_size, tgt_vocab_size=tokenizer.tgt_vocab_size,
                            d_model=32, n_heads=4, n_encoder_layers=1, n_decoder_layers=1, d_ff=64, dropout=0.0,
                            max_positions=34, joint_vocab=tokenizer.joint, **overrides)
    return Transformer(cfg).eval()


def tiny_package(folder: Path, history: int = 0) -> Path:
    """A valid tiny package; `history` steps of recorded loss and learning rate make its training.json big."""
    tokenizer = train_tokenizer([("a b c", "c b a"), ("b c d", "d c b")] * 3, kind="word", vocab_size=20)
    cfg = TransformerConfig(tokenizer.src_vocab_size, tokenizer.tgt_vocab_size, d_model=8, n_heads=2,
                            n_encoder_layers=1, n_decoder_layers=1, d_ff=16, max_positions=12)
    torch.manual_seed(0)
    training = {"steps": history, "epochs": 1.0, "wall_s": 1.0, "device": "cpu"}
    if history:
        training["history"] = {"steps": list(range(1, history + 1)),
                               "loss": [round(1 + (i % 997) / 1000, 4) for i in range(history)],
                               "lr": [round((i % 991) / 1e6, 6) for i in range(history)], "evals": [], "probe": []}
    return save_package(folder, Transformer(cfg), tokenizer, training=training)


def make_package(folder: Path, tokenizer, **shape) -> Path:
    torch.manual_seed(0)
    cfg = TransformerConfig(tokenizer.src_vocab_size, tokenizer.tgt_vocab_size, **shape)
    return save_package(folder, Transformer(cfg).eval(), tokenizer, src_lang="en", tgt_lang="de",
                        training={"steps": 1, "wall_s": 1.0})


# --------------------------------------------------------------------------------------------------------------------
# The app served for a test: in this process, or in a subprocess under a memory limit


# Each xdist worker takes its servers' ports from a share of its own of 20000-32767, below Linux's ephemeral ports
# (32768-60999): a port the kernel chose (bind to 0) is free only until the test's server binds it, and in that gap
# the kernel may give the same port to another worker's free_port or to an outgoing connection. Each starts at a random
# place in its share, so two runs on one machine do not walk the same ports in step.
_WORKERS = max(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1), 1)
_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:] or 0)
_SHARE = 12_768 // _WORKERS
_FIRST_PORT = 20_000 + _SHARE * _WORKER
_next_ports = itertools.islice(itertools.cycle(range(_FIRST_PORT, _FIRST_PORT + _SHARE)),
                               random.SystemRandom().randrange(_SHARE), None)


def free_port() -> int:
    """A port nothing listens on now, for a test's own server on 127.0.0.1: the next free one of this worker's
    share, so no other worker of the run is given it."""
    for port in itertools.islice(_next_ports, _SHARE):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use (another program's, or a closed server's in TIME_WAIT)
            return port
    raise RuntimeError("no free port left in this test worker's share")


def client_of(url: str, **options) -> Client:
    """A gradio_client Client of the app at `url`: one client is one browser session."""
    from gradio_client import Client

    return Client(url, verbose=False, **options)


@contextlib.contextmanager
def launched(demo, **options) -> Iterator[str]:
    """A Gradio app served by this process on a free port of 127.0.0.1: yields its URL; it closes with the block."""
    port = free_port()
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True, **options)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        demo.close()


@contextlib.contextmanager
def app_in_subprocess(models, memory_limit: int, **env: str):
    """The whole app in a subprocess on a free port under an address-space limit, as a stranger's requests meet it
    (launched with the app's own options: its request bounds included): yields (the server process, a gradio_client
    Client of it, its URL); the server ends with the block."""
    port = free_port()
    code = ("import torch; torch.set_num_threads(1)\n"
            "from playground.ui.app import build_app, launch_options\n"
            f"build_app({str(models)!r}).launch(server_name='127.0.0.1', server_port={port}, quiet=True, "
            "**launch_options())\n")
    server = subprocess.Popen([sys.executable, "-c", code], cwd=REPO,
                              env={**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", **env},
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit)))
    url = f"http://127.0.0.1:{port}/"
    try:
        client, deadline = None, time.monotonic() + 180
        while client is None:
            assert server.poll() is None, server.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline, "the app did not start"
            try:
                client = client_of(url)
            except Exception:  # noqa: BLE001 - not listening yet
                time.sleep(0.5)
        yield server, client, url
    finally:
        server.terminate()
        server.wait(timeout=30)


def refusal_of(outputs) -> str:
    """The message of a refused UI action, as an API client gets it: playground.ui.handlers.said_beside puts it (⚠️ …)
    in one output and leaves every other output unchanged (Gradio's update without a value)."""
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    messages = [o for o in outputs if isinstance(o, str) and o.startswith("⚠️ ")]
    untouched = [o for o in outputs if o == {"__type__": "update"}]
    assert len(messages) == 1 and len(untouched) == len(outputs) - 1, f"not a refusal: {outputs}"
    return messages[0]


def visitor(url: str, address: str) -> Client:
    """A gradio_client session that comes from this client address (the server trusts X-Forwarded-For, as on a
    Space behind its proxy)."""
    return client_of(url, headers={"X-Forwarded-For": address})


MB = 1024**2  # as the limits' environment variables count


# --------------------------------------------------------------------------------------------------------------------
# Hostile packages made on the spot, small on disk


def edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def zip_folder(folder: Path, dest: Path) -> Path:
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(folder.iterdir()):
            if f.is_file():
                zf.write(f, f"{folder.name}/{f.name}")
    return dest


# the 0.94B-parameter package: d_model 2048, d_ff 8192, 8+8 layers
HUGE = dict(d_model=2048, d_ff=8192, n_heads=8, n_encoder_layers=8, n_decoder_layers=8)


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
    claiming_weights(folder / WEIGHTS, TransformerConfig(**json.loads((folder / CONFIG).read_text())["model"]))
    return folder


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


def spoil_tokenizer(folder: Path, part: str, value: dict) -> Path:
    edit_json(folder / "tokenizer.json", lambda t: t.update({part: value}))
    return folder


# the tokenizer pipelines of the row 2 and smaller findings, as they would sit in a package's tokenizer.json
NORMALIZER_BOMB = ("normalizer", {"type": "Replace", "pattern": {"String": "x"}, "content": "y" * 1_000_000})


# the row-1 package: 64 heads, 6+6 layers, 4,096 positions, yet only ~0.4 M parameters
WIDE = dict(d_model=64, n_heads=64, n_encoder_layers=6, n_decoder_layers=6, d_ff=64, max_positions=4096, dropout=0.0)


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# --------------------------------------------------------------------------------------------------------------------
# Stand-ins: visitors of a shared Library, a Storage Bucket's semantics, the Hub's API, cgroup files


ALICE, BOB = Visitor("anon:alice"), Visitor("anon:bob")


def shared_library(models: Path) -> Library:
    return Library(models, shared=True, quotas=Quotas())


def named(names, label: str) -> str:
    """The one package in `names` that a shared app saved under `label`: a visitor's code, a dash, the label
    (Library.name_tag); AssertionError when there is not exactly one."""
    found = [n for n in names if len(n) == 7 + len(label) and n[6] == "-" and n.endswith(label)
             and all(c in "0123456789abcdef" for c in n[:6])]
    assert len(found) == 1, (label, list(names))
    return found[0]


class Bucket:
    """A Storage Bucket mounted into a Space, imitated in this process (see tests/unit/test_library_on_a_bucket.py):
    mkdir of an existing folder succeeds, chmod changes nothing, rename copies then deletes (`cut_next_rename` makes
    the next one die half-way), a hard link fails with ENOTSUP (hf-mount's answer for a file not yet committed:
    src/virtual_fs/mod.rs, `link`), and files younger than `lag` seconds do not show yet."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.lag, self.cut, self.modes = 0.0, False, {}
        real_mkdir, real_unlink, real_stat = os.mkdir, os.unlink, os.stat
        real_copy2, real_copytree, real_rmtree = shutil.copy2, shutil.copytree, shutil.rmtree
        real_exists, real_is_dir, real_is_file, real_iterdir = Path.exists, Path.is_dir, Path.is_file, Path.iterdir

        def mkdir(path, mode=0o777, *, dir_fd=None):
            if not os.path.isdir(path):
                real_mkdir(path, mode)

        def chmod(path, mode, *args, **kwargs):
            self.modes[os.fspath(path)] = mode

        def replace(src, dst, *args, **kwargs):
            src, dst = os.fspath(src), os.fspath(dst)
            if os.path.isdir(src):
                if os.path.isdir(dst):
                    if os.listdir(dst):
                        raise OSError(39, "Directory not empty", dst)
                    os.rmdir(dst)
                real_copytree(src, dst, copy_function=real_copy2)
                real_rmtree(src)
                return
            if os.path.exists(dst):
                real_unlink(dst)
            if self.cut:
                self.cut = False
                raise OSError(5, "rename cut in half (the process died)", dst)
            real_copy2(src, dst)
            real_unlink(src)

        def link(src, dst, *args, **kwargs):
            raise OSError(errno.ENOTSUP, "Operation not supported", os.fspath(dst))

        def young(path: Path) -> bool:
            try:
                return self.lag > 0 and time.time() - real_stat(path).st_ctime < self.lag
            except OSError:
                return False

        monkeypatch.setattr(os, "mkdir", mkdir)
        monkeypatch.setattr(os, "chmod", chmod)
        monkeypatch.setattr(os, "replace", replace)
        monkeypatch.setattr(os, "rename", replace)
        monkeypatch.setattr(os, "link", link)
        monkeypatch.setattr(Path, "exists", lambda p, **kw: real_exists(p, **kw) and not young(p))
        monkeypatch.setattr(Path, "is_dir", lambda p, **kw: real_is_dir(p, **kw) and not young(p))
        monkeypatch.setattr(Path, "is_file", lambda p, **kw: real_is_file(p, **kw) and not young(p))
        monkeypatch.setattr(Path, "iterdir", lambda p: (c for c in real_iterdir(p) if not young(c)))

    def cut_next_rename(self) -> None:
        self.cut = True


class RecordingApi:
    """What HfApi would receive: the repo created and the files of the uploaded folder (read during the call,
    since the staging folder is removed afterwards)."""

    def __init__(self, fail: Exception | None = None):
        self.repo, self.files, self.fail = None, {}, fail

    def create_repo(self, repo_id, repo_type, private, exist_ok):
        if self.fail:
            raise self.fail
        self.repo = dict(repo_id=repo_id, repo_type=repo_type, private=private, exist_ok=exist_ok)

    def upload_folder(self, repo_id, repo_type, folder_path, commit_message):
        root = Path(folder_path)
        self.files = {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}
        self.upload = dict(repo_id=repo_id, repo_type=repo_type, commit_message=commit_message)


HOST_CPUS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def v2_tree(tmp_path: Path, limits: dict[str, str], own: str = "/") -> tuple[Path, Path]:
    """A cgroup v2 hierarchy: {"": root's cpu.max, "a": a/cpu.max, …} and the /proc/self/cgroup naming `own`."""
    root = tmp_path / "cgroup"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    for folder, value in limits.items():
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / "cpu.max").write_text(value + "\n")
    proc = tmp_path / "proc-self-cgroup"
    proc.write_text(f"0::{own}\n")
    return root, proc


@functools.cache
def builtin_split(name: str, seed: int = 0):
    """A built-in dataset's generated split (train and test pairs), made once per test session."""
    from playground.datasets.catalog import BUILTIN_DATASETS

    return BUILTIN_DATASETS[name].generate(seed)


class HubStandIn:
    """What huggingface_hub.HfApi answers for a repo whose files are those of `folder` (plus `extra`, listed with
    their sizes only): model_info's siblings and hf_hub_download; `downloads` records what was fetched."""

    def __init__(self, folder: Path, extra: dict[str, int] | None = None, fail: Exception | None = None,
                 config: dict | None = None):
        self.folder, self.extra, self.fail, self.config = folder, extra or {}, fail, config
        self.downloads: list[str] = []

    def model_info(self, repo_id, files_metadata=False):
        if self.fail:
            raise self.fail
        assert files_metadata, "the sizes come from the Hub's file metadata"
        files = {p.name: p.stat().st_size for p in self.folder.iterdir() if p.is_file()}
        if self.config is not None:
            files["config.json"] = len(json.dumps(self.config).encode())
        files.update(self.extra)
        return SimpleNamespace(siblings=[SimpleNamespace(rfilename=n, size=s) for n, s in files.items()])

    def hf_hub_download(self, repo_id, filename, local_dir):
        self.downloads.append(filename)
        target = Path(local_dir) / filename
        if filename == "config.json" and self.config is not None:
            target.write_text(json.dumps(self.config), encoding="utf-8")
        else:
            shutil.copyfile(self.folder / filename, target)
        return str(target)
