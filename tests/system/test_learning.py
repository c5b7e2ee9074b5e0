"""A tiny model must really learn: the sequence-reversal task (seed article 002) on the built-in data."""

import time

import pytest

from playground.core.decode import translate
from playground.core.metrics import score
from playground.data.load import load_parallel
from playground.datasets.catalog import DATASETS_DIR
from playground.training.config import TrainConfig
from playground.training.inputs import TrainData
from playground.training.trainer import Trainer

ASSETS = DATASETS_DIR / "reverse"
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.slow
def test_tiny_model_learns_sequence_reversal(tmp_path):
    train = load_parallel(ASSETS / "train.tsv").pairs
    test = load_parallel(ASSETS / "test.tsv").pairs
    cfg = TrainConfig.of(d_model=64, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=256, dropout=0.0,
                      norm_placement="pre", tokenizer="word", vocab_size=100, max_sentence_tokens=16, batch_tokens=2560,
                      schedule="cosine", lr=5e-3, warmup_steps=100, max_steps=1000, eval_every=10_000,
                      eval_sentences=50, device="cpu")
    start = time.perf_counter()
    trainer = Trainer(cfg, TrainData(train, test[:50], "seq", "rev"), tmp_path / "reverse")
    for _ in trainer.run():
        pass
    hyps = [t.text for t in translate(trainer.model, trainer.tokenizer, [s for s, _ in test])]
    exact = score(hyps, [r for _, r in test]).exact_match
    print(f"reversal: {exact:.1%} exact match on {len(test)} held-out sequences in {time.perf_counter() - start:.0f} s")
    assert exact >= 0.95
