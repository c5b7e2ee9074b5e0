"""A Marian checkpoint (OPUS-MT's layout, built by transformers in the test: tests/marian_checkpoints.py) imported
as a package tokenizes, scores and translates exactly as transformers' MarianTokenizer and MarianMTModel do."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pytest
import torch
from marian_checkpoints import make_marian_checkpoint, marian_tokenizer, sentences

from playground.cli.main import main
from playground.core.decode import DecodeOptions, beam_search, greedy_or_sample
from playground.core.sequences import pad_batch
from playground.errors import PackageError
from playground.packages.marian import import_marian, marian_parameters
from playground.packages.sentencepiece_model import read_spm
from playground.packages.store import load_package

MARIAN_SPECIALS = {"<pad>": "<pad>", "<unk>": "<unk>", "<eos>": "</s>"}  # ours -> Marian's; <bos> has none


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    return make_marian_checkpoint(tmp_path_factory.mktemp("hub") / "opus-mt-en-de")


@pytest.fixture(scope="module")
def package(checkpoint, tmp_path_factory):
    folder = import_marian(checkpoint, tmp_path_factory.mktemp("models") / "en-de", origin="Helsinki-NLP/opus-mt-en-de")
    return load_package(folder)


@pytest.fixture(scope="module")
def marian(checkpoint):
    import transformers

    return transformers.MarianMTModel.from_pretrained(checkpoint).eval(), marian_tokenizer(checkpoint)


@pytest.fixture(scope="module")
def marian_ids(package, checkpoint) -> torch.Tensor:
    return marian_ids_of(package, checkpoint)


def marian_ids_of(package, checkpoint: Path) -> torch.Tensor:
    """Marian's id of each of our ids, found by the token strings (-1 for our <bos>, which Marian lacks). A piece
    only one side's SentencePiece model has ends in an extra "▁" on the other side, one in neither on both."""
    vocab = json.loads((checkpoint / "vocab.json").read_text(encoding="utf-8"))
    src, tgt = package.tokenizer.src_tokenizer, package.tokenizer.tgt_tokenizer
    ids = []
    for i in range(tgt.get_vocab_size()):
        names = {MARIAN_SPECIALS.get(src.id_to_token(i)), src.id_to_token(i), tgt.id_to_token(i)}
        names |= {name[:-1] for name in names if name and len(name) > 1 and name.endswith("▁")}  # no side's piece
        found = [vocab[name] for name in names if name in vocab]
        assert len(found) <= 1
        ids.append(found[0] if found else -1)
    assert ids.count(-1) == 1 and sorted(ids)[1:] == list(range(len(vocab)))
    return torch.tensor(ids)


def test_the_spm_reader_reads_what_sentencepiece_does(checkpoint):
    import sentencepiece

    for name in ("source.spm", "target.spm"):
        ours = read_spm(checkpoint / name)
        theirs = sentencepiece.SentencePieceProcessor(model_file=str(checkpoint / name))
        assert [p.text for p in ours.pieces] == [theirs.id_to_piece(i) for i in range(theirs.get_piece_size())]
        assert [p.score for p in ours.pieces] == [theirs.get_score(i) for i in range(theirs.get_piece_size())]
        assert [p.type == 3 for p in ours.pieces] == [theirs.is_control(i) for i in range(theirs.get_piece_size())]
        assert ours.unk_id == theirs.unk_id() and ours.normalizer_name == "nmt_nfkc"
        assert len(ours.precompiled_charsmap) > 100_000 and ours.add_dummy_prefix and ours.remove_extra_whitespaces


def test_token_ids_are_marian_tokenizers(package, marian, marian_ids):
    _, tokenizer = marian
    texts = sentences(1200)
    unknown = 0
    for text in texts:
        theirs_src = tokenizer(text).input_ids
        ours_src = marian_ids[package.tokenizer.encode_src(text) + [package.model.cfg.eos_id]].tolist()
        assert ours_src == theirs_src, repr(text)
        theirs_tgt = tokenizer(text_target=text).input_ids
        assert marian_ids[package.tokenizer.encode_tgt(text) + [package.model.cfg.eos_id]].tolist() == theirs_tgt
        unknown += tokenizer.unk_token_id in theirs_src
    assert unknown > 100  # the unknown characters were met, not only easy text


def test_a_multilingual_models_language_token_is_read_as_marian_reads_it(tmp_path):
    checkpoint = make_marian_checkpoint(tmp_path / "opus-mt-en-ROMANCE", d_model=8, layers=1, heads=1, ffn=8,
                                        language_codes=(">>fr<<", ">>es<<"))
    package = load_package(import_marian(checkpoint, tmp_path / "models" / "en-romance", origin="x"))
    ids, tokenizer = marian_ids_of(package, checkpoint), marian_tokenizer(checkpoint)
    for text in [">>fr<< the house", ">>es<<the  small cat", ">>es<<", ">>fr<<  Ünï 🙂"]:
        ours = ids[package.tokenizer.encode_src(text) + [package.model.cfg.eos_id]].tolist()
        assert ours == tokenizer(text).input_ids, text
        assert tokenizer.convert_ids_to_tokens(ours[:1]) == [text[:6]]


def marian_batch(package, marian_ids, texts):
    ours = pad_batch([package.tokenizer.encode_src(t) + [package.model.cfg.eos_id] for t in texts], pad_id=0)
    theirs = marian_ids[ours]
    return ours, theirs, (ours != package.model.cfg.pad_id).long()


def test_logits_are_marians(package, marian, marian_ids):
    assert_logits_match(package, marian[0], marian_ids, sentences(8, seed=3))


def assert_logits_match(package, model, marian_ids, texts: list[str]) -> None:
    """Teacher-forced on random targets: every logit of a token Marian has within 1e-4 of Marian's."""
    src, hf_src, mask = marian_batch(package, marian_ids, texts)
    generator = torch.Generator().manual_seed(0)
    tgt = torch.randint(4, len(marian_ids), (len(texts), 12), generator=generator)
    tgt[:, 0] = package.model.cfg.bos_id
    with torch.no_grad():
        ours = package.model(src, tgt)
        decoder_start = marian_ids[package.model.cfg.pad_id]  # Marian starts from <pad>
        theirs = model(input_ids=hf_src, attention_mask=mask,
                       decoder_input_ids=torch.where(tgt == package.model.cfg.bos_id, decoder_start,
                                                     marian_ids[tgt])).logits
    real = marian_ids >= 0
    assert (ours[:, :, real] - theirs[:, :, marian_ids[real]]).abs().max() < 1e-4
    assert ours.argmax(-1).ne(package.model.cfg.bos_id).all()  # our extra <bos> never wins


def generated(model, ids, mask, **options) -> list[list[int]]:
    out = model.generate(input_ids=ids, attention_mask=mask, forced_eos_token_id=None, do_sample=False, **options)
    rows = []
    for row in out[:, 1:].tolist():  # after the decoder start
        rows.append(row[: row.index(0) + 1] if 0 in row else row)  # up to </s> (Marian's 0)
    return rows


@pytest.mark.parametrize("method", ["greedy", "beam"])
def test_greedy_and_beam_outputs_are_generates(method, package, marian, marian_ids):
    texts = [t for t in sentences(40, seed=5) if t.strip()][:6]
    outputs = searched_alike(package, marian[0], marian_ids, texts, method, limit=16)
    assert len({tuple(ids) for ids in outputs}) > len(texts) // 2  # the input decides the output
    assert {len(ids) for ids in outputs} - {16}  # and some end before the limit, at </s>


def searched_alike(package, model, marian_ids, texts: list[str], method: str, limit: int) -> list[list[int]]:
    """Our search's best output for each text (in Marian's ids), asserted equal to generate()'s."""
    opts = DecodeOptions(method=method, beam_size=4, length_penalty=1.0, max_output_tokens=limit)
    outputs = []
    for text in texts:  # one at a time: transformers' beam search pads finished rows differently
        src, hf_src, mask = marian_batch(package, marian_ids, [text])
        search = beam_search if method == "beam" else greedy_or_sample
        ours = [marian_ids[h[0].ids].tolist() for h in search(package.model, src, opts).hypotheses]
        theirs = generated(model, hf_src, mask, num_beams=4 if method == "beam" else 1, length_penalty=1.0,
                           early_stopping=True, max_new_tokens=limit)
        assert ours == theirs, repr(text)
        outputs += ours
    return outputs


def test_opus_mt_en_de_shapes_import_exactly(tmp_path):
    """opus-mt-en-de's real shapes: d_model 512, 6+6 layers, 8 heads, FFN 2048, 58,101 tokens, swish, scaled
    embeddings (74 M parameters); a few sentences, fp32."""
    import transformers

    checkpoint = make_marian_checkpoint(tmp_path / "opus-mt-en-de", d_model=512, layers=6, heads=8, ffn=2048,
                                        vocab_size=58_101, positions=512)
    config = json.loads((checkpoint / "config.json").read_text())
    assert (config["vocab_size"], config["activation_function"], config["scale_embedding"]) == (58_101, "swish", True)
    package = load_package(import_marian(checkpoint, tmp_path / "models" / "en-de", origin="opus-mt-en-de"))
    assert marian_parameters(config) == package.model.num_parameters() > 73_000_000
    model = transformers.MarianMTModel.from_pretrained(checkpoint).eval()
    ids = marian_ids_of(package, checkpoint)
    texts = [t for t in sentences(12, seed=9) if t.strip()][:3]
    assert_logits_match(package, model, ids, texts)
    searched_alike(package, model, ids, texts[:1], "greedy", limit=6)


def test_the_package_says_where_it_came_from(package):
    config = package.config
    assert (config["src_lang"], config["tgt_lang"]) == ("en", "de")
    assert config["imported"]["origin"] == "Helsinki-NLP/opus-mt-en-de"
    card = (package.path / "README.md").read_text(encoding="utf-8")
    assert "Tiedemann" in card and "Junczys-Dowmunt" in card and "Helsinki-NLP/opus-mt-en-de" in card


def test_parameters_are_counted_from_the_config_alone(checkpoint, package):
    config = json.loads((checkpoint / "config.json").read_text())
    assert marian_parameters(config) == sum(p.numel() for p in package.model.parameters())
    with pytest.raises(PackageError, match="not a Marian one.*marian"):
        marian_parameters({**config, "model_type": "bart"})
    with pytest.raises(PackageError, match="activation_function 'tanh' \\(supported: swish"):
        marian_parameters({**config, "activation_function": "tanh"})


def test_cli_imports_a_folder_and_translates_with_it(checkpoint, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["import-hf", str(checkpoint), "--name", "opus-en-de"]) == 0
    said = capsys.readouterr().out
    assert "models/opus-en-de" in said and "en → de" in said and "parameters" in said
    assert main(["translate", "--model", "models/opus-en-de", "--json", "the house is small"]) == 0
    [result] = json.loads(capsys.readouterr().out)
    assert result["source"] == "the house is small" and result["hypotheses"][0]["score"] < 0


def test_a_pickle_only_checkpoint_is_refused_naming_the_file_needed(checkpoint, tmp_path):
    folder = tmp_path / "pickled"
    shutil.copytree(checkpoint, folder)
    (folder / "model.safetensors").rename(folder / "pytorch_model.bin")
    with pytest.raises(PackageError, match="pytorch_model.bin.*no pickle.*model.safetensors.*safe_serialization"):
        import_marian(folder, tmp_path / "out", origin="x")
    assert not (tmp_path / "out").exists()


def test_weights_that_do_not_fit_the_config_are_refused_before_loading(checkpoint, tmp_path):
    folder = tmp_path / "wrong"
    shutil.copytree(checkpoint, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "d_model": 32}))
    with pytest.raises(PackageError, match="does not fit config.json"):
        import_marian(folder, tmp_path / "out", origin="x")


def test_a_charsmap_whose_header_overruns_it_is_refused_before_parsing(package, tmp_path):
    from playground.packages.tokenizer_checks import check_tokenizer_cost

    vocab = package.model.cfg.src_vocab_size
    check_tokenizer_cost(package.path / "tokenizer.json", vocab)  # the imported one passes
    spec = json.loads((package.path / "tokenizer.json").read_text(encoding="utf-8"))
    step = spec["normalizer"]["normalizers"][0]
    charsmap = base64.b64decode(step["precompiled_charsmap"])
    step["precompiled_charsmap"] = base64.b64encode(b"\xff\xff\xff\xff" + charsmap[4:]).decode()  # issue 32 row A
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    with pytest.raises(PackageError, match=r"normalizer \(Sequence\) is not one the playground writes"):
        check_tokenizer_cost(tmp_path / "tokenizer.json", vocab)


def test_a_truncated_sentencepiece_model_is_refused_naming_it(checkpoint, tmp_path):
    folder = tmp_path / "cut"
    shutil.copytree(checkpoint, folder)
    data = (folder / "source.spm").read_bytes()
    (folder / "source.spm").write_bytes(data[: len(data) // 2])
    with pytest.raises(PackageError, match="source.spm is not a SentencePiece model"):
        import_marian(folder, tmp_path / "out", origin="x")
