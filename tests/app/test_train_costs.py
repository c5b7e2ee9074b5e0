"""Cost before work, through the app as a browser or an API caller meets it: a vocabulary of 10^9 (which made the
tokenizer trainer ask for 70 GB and the server die) and a learning rate of -1 (which trained to a val loss of 196,420
and saved the model) are refused at once, in the words the form says beside the field, before any tokenizer is
trained or any package reserved."""

from __future__ import annotations

import pytest
from helpers import client_of, launched, refusal_of

from playground.ui.app import build_app

TINY = dict(d_model=32, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=64, vocab_size=200,
            max_sentence_tokens=32, batch_tokens=512, max_steps=5, max_minutes=0, max_epochs=0, eval_every=5,
            eval_sentences=4, warmup_steps=2, lr=3e-3, schedule="inverse_sqrt", precision="fp32", device="cpu")


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def client(models_dir):
    with launched(build_app(models_dir)) as url:
        session = client_of(url)
        session.predict("reverse", 0.05, api_name="/load_builtin")
        yield session


@pytest.fixture(autouse=True)
def no_tokenizer_is_trained(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a tokenizer was trained for a run that should have been refused before")
    monkeypatch.setattr("playground.training.inputs.train_tokenizer", refuse)


@pytest.mark.parametrize("setting, value, words", [
    ("vocab_size", 10**9, "Vocabulary size must be from 8 to 1,000,000, not 1,000,000,000: training its tokenizer "
                          "alone would reserve about 67.1 GB"),
    ("lr", -1, "Learning rate must be above 0, not -1"),
])
def test_a_costly_or_senseless_setting_is_refused_before_any_work(client, models_dir, setting, value, words):
    form = {**TINY, setting: value}
    status = refusal_of(client.predict(model_name="refused", api_name="/train", **form))
    assert words in status
    assert not (models_dir / "refused").exists()  # no package reserved, no tokenizer trained (the fixture)
    assert words in refusal_of(client.predict(api_name="/estimate", **form))
    line, chart = client.predict(api_name="/lr_preview", **form)  # the parameter line as it is typed
    assert line.startswith("⚠️") and words in line


def test_the_page_says_no_operator_variable_and_no_command():
    from playground.errors import PlaygroundError
    from playground.ui.handlers import refusal

    message = ("The text has 9 characters; one request may send at most 3 here (the operator sets "
               "PLAYGROUND_MAX_REQUEST_CHARS). Send less, or use `python -m playground translate --input FILE` for "
               "files.")
    assert refusal(PlaygroundError(message)) == "⚠️ The text has 9 characters; one request may send at most 3 here. " \
                                                "Send less."


def test_the_glossary_explains_the_words_of_the_train_and_inside_tabs():
    from playground.ui.texts import GLOSSARY

    for term in ("**d_model**", "**d_ff**", "**Adam β₁, β₂, ε**", "**BPE-dropout**", "**Principal components**"):
        assert term in GLOSSARY
