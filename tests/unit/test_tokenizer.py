"""Tests for playground.core.tokenizer: exact round trips for every kind, fixed special ids, saving and loading."""

import json

import pytest
import torch

from playground.core.tokenizer import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    SPECIAL_TOKENS,
    TGT_TOKENIZER_FILE,
    TOKENIZER_FILE,
    TOKENIZER_KINDS,
    UNK_ID,
    PairTokenizer,
    train_tokenizer,
)
from playground.errors import DataError, PackageError

ENGLISH = ["Hello, world!", "It's 3.5 km (approx.) … x² — \"quoted\"", "Ça va? Très bien.", "Hello again, world."]
OTHERS = [
    "Grüße aus Köln: schön, oder?",
    "Привет, мир! Как дела?",
    "Γειά σου, κόσμε.",
    "你好，世界。我爱北京！",
    "こんにちは、世界。カタカナです。",
    "مرحبا بالعالم!",
]
PAIRS = [(src, tgt) for src in ENGLISH for tgt in OTHERS[:2]] + list(zip(OTHERS, reversed(ENGLISH + ENGLISH)))


@pytest.fixture(scope="module")
def tokenizers():
    """One tokenizer per (kind, joint), trained once for the whole module."""
    return {(kind, joint): train_tokenizer(PAIRS, kind=kind, vocab_size=120, joint=joint, min_frequency=1)
            for kind in TOKENIZER_KINDS for joint in (True, False)}


@pytest.mark.parametrize("joint", [True, False])
@pytest.mark.parametrize("kind", TOKENIZER_KINDS)
def test_round_trip_is_exact(tokenizers, kind, joint):
    tokenizer = tokenizers[kind, joint]
    assert (tokenizer.kind, tokenizer.joint) == (kind, joint)
    for src, tgt in PAIRS:
        assert tokenizer.decode_src(tokenizer.encode_src(src)) == src
        assert tokenizer.decode_tgt(tokenizer.encode_tgt(tgt)) == tgt


@pytest.mark.parametrize("kind", TOKENIZER_KINDS)
def test_special_ids_and_no_bos_eos_added(tokenizers, kind):
    tokenizer = tokenizers[kind, True]
    assert (PAD_ID, UNK_ID, BOS_ID, EOS_ID) == (0, 1, 2, 3)
    for side in (tokenizer.src_tokenizer, tokenizer.tgt_tokenizer):
        assert [side.token_to_id(token) for token in SPECIAL_TOKENS] == [0, 1, 2, 3]
    ids = tokenizer.encode_src("Hello, world!")
    assert ids and not set(ids) & {PAD_ID, BOS_ID, EOS_ID}
    assert tokenizer.decode_src([BOS_ID, *ids, EOS_ID, PAD_ID, PAD_ID]) == "Hello, world!"
    assert tokenizer.src_tokens([BOS_ID, *ids, EOS_ID])[::len(ids) + 1] == ["<bos>", "<eos>"]


def test_batches_tensors_and_token_labels(tokenizers):
    tokenizer = tokenizers["bpe", False]
    texts = [tgt for _, tgt in PAIRS]
    batch = tokenizer.encode_tgt_batch(texts)
    assert batch == [tokenizer.encode_tgt(text) for text in texts]
    assert tokenizer.encode_src_batch(["Hello, world!"]) == [tokenizer.encode_src("Hello, world!")]
    assert tokenizer.decode_tgt_batch([torch.tensor(ids + [EOS_ID]) for ids in batch]) == texts
    word = tokenizers["word", True]
    labels = word.src_tokens(torch.tensor([BOS_ID, *word.encode_src("Hello, world!")]))
    assert labels == ["<bos>", "▁Hello", ",", "▁world", "!"]


def test_every_training_character_is_in_the_vocabulary():
    pairs = [("common words here", "häufige Wörter hier")] * 5 + [("rare ǂ", "selten Ω")]
    for kind in ("bpe", "wordpiece", "unigram", "char"):
        tokenizer = train_tokenizer(pairs, kind=kind, vocab_size=5, joint=False, min_frequency=2)  # tiny vocab_size
        assert tokenizer.decode_src(tokenizer.encode_src("rare ǂ")) == "rare ǂ", kind
        assert tokenizer.decode_tgt(tokenizer.encode_tgt("selten Ω")) == "selten Ω", kind
        assert UNK_ID not in tokenizer.encode_tgt("Wörter")


def test_separate_vocabularies_keep_their_own_characters():
    tokenizer = train_tokenizer([("cat", "кошка"), ("dog", "пёс")], kind="char", joint=False)
    assert not tokenizer.joint and tokenizer.src_vocab_size != tokenizer.tgt_vocab_size
    assert UNK_ID in tokenizer.encode_src("к") and UNK_ID not in tokenizer.encode_tgt("кошка")


def test_word_kind_respects_vocab_size_and_unknown_words():
    tokenizer = train_tokenizer([("a a a b b c", "x")] * 2, kind="word", vocab_size=6, min_frequency=1)
    assert tokenizer.src_vocab_size == 6
    assert tokenizer.encode_src("c") == [UNK_ID]
    assert tokenizer.decode_src(tokenizer.encode_src("a b")) == "a b"


def test_wordpiece_long_words_are_not_unknown():
    long_word = "abcdefghij" * 15  # longer than WordPiece's 100-character word limit
    tokenizer = train_tokenizer([(long_word, long_word)], kind="wordpiece")
    assert UNK_ID not in tokenizer.encode_src(long_word)
    assert tokenizer.decode_src(tokenizer.encode_src(long_word)) == long_word


@pytest.mark.parametrize("joint", [True, False])
@pytest.mark.parametrize("kind", ["char", "word", "unigram"])
def test_save_and_load(tokenizers, tmp_path, kind, joint):
    tokenizer = tokenizers[kind, joint]
    tokenizer.save(tmp_path)
    assert (tmp_path / TOKENIZER_FILE).is_file() and (tmp_path / TGT_TOKENIZER_FILE).is_file() != joint
    loaded = PairTokenizer.load(tmp_path)
    assert (loaded.kind, loaded.joint, loaded.src_vocab_size, loaded.tgt_vocab_size) == (
        kind, joint, tokenizer.src_vocab_size, tokenizer.tgt_vocab_size)
    for src, tgt in PAIRS:
        assert loaded.encode_src(src) == tokenizer.encode_src(src)
        assert loaded.decode_tgt(loaded.encode_tgt(tgt)) == tgt


def test_saving_joint_over_separate_removes_the_target_file(tokenizers, tmp_path):
    tokenizers["bpe", False].save(tmp_path)
    tokenizers["bpe", True].save(tmp_path)
    assert not (tmp_path / TGT_TOKENIZER_FILE).exists() and PairTokenizer.load(tmp_path).joint


@pytest.mark.parametrize("joint", [True, False])
def test_json_strings_round_trip(tokenizers, joint):
    src_json, tgt_json = tokenizers["wordpiece", joint].to_json_strings()
    assert (tgt_json is None) == joint
    restored = PairTokenizer.from_json_strings(src_json, tgt_json)
    assert (restored.kind, restored.joint) == ("wordpiece", joint)
    assert restored.encode_tgt(OTHERS[3]) == tokenizers["wordpiece", joint].encode_tgt(OTHERS[3])


def test_load_errors(tokenizers, tmp_path):
    with pytest.raises(PackageError, match=TOKENIZER_FILE):
        PairTokenizer.load(tmp_path)
    (tmp_path / TOKENIZER_FILE).write_text("{not json")
    with pytest.raises(PackageError, match="corrupt"):
        PairTokenizer.load(tmp_path)
    config = json.loads(tokenizers["bpe", True].to_json_strings()[0])
    config["added_tokens"][0]["content"] = "[PAD]"  # a tokenizer from elsewhere, with other special tokens
    config["model"]["vocab"]["[PAD]"] = config["model"]["vocab"].pop("<pad>")
    with pytest.raises(PackageError, match="ids 0-3"):
        PairTokenizer.from_json_strings(json.dumps(config))


def test_bad_training_input():
    with pytest.raises(DataError, match="bpe, wordpiece, unigram, word, char"):
        train_tokenizer(PAIRS, kind="sentencepiece")
    with pytest.raises(DataError, match="empty"):
        train_tokenizer([])
    with pytest.raises(DataError, match="empty"):
        train_tokenizer([("", "")])
    with pytest.raises(DataError, match="vocab_size"):
        train_tokenizer(PAIRS, vocab_size=0)


# ---- BPE-dropout ---------------------------------------------------------------------------------------------


def test_bpe_dropout_is_seeded_and_exact_at_zero():
    import random

    from playground.core.tokenizer import BpeDropout

    tokenizer = train_tokenizer(PAIRS * 20, kind="bpe", vocab_size=150)
    sentences = [src for src, _ in PAIRS] + ["a word the training never saw: Quokka!"]
    plain = tokenizer.encode_src_batch(sentences)
    assert BpeDropout(tokenizer.src_tokenizer, 0.0).encode_batch(sentences, random.Random(1)) == plain

    dropout = BpeDropout(tokenizer.src_tokenizer, 0.3)
    first = dropout.encode_batch(sentences, random.Random(7))
    assert dropout.encode_batch(sentences, random.Random(7)) == first  # same seed, same segmentation
    assert dropout.encode_batch(sentences, random.Random(8)) != first  # another epoch's seed, other pieces
    assert sum(map(len, first)) > sum(map(len, plain))  # skipped merges leave smaller pieces
    assert [tokenizer.decode_src(ids) for ids in first] == [tokenizer.decode_src(ids) for ids in plain]  # same text


def test_bpe_dropout_refuses_other_kinds_and_bad_rates():
    from playground.core.tokenizer import BpeDropout

    with pytest.raises(DataError, match="needs the bpe tokenizer"):
        BpeDropout(train_tokenizer(PAIRS, kind="word", vocab_size=50).src_tokenizer, 0.1)
    with pytest.raises(DataError, match="below 1"):
        BpeDropout(train_tokenizer(PAIRS, kind="bpe", vocab_size=80).src_tokenizer, 1.0)
