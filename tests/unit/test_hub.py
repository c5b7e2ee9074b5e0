"""Pushing to the Hub, up to the network: a stand-in for huggingface_hub.HfApi records what would be sent."""

from __future__ import annotations

import pytest
import yaml
from helpers import DEMO, RecordingApi

from playground.errors import PlaygroundError
from playground.packages.card import hub_card
from playground.serving.hub import hub_token, push_package


def front_matter(card: str) -> dict:
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n")[1])


def test_push_sends_the_package_and_its_card():
    api = RecordingApi()
    url = push_package(DEMO, "someone/demo-en-de", token="hf_x", private=True, api=api)
    assert url == "https://huggingface.co/someone/demo-en-de"
    assert api.repo == dict(repo_id="someone/demo-en-de", repo_type="model", private=True, exist_ok=True)
    assert api.upload["repo_id"] == "someone/demo-en-de"
    assert set(api.files) == {"config.json", "model.safetensors", "tokenizer.json", "training.json", "README.md"}
    assert api.files["model.safetensors"] == (DEMO / "model.safetensors").read_bytes()
    card = api.files["README.md"].decode()
    meta = front_matter(card)
    assert meta["language"] == ["en", "de"] and meta["pipeline_tag"] == "translation"
    assert meta["library_name"] == "transformer-playground" and "license" not in meta
    results = meta["model-index"][0]["results"][0]
    assert {m["type"]: m["value"] for m in results["metrics"]} == {"bleu": 96.69, "chrf": 99.13}
    assert "python -m playground translate" in card and "AutoModelForSeq2SeqLM" not in card


def test_push_with_the_transformers_export_and_a_license():
    api = RecordingApi()
    push_package(DEMO, "someone/demo", token="hf_x", private=False, with_transformers=True, license="mit", api=api)
    assert api.repo["private"] is False
    assert {"transformers/config.json", "transformers/model.safetensors", "transformers/tokenizer.json",
            "transformers/generation_config.json", "transformers/README.md"} <= set(api.files)
    card = api.files["README.md"].decode()
    assert front_matter(card)["license"] == "mit"
    assert 'from_pretrained("someone/demo", subfolder="transformers")' in card
    assert front_matter(api.files["transformers/README.md"].decode())["library_name"] == "transformers"


@pytest.mark.parametrize("repo_id", ["demo", "a/b/c", "someone/has space", ""])
def test_bad_repo_ids_are_refused_before_any_request(repo_id):
    api = RecordingApi()
    with pytest.raises(PlaygroundError, match="your-user-name/model-name"):
        push_package(DEMO, repo_id, token="hf_x", api=api)
    assert api.repo is None and not api.files


def test_hub_errors_become_messages():
    with pytest.raises(PlaygroundError, match="refused the upload.*401"):
        push_package(DEMO, "someone/demo", token="hf_bad", api=RecordingApi(fail=RuntimeError("401 Unauthorized")))


def test_token_comes_from_sign_in_or_environment(monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(PlaygroundError, match="Sign in"):
        hub_token(None)
    monkeypatch.setenv("HF_TOKEN", "hf_env")
    assert hub_token(None) == "hf_env" and hub_token("hf_oauth") == "hf_oauth"


def test_shared_app_never_lends_the_operators_token(monkeypatch):
    """An anonymous visitor of a shared Space must not push with the operator's HF_TOKEN."""
    monkeypatch.setenv("HF_TOKEN", "hf_operator")
    with pytest.raises(PlaygroundError, match="Sign in"):
        hub_token(None, shared=True)
    assert hub_token("hf_visitor", shared=True) == "hf_visitor"


def test_card_without_metrics_or_language_codes():
    config = {"name": "m", "src_lang": "src", "tgt_lang": "tgt", "num_parameters": 10,
              "model": {"d_model": 8, "n_heads": 2, "n_encoder_layers": 1, "n_decoder_layers": 1, "d_ff": 8,
                        "activation": "relu", "positional_encoding": "sinusoidal", "norm_placement": "post",
                        "tie_embeddings": True, "joint_vocab": False, "src_vocab_size": 9, "tgt_vocab_size": 7},
              "tokenizer": {"kind": "bpe", "joint": False}}
    card = hub_card(config, None, transformers_folder=True)
    meta = front_matter(card)
    assert "language" not in meta and "model-index" not in meta and meta["pipeline_tag"] == "translation"
    assert 'subfolder="target_tokenizer"' in card
