import pytest
import torch

from playground.model import Transformer, TransformerConfig
from playground.tokenizer import train_tokenizer

PAIRS = [("the cat sees the dog", "die Katze sieht den Hund"), ("a dog runs", "ein Hund läuft"),
         ("the small bird sings", "der kleine Vogel singt"), ("we see a red ball", "wir sehen einen roten Ball")] * 3


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
