"""What several test files share: tiny settings and data that train in a second, a free port for a test server,
and the tiny model fixtures."""

import contextlib
import os
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from playground.core.model import Transformer, TransformerConfig
from playground.core.tokenizer import train_tokenizer
from playground.training.config import TrainConfig
from playground.training.inputs import TrainData

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
    values = dict(d_model=32, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=64, dropout=0.0,
                  tokenizer="word", vocab_size=50, max_len=16, batch_tokens=256, schedule="inverse_sqrt", lr=3e-3,
                  warmup_steps=10, max_steps=12, eval_every=6, eval_sentences=8, precision="fp32", device="cpu")
    return TrainConfig(**{**values, **changes})


# the same tiny model as CLI flags (the tokenizer included), for tests that train through `python -m playground train`
TINY_MODEL_FLAGS = ["--d-model", "32", "--n-heads", "2", "--n-encoder-layers", "1", "--n-decoder-layers", "1",
                    "--d-ff", "64", "--tokenizer", "word", "--vocab-size", "50"]
DATA = TrainData(reverse_pairs(80), reverse_pairs(10, seed=1), "seq", "rev", "reverse test")


def free_port() -> int:
    """A port nothing listens on now, for a test's own server on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def app_in_subprocess(models, memory_limit: int, **env: str):
    """The whole app in a subprocess on a free port under an address-space limit, as a stranger's requests meet it:
    yields (the server process, a gradio_client Client of it, its URL); the server ends with the block."""
    from gradio_client import Client

    port = free_port()
    code = ("import torch; torch.set_num_threads(1)\n"
            "from playground.ui.app import build_app\n"
            f"build_app({str(models)!r}).launch(server_name='127.0.0.1', server_port={port}, quiet=True)\n")
    server = subprocess.Popen([sys.executable, "-c", code], cwd=Path(__file__).resolve().parent.parent,
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
                client = Client(url, verbose=False)
            except Exception:  # noqa: BLE001 - not listening yet
                time.sleep(0.5)
        yield server, client, url
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op thread for tiny models: they gain nothing from a second one, and on a busy 2-core machine its
    spin-waits make them several times slower (measured up to 50x on a beam search)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def tokenizer():
    return train_tokenizer(PAIRS, kind="bpe", vocab_size=120)


@pytest.fixture
def model(tokenizer):
    torch.manual_seed(0)
    cfg = TransformerConfig(src_vocab_size=tokenizer.src_vocab_size, tgt_vocab_size=tokenizer.tgt_vocab_size,
                            d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=64, dropout=0.0,
                            max_len=32)
    return Transformer(cfg).eval()


def refusal_of(outputs) -> str:
    """The message of a refused UI action, as an API client gets it: playground.ui.handlers.answers puts it (⚠️ …) in one
    output and leaves every other output unchanged (Gradio's update without a value)."""
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    messages = [o for o in outputs if isinstance(o, str) and o.startswith("⚠️ ")]
    untouched = [o for o in outputs if o == {"__type__": "update"}]
    assert len(messages) == 1 and len(untouched) == len(outputs) - 1, f"not a refusal: {outputs}"
    return messages[0]
