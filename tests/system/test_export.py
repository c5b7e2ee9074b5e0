"""Exports to 🤗 transformers and CTranslate2 translate exactly as the playground does.

Models: small ones trained for a few seconds (a random model repeats one token, where float rounding flips
near-ties; a little training gives varied, <eos>-terminated outputs with clear winners) and the shipped demo model.
Sentences are grouped by source length so every group shares our per-sentence length limit (2 x source + 10) and
needs no padding."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import ctranslate2
import pytest
import torch
from helpers import DEMO
from marian_checkpoints import make_marian_checkpoint
from marian_checkpoints import sentences as marian_sentences
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from playground.core.decode import DecodeOptions, source_ids, translate
from playground.core.model import Transformer, TransformerConfig
from playground.core.positional import sinusoidal_table
from playground.core.sequences import pad_batch
from playground.core.tokenizer import PairTokenizer, train_tokenizer
from playground.datasets.catalog import DATASETS_DIR
from playground.errors import PlaygroundError
from playground.export import export_package
from playground.export.ctranslate2 import translate_with_ctranslate2
from playground.export.transformers import TARGET_TOKENIZER_DIR
from playground.packages.marian import import_marian
from playground.packages.marian_weights import residual_permutation
from playground.packages.store import load_package, save_package

TEST_TSV = DATASETS_DIR / "mini-translation" / "test.tsv"
ROWS = [line.split("\t") for line in TEST_TSV.read_text("utf-8").splitlines()[1:]]
SENTENCES = [src for src, _ in ROWS[:50]]
CONFIGS = {  # name: (settings, joint vocabulary)
    "tiny-pre-LN": (dict(norm_placement="pre", n_encoder_layers=2, n_decoder_layers=2), True),
    "small-post-LN": (dict(norm_placement="post", n_encoder_layers=3, n_decoder_layers=3), True),
    "post-LN-separate-gelu": (dict(norm_placement="post", activation="gelu", n_encoder_layers=2,
                                   n_decoder_layers=2), False),
}


@pytest.fixture(scope="module")
def tokenizers():
    pairs = [tuple(row) for row in ROWS[50:1050]]
    return {True: train_tokenizer(pairs, vocab_size=300), False: train_tokenizer(pairs, vocab_size=250, joint=False)}


def quick_package(folder: Path, tokenizer: PairTokenizer, steps: int = 40, **settings) -> Path:
    """A small model trained for `steps` Adam steps on mini-translation (a few seconds), saved as a package."""
    torch.manual_seed(0)
    cfg = TransformerConfig(src_vocab_size=tokenizer.src_vocab_size, tgt_vocab_size=tokenizer.tgt_vocab_size,
                            d_model=64, n_heads=4, d_ff=128, dropout=0.0, max_positions=48, joint_vocab=tokenizer.joint,
                            **settings)
    model = Transformer(cfg)
    pairs = ROWS[50:1050]
    src = pad_batch([ids + [cfg.eos_id] for ids in tokenizer.encode_src_batch([s for s, _ in pairs])],
                    pad_id=cfg.pad_id)
    tgt = pad_batch([[cfg.bos_id] + ids + [cfg.eos_id] for ids in tokenizer.encode_tgt_batch([t for _, t in pairs])],
                    pad_id=cfg.pad_id)
    src, tgt = src[:, : cfg.max_positions], tgt[:, : cfg.max_positions + 1]  # the few longest pairs lose their ends
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for step in range(steps):
        rows = torch.arange(step * 64, step * 64 + 64) % len(pairs)
        logits = model(src[rows], tgt[rows, :-1])
        loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), tgt[rows, 1:], ignore_index=cfg.pad_id)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return save_package(folder, model.eval(), tokenizer, src_lang="en", tgt_lang="de")


@pytest.fixture(scope="module")
def packages(tmp_path_factory, tokenizers):
    root = tmp_path_factory.mktemp("export")
    return {name: quick_package(root / name, tokenizers[joint], **settings)
            for name, (settings, joint) in CONFIGS.items()} | {"demo": DEMO}


def by_source_length(package, sentences) -> list[tuple[int, list[int]]]:
    """(our length limit, indices) for each group of sentences whose sources have the same number of tokens."""
    groups = defaultdict(list)
    for i, src in enumerate(source_ids(package.tokenizer, sentences, package.model.cfg)):
        groups[len(src)].append(i)
    return [(min(2 * n + 10, package.model.cfg.max_positions - 1), idx) for n, idx in groups.items()]


def ours(package, method: str) -> list[str]:
    return [t.text for t in translate(package.model, package.tokenizer, SENTENCES, DecodeOptions(method=method))]


def agreement(a: list[str], b: list[str]) -> float:
    return sum(x == y for x, y in zip(a, b, strict=True)) / len(a)


@pytest.mark.parametrize("name", [*CONFIGS, "demo"])
def test_transformers_export_translates_like_the_playground(name, packages, tmp_path, one_thread):
    out = export_package(str(packages[name]), "transformers", str(tmp_path / "hf"))
    package = load_package(packages[name])
    model = AutoModelForSeq2SeqLM.from_pretrained(out, local_files_only=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(out, local_files_only=True)
    target = tokenizer if package.tokenizer.joint else AutoTokenizer.from_pretrained(out / TARGET_TOKENIZER_DIR)
    assert type(model).__name__ == ("PegasusForConditionalGeneration" if package.model.cfg.norm_placement == "pre"
                                    else "MarianMTModel")
    assert model.generation_config.decoder_start_token_id == package.model.cfg.bos_id
    assert tokenizer(SENTENCES[0]).input_ids == source_ids(package.tokenizer, SENTENCES[:1], package.model.cfg)[0]
    for method, beams in (("greedy", 1), ("beam", 5)):
        theirs = [""] * len(SENTENCES)
        for limit, idx in by_source_length(package, SENTENCES):
            batch = tokenizer([SENTENCES[i] for i in idx], return_tensors="pt")
            with torch.inference_mode():
                out_ids = model.generate(**batch, num_beams=beams, max_new_tokens=limit, length_penalty=1.0)
            for i, text in zip(idx, target.batch_decode(out_ids, skip_special_tokens=True)):
                theirs[i] = text
        expected = ours(package, method)
        assert len(set(expected)) > 10, "the test model should give varied translations"
        # ≥ 98%: one sentence in 50 may differ where two candidates' scores tie to float rounding (none did when
        # written)
        assert agreement(expected, theirs) >= 0.98, (method, [(a, b) for a, b in zip(expected, theirs) if a != b])


@pytest.mark.parametrize("name", [*CONFIGS, "demo"])
def test_ctranslate2_export_translates_like_the_playground(name, packages, tmp_path, one_thread):
    """float32 equals ours everywhere. int8 is checked on the trained demo model only: on the few-step test models
    most steps are near-ties that int8's rounding flips (measured: 60% agreement after 40 to 200 steps, 100% on the
    demo), which says nothing about a model worth serving."""
    package = load_package(packages[name])
    expected = ours(package, "greedy")
    for quantization, needed in (("float32", 1.0),) + ((("int8", 0.95),) if name == "demo" else ()):
        out = export_package(str(packages[name]), "ctranslate2", str(tmp_path / quantization), quantization)
        translator = ctranslate2.Translator(str(out), device="cpu", intra_threads=1)
        exported = PairTokenizer.load(out)
        theirs = [""] * len(SENTENCES)
        for limit, idx in by_source_length(package, SENTENCES):
            texts = translate_with_ctranslate2(translator, exported, [SENTENCES[i] for i in idx],
                                               package.model.cfg.max_positions, max_output_tokens=limit)
            for i, text in zip(idx, texts):
                theirs[i] = text
        assert agreement(expected, theirs) >= needed, \
            (quantization, [(a, b) for a, b in zip(expected, theirs) if a != b])


def test_a_model_that_ends_at_once_translates_to_nothing_in_ctranslate2_too(tokenizers, tmp_path):
    """<eos> as the first token: ours outputs nothing, and so must the export (CTranslate2 forces one token unless
    told min_decoding_length=0)."""
    torch.manual_seed(0)
    tokenizer = tokenizers[True]
    cfg = TransformerConfig(src_vocab_size=tokenizer.src_vocab_size, tgt_vocab_size=tokenizer.tgt_vocab_size,
                            d_model=16, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=32, max_positions=48,
                            norm_placement="pre")
    model = Transformer(cfg).eval()
    with torch.no_grad():  # the final norm outputs its bias, whatever the input: <eos>'s logit is the largest
        model.decoder_norm.weight.zero_()
        model.decoder_norm.bias.copy_(torch.linspace(-1, 1, cfg.d_model))
        model.output.weight[cfg.eos_id] = 10 * model.decoder_norm.bias
    folder = save_package(tmp_path / "ends", model, tokenizer, src_lang="en", tgt_lang="de")
    assert ours(load_package(folder), "greedy") == [""] * len(SENTENCES)
    out = export_package(str(folder), "ctranslate2", str(tmp_path / "ct2"))
    translator = ctranslate2.Translator(str(out), device="cpu", intra_threads=1)
    texts = translate_with_ctranslate2(translator, PairTokenizer.load(out), SENTENCES, cfg.max_positions)
    assert texts == [""] * len(SENTENCES)


@pytest.fixture(scope="module")
def imported_marian(tmp_path_factory) -> Path:
    """An OPUS-MT-shaped checkpoint made by transformers (random weights), imported as a package."""
    root = tmp_path_factory.mktemp("marian")
    return import_marian(make_marian_checkpoint(root / "opus-mt-en-de"), root / "models" / "opus-en-de",
                         origin="Helsinki-NLP/opus-mt-en-de")


def test_an_imported_marian_model_exports_back_and_translates_alike(imported_marian, tmp_path, one_thread):
    """Back to transformers (greedy and beam; transformers 5 removed pipeline("translation"), which did what this
    does: AutoTokenizer, generate, decode) and to CTranslate2 (greedy): the same text."""
    package = load_package(imported_marian)
    texts = [t for t in marian_sentences(30, seed=7) if t.strip()][:8]
    limit = 20

    def ours_with(method: str, beams: int) -> list[str]:
        opts = DecodeOptions(method=method, beam_size=beams, max_output_tokens=limit)
        return [t.text for t in translate(package.model, package.tokenizer, texts, opts)]

    out = export_package(str(imported_marian), "transformers", str(tmp_path / "hf"))
    assert json.loads((out / "config.json").read_text())["model_type"] == "marian"
    model = AutoModelForSeq2SeqLM.from_pretrained(out, local_files_only=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(out, local_files_only=True)
    for method, beams in (("greedy", 1), ("beam", 4)):
        theirs = []
        for text in texts:  # one at a time, as the pipeline did
            with torch.inference_mode():
                out_ids = model.generate(**tokenizer([text], return_tensors="pt"), num_beams=beams,
                                         max_new_tokens=limit)
            theirs += tokenizer.batch_decode(out_ids, skip_special_tokens=True)
        expected = ours_with(method, beams)
        assert len(set(expected)) > 3 and theirs == expected, method
    out = export_package(str(imported_marian), "ctranslate2", str(tmp_path / "ct2"))
    ct2 = ctranslate2.Translator(str(out), device="cpu", intra_threads=1)
    theirs = translate_with_ctranslate2(ct2, PairTokenizer.load(out), texts, package.model.cfg.max_positions,
                                        max_output_tokens=limit)
    assert theirs == ours_with("greedy", 1)


def test_the_permutation_turns_our_sinusoid_into_marians():
    d = 16
    ours_table = sinusoidal_table(10, d)
    pos = torch.arange(10.0)[:, None]
    freq = 10000 ** (-torch.arange(0, d, 2) / d)
    marian = torch.cat([torch.sin(pos * freq), torch.cos(pos * freq)], dim=1)  # sines first, then cosines
    assert torch.allclose(ours_table[:, residual_permutation(d)], marian, atol=1e-5)


@pytest.mark.parametrize("settings, message", [
    (dict(positional_encoding="learned"), "positional_encoding='learned'"),
    (dict(norm_placement="pre", joint=False), "joint_vocab=False"),
    (dict(norm_placement="pre", tie_embeddings=False), "tie_embeddings=False"),
])
def test_unexportable_settings_are_refused_by_name(settings, message, tokenizers, tmp_path):
    tokenizer = tokenizers[settings.pop("joint", True)]
    folder = quick_package(tmp_path / "m", tokenizer, steps=0, **settings)
    with pytest.raises(PlaygroundError, match=message):
        export_package(str(folder), "transformers", str(tmp_path / "hf"))
    assert not (tmp_path / "hf").exists()


def test_cli_export_and_refusals(tmp_path, capsys):
    from playground.cli.main import main

    assert main(["export", "--model", str(DEMO), "--format", "transformers", "--out", str(tmp_path / "hf")]) == 0
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["model_type"] == "pegasus"
    assert main(["export", "--model", str(DEMO), "--format", "transformers", "--out", str(tmp_path / "hf")]) == 2
    assert "not empty" in capsys.readouterr().err
    assert main(["export", "--model", str(DEMO), "--format", "transformers", "--quantization", "int8",
                 "--out", str(tmp_path / "x")]) == 2
    assert "ctranslate2 only" in capsys.readouterr().err


def test_missing_library_says_how_to_install(monkeypatch, tmp_path):
    import sys

    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # what an uninstalled package looks like to import
    with pytest.raises(PlaygroundError, match="pip install -r requirements-export.txt"):
        export_package(str(DEMO), "ctranslate2", str(tmp_path / "ct2"))
