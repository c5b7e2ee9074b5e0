"""Checkpoint averaging: `average_packages`, the `average` command, and `average_last` at the end of training."""

import pytest
import torch
from helpers import DATA, tiny_cfg

from playground.cli.main import main
from playground.core.model import Transformer, TransformerConfig
from playground.core.tokenizer import train_tokenizer
from playground.errors import PackageError
from playground.packages.store import load_package, save_package
from playground.training.averaging import average_packages
from playground.training.events import Averaged
from playground.training.trainer import Trainer

pytestmark = pytest.mark.usefixtures("one_thread")


def saved_model(folder, tokenizer, seed: int, **changes):
    torch.manual_seed(seed)
    settings = {"d_model": 16, "n_heads": 2, "n_encoder_layers": 1, "n_decoder_layers": 1, "d_ff": 32,
                "max_positions": 32}
    cfg = TransformerConfig(src_vocab_size=tokenizer.src_vocab_size, tgt_vocab_size=tokenizer.tgt_vocab_size,
                            **{**settings, **changes})
    return save_package(folder, Transformer(cfg), tokenizer, src_lang="en", tgt_lang="de")


def test_average_of_two_packages_is_the_elementwise_mean_and_keeps_ties(tmp_path, tokenizer):
    first, second = saved_model(tmp_path / "a", tokenizer, seed=1), saved_model(tmp_path / "b", tokenizer, seed=2)
    assert main(["average", "--out", str(tmp_path / "mean"), str(first), str(second)]) == 0

    a, b, mean = (load_package(p).model for p in (first, second, tmp_path / "mean"))
    expected = {name: (x + y) / 2 for (name, x), y in zip(a.state_dict().items(), b.state_dict().values())}
    assert mean.state_dict().keys() == expected.keys()
    for name, tensor in mean.state_dict().items():
        torch.testing.assert_close(tensor, expected[name], msg=name)
    assert mean.output.weight is mean.tgt_embed.tokens.weight is mean.src_embed.tokens.weight


def test_packages_of_different_models_or_tokenizers_are_refused(tmp_path, tokenizer):
    base = saved_model(tmp_path / "base", tokenizer, seed=1)
    wider = saved_model(tmp_path / "wider", tokenizer, seed=1, d_ff=64)
    with pytest.raises(PackageError, match=r"model configs differ \(d_ff 32 vs 64\)"):
        average_packages([base, wider], tmp_path / "out")
    words = " ".join(f"w{i}" for i in range(tokenizer.src_vocab_size - 4))  # as many tokens, other ones
    other_tokenizer = train_tokenizer([(words, words)], kind="word", vocab_size=tokenizer.src_vocab_size)
    other = saved_model(tmp_path / "other", other_tokenizer, seed=1)
    with pytest.raises(PackageError, match="tokenizers differ"):
        average_packages([base, other], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_average_last_writes_the_mean_of_the_last_validation_snapshots(tmp_path):
    events = list(Trainer(tiny_cfg(max_steps=6, eval_every=2, average_last=2), DATA, tmp_path / "run").run())
    averaged = [e for e in events if isinstance(e, Averaged)]
    assert len(averaged) == 1 and averaged[0].steps == [4, 6] and events[-1].summary["averaged"] == averaged[0].path

    snapshots = sorted((tmp_path / ".run.snapshots").iterdir())
    assert [p.name for p in snapshots] == ["step-00000004", "step-00000006"]  # older ones are dropped
    four, six, mean = (load_package(p).model.state_dict() for p in (*snapshots, tmp_path / "run-avg"))
    for name in mean:
        torch.testing.assert_close(mean[name], (four[name] + six[name]) / 2, msg=name)
    torch.testing.assert_close(six, load_package(tmp_path / "run").model.state_dict())  # the last one is the package

    # a new run into the same folder starts a new set of snapshots
    list(Trainer(tiny_cfg(max_steps=2, eval_every=2, average_last=2), DATA, tmp_path / "run").run())
    assert [p.name for p in (tmp_path / ".run.snapshots").iterdir()] == ["step-00000002"]
