"""The demo model shipped in models/ loads and translates the held-out mini-translation pairs."""


import pytest
from helpers import REPO

from playground.core.decode import translate
from playground.core.metrics import score
from playground.data.load import load_parallel
from playground.datasets.catalog import DATASETS_DIR
from playground.packages.store import load_package

DEMO = REPO / "models" / "demo-en-de"
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def demo():
    return load_package(DEMO)


def test_demo_model_meets_its_exact_match_bar_on_held_out_pairs(demo):
    held_out = load_parallel(DATASETS_DIR / "mini-translation" / "test.tsv").pairs
    hyps = [t.text for t in translate(demo.model, demo.tokenizer, [s for s, _ in held_out])]
    assert len(held_out) == 500
    assert score(hyps, [r for _, r in held_out]).exact_match >= 0.90


def test_demo_model_package_is_small_and_self_describing(demo):
    assert sum(p.stat().st_size for p in DEMO.iterdir()) < 20 * 1024**2
    assert not list(DEMO.glob("resume.*"))
    assert (demo.config["src_lang"], demo.config["tgt_lang"]) == ("en", "de")
    assert demo.training["data"]["train_pairs"] > 5000
