"""Fine-tuning in the app: "Start from" a model (the Train tab's /train and /start_from endpoints) in shared mode,
where another visitor's model reads as a missing one; and a fine-tuned run cut into calls (ZeroGPU's chunks)
starting from its base as the run in one piece does."""

from __future__ import annotations

import json

import pytest
from helpers import DATA, named, refusal_of, tiny_cfg
from test_shared_space import serving, two_visitors_and_a_run

from playground.packages.store import load_package
from playground.training.chunked import ChunkedRun, train_chunk
from playground.training.config import TrainConfig
from playground.training.events import Done, Step
from playground.training.form import FIELDS
from playground.training.presets import FINE_TUNE, PRESETS
from playground.training.trainer import Trainer

TINY = dict(d_model=32, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=64, vocab_size=200,
            max_sentence_tokens=32, batch_tokens=512, max_steps=6, max_minutes=0, max_epochs=0, eval_every=100,
            eval_sentences=4, warmup_steps=10, lr=3e-3, schedule="inverse_sqrt", precision="fp32", device="cpu", seed=7)


@pytest.fixture(scope="module")
def space(tmp_path_factory):
    models_dir = tmp_path_factory.mktemp("space-models")
    with serving(models_dir, True) as url:
        yield url, models_dir


def test_a_visitor_fine_tunes_their_own_model_and_never_another_visitors(space):
    url, models_dir = space
    alice, bob, done = two_visitors_and_a_run(url, "base", TINY)
    assert done.startswith("✅ **Done**"), done
    base = named(json.loads((models_dir / ".owners.json").read_text()), "base")

    # choosing it: the fine-tune preset, the model's own settings in the form
    chosen = alice.predict("tiny", base, api_name="/start_from")
    fields = dict(zip(FIELDS, chosen[1:]))
    assert chosen[0] == FINE_TUNE and fields["lr"]["value"] == PRESETS[FINE_TUNE].settings["lr"]
    assert fields["d_model"]["value"] == 32 and fields["d_model"]["interactive"] is False  # the model's, locked
    longest = fields["max_sentence_tokens"]
    assert longest["value"] == 32 and longest.get("interactive") is not False  # the run's own
    # the form's d_model is not the model's: the model's own settings are used
    done = alice.predict(model_name="tuned", start_from=base, api_name="/train",
                         **{**TINY, "lr": 1e-4, "max_steps": 3, "d_model": 64})[0]
    assert done.startswith("✅ **Done**"), done
    tuned = load_package(models_dir / named(json.loads((models_dir / ".owners.json").read_text()), "tuned"))
    assert tuned.training["base"] == {"name": base} and tuned.model.cfg == load_package(models_dir / base).model.cfg

    # Bob: Alice's model does not exist for him, in the very words of a missing one
    for api_name, args, kwargs in (("/train", (), {"model_name": "mine", **TINY}), ("/start_from", ("tiny",), {}),
                                   ("/apply_preset", ("tiny",), {})):
        theirs = refusal_of(bob.predict(*args, start_from=base, api_name=api_name, **kwargs))
        missing = refusal_of(bob.predict(*args, start_from="nobodys", api_name=api_name, **kwargs))
        assert f"no model package named '{base}'" in theirs, (api_name, theirs)
        assert theirs.replace(base, "nobodys") == missing, api_name


def test_a_fine_tune_in_several_calls_starts_from_the_base(tmp_path, one_thread):
    base = tmp_path / "base"
    assert isinstance(list(Trainer(tiny_cfg(max_steps=4, eval_every=100, eval_sentences=2), DATA, base).run())[-1],
                      Done)
    cfg = TrainConfig.of(**{**PRESETS[FINE_TUNE].settings, "max_minutes": None, "max_steps": 200, "eval_every": 1000,
                            "eval_sentences": 2, "max_sentence_tokens": 16, "precision": "fp32", "device": "cpu"})
    whole = [e for e in Trainer(cfg, DATA, tmp_path / "whole", init_from=base).run() if isinstance(e, Step)]
    run = ChunkedRun(cfg, DATA, tmp_path / "chunked", chunk_s=max(whole[-1].elapsed / 3, 1.5), run_chunk=train_chunk,
                     init_from=base)
    steps = [e for e in run.run() if isinstance(e, Step)]
    assert run.chunks >= 2
    assert [e.loss for e in steps] == [e.loss for e in whole]  # the same start, the same curve
    assert load_package(tmp_path / "chunked").training["base"] == {"name": "base"}
