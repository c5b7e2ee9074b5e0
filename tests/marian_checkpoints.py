"""Marian checkpoints as 🤗 transformers saves them, made in the test: SentencePiece models trained here on
generated text (separate source and target ones, as OPUS-MT's), one vocab.json for both, random weights. Nothing is
downloaded. Also the sentences the tokenizers are compared on: Unicode, odd whitespace and unknown characters."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import torch

EN = ("the a house cat dog small big red green run walks see tree water book old new city river friend night "
      "day road car bread cheese apple naïve café résumé").split()
DE = ("das ein Haus Katze Hund klein groß rot grün läuft gehen sehen Baum Wasser Buch alt neu Stadt Fluss Freund "
      "Nacht Tag Straße Auto Brot Käse Apfel über schön").split()
# every character either side uses, given to both SentencePiece trainers: an OPUS-MT model's SentencePiece models
# cover their corpora's characters (character_coverage 1.0), so neither side meets a letter only the other knows
ALPHABET = "".join(sorted(set("".join(EN + DE)) | set("0123456789.,;:!?'\"()-")))
UNKNOWN = ["🙂", "漢字", "ღ", "€", "ж", "𝔘"]  # in no training text: <unk> on both sides
ODD_SPACES = ["  ", "\t", "\u00a0", "\u3000", " \n ", "\u2009", "   "]
CONFUSABLE = ["ＡＢＣ", "ﬁne", "e\u0301", "½", "Ⅻ", "“quoted”", "…"]  # what nmt_nfkc rewrites


def sentences(n: int, seed: int = 0) -> list[str]:
    """n sentences of both sides' words mixed with unknown characters, odd whitespace and NFKC-rewritten forms."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = [rng.choice(EN + DE) for _ in range(rng.randint(0, 10))]
        for _ in range(rng.randint(0, 3)):
            words.insert(rng.randint(0, len(words)), rng.choice(UNKNOWN + CONFUSABLE + list(ALPHABET)))
        text = "".join(w + rng.choice([" "] * 6 + ODD_SPACES) for w in words)
        if rng.random() < 0.3:
            text = rng.choice(ODD_SPACES) + text
        if rng.random() < 0.5:
            text = text.rstrip()
        out.append(text)
    return out


def train_spm(lines: list[str], vocab_size: int) -> bytes:
    import sentencepiece

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(lines + [ALPHABET] * 3), model_writer=model, vocab_size=vocab_size,
        hard_vocab_limit=False, model_type="unigram", character_coverage=1.0, normalization_rule_name="nmt_nfkc",
        num_threads=1, minloglevel=2)
    return model.getvalue()


def corpus(words: list[str], n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(words) for _ in range(rng.randint(1, 9))) for _ in range(n)]


def make_marian_checkpoint(folder: Path, *, d_model: int = 16, layers: int = 2, heads: int = 2, ffn: int = 32,
                           vocab_size: int | None = None, positions: int = 64, activation: str = "swish",
                           seed: int = 0, source_lang: str = "en", target_lang: str = "de",
                           language_codes: tuple[str, ...] = ()) -> Path:
    """A Marian checkpoint in `folder`, as transformers' save_pretrained writes it, with the tokenizer files
    MarianTokenizer reads. vocab.json holds the union of both SentencePiece models' pieces ("</s>" 0, "<unk>" 1,
    "<pad>" last, as OPUS-MT's), padded with unused pieces up to vocab_size when given. The final logits bias is
    random (transformers' own is zeros) so that its mapping is checked too."""
    import transformers

    folder.mkdir(parents=True, exist_ok=True)
    source, target = train_spm(corpus(EN, 600, seed), 80), train_spm(corpus(DE, 600, seed + 1), 90)
    (folder / "source.spm").write_bytes(source)
    (folder / "target.spm").write_bytes(target)
    vocab = {"</s>": 0, "<unk>": 1}
    for model in (source, target):
        for piece in spm_pieces(model):
            vocab.setdefault(piece, len(vocab))
    for code in language_codes:  # a multilingual model's target-language tokens, e.g. ">>fr<<"
        vocab[code] = len(vocab)
    if vocab_size is not None:
        for i in range(vocab_size - 1 - len(vocab)):
            vocab[f"▁unused{i}"] = len(vocab)
    vocab["<pad>"] = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"source_lang": source_lang, "target_lang": target_lang, "model_max_length": 512,
         "tokenizer_class": "MarianTokenizer"}), encoding="utf-8")
    pad = len(vocab) - 1
    config = transformers.MarianConfig(
        vocab_size=len(vocab), d_model=d_model, encoder_layers=layers, decoder_layers=layers,
        encoder_attention_heads=heads, decoder_attention_heads=heads, encoder_ffn_dim=ffn, decoder_ffn_dim=ffn,
        max_position_embeddings=positions, activation_function=activation, scale_embedding=True,
        pad_token_id=pad, decoder_start_token_id=pad, eos_token_id=0, forced_eos_token_id=0)
    torch.manual_seed(seed)
    model = transformers.MarianMTModel(config).eval()
    with torch.no_grad():  # weights large enough that the input decides the output (transformers' 0.02 would not)
        for weight in model.parameters():
            if weight.dim() == 2:
                weight.normal_(0, 1.25 / d_model**0.5)
        model.final_logits_bias.normal_(0, 1.0)
        model.final_logits_bias[0, 0] += 4.0  # </s> likelier, so that some outputs end before their limit
    model.generation_config = transformers.GenerationConfig(  # what OPUS-MT's generation_config.json holds
        bad_words_ids=[[pad]], decoder_start_token_id=pad, eos_token_id=0, forced_eos_token_id=0, max_length=512,
        num_beams=4, pad_token_id=pad)
    model.save_pretrained(folder)
    return folder


def spm_pieces(model: bytes) -> list[str]:
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor(model_proto=model)
    return [processor.id_to_piece(i) for i in range(processor.get_piece_size())
            if not (processor.is_control(i) or processor.is_unknown(i))]


def marian_tokenizer(folder: Path):
    import warnings

    import transformers

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Recommended: pip install sacremoses", which MarianTokenizer never calls
        return transformers.MarianTokenizer.from_pretrained(folder)
