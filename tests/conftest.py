"""Fixtures the test folders share: one thread for tiny models, a tiny tokenizer and model, a saved package, a
Storage Bucket's semantics, data files, two finished runs to compare. Plain functions and constants live in
tests/helpers.py; tests/unit/conftest.py keeps Gradio and processes out of the unit tests."""

import os
from pathlib import Path

import pytest
import torch
from helpers import PAIRS, Bucket, reverse_pairs, train_two_runs

from playground.core.model import Transformer, TransformerConfig
from playground.core.tokenizer import train_tokenizer
from playground.packages.store import save_package

# no analytics requests from tests: set before any test module imports Gradio (nothing above imports it)
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")


@pytest.fixture(scope="session", autouse=True)
def one_thread():
    """One intra-op thread for every test (a test module may still name it, to say that it relies on it): tiny
    models gain nothing from a second one, and on a busy 2-core machine its spin-waits make them several times
    slower (measured up to 50x on a beam search; 5x on the unit tests' 8-step runs). A test about the machine's own
    thread count asks for machine_threads."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield threads
    torch.set_num_threads(threads)


@pytest.fixture
def machine_threads(one_thread):
    """The intra-op threads the process started with (the machine's cores), for the test's duration."""
    torch.set_num_threads(one_thread)
    yield
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tokenizer():
    return train_tokenizer(PAIRS, kind="bpe", vocab_size=120)


@pytest.fixture
def model(tokenizer):
    torch.manual_seed(0)
    cfg = TransformerConfig(src_vocab_size=tokenizer.src_vocab_size, tgt_vocab_size=tokenizer.tgt_vocab_size,
                            d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=64, dropout=0.0,
                            max_positions=32)
    return Transformer(cfg).eval()


@pytest.fixture
def package(tmp_path, model, tokenizer) -> Path:
    return save_package(tmp_path / "src" / "tiny", model, tokenizer, src_lang="en", tgt_lang="de",
                        training={"steps": 3, "epochs": 0.5, "wall_s": 1.0, "device": "cpu", "last": {"bleu": 12.5}})


@pytest.fixture
def bucket(monkeypatch) -> Bucket:
    return Bucket(monkeypatch)


@pytest.fixture(scope="module")
def data_files(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("data")
    for name, pairs in (("train.tsv", reverse_pairs(80)), ("val.tsv", reverse_pairs(10, seed=1))):
        (folder / name).write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    return folder / "train.tsv", folder / "val.tsv"


@pytest.fixture(scope="module")
def tiny():
    tokenizer = train_tokenizer([("a b c", "c b a"), ("b c d", "d c b")] * 3, kind="word", vocab_size=20)
    cfg = TransformerConfig(tokenizer.src_vocab_size, tokenizer.tgt_vocab_size, d_model=8, n_heads=2,
                            n_encoder_layers=1, n_decoder_layers=1, d_ff=16, max_positions=12)
    return Transformer(cfg), tokenizer


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Two finished runs, "slow" and "fast", that differ in their learning rate only."""
    return train_two_runs(tmp_path_factory.mktemp("models"))
