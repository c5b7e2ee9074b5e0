"""Export a package as a 🤗 transformers folder that AutoModelForSeq2SeqLM / AutoTokenizer load offline.

Which architecture: transformers has no class with our exact layout, but two come down to the same network:
  * post-LN + sinusoidal positions -> Marian (MarianMTModel): post-LN, sqrt(d_model) embedding scale, positions
    from 0, biases everywhere, no final norms, an output projection without bias (final_logits_bias stays 0);
  * pre-LN + sinusoidal positions -> Pegasus (PegasusForConditionalGeneration): Marian's pre-LN twin, with the
    final encoder and decoder LayerNorms our pre-LN model has.
Both build their sinusoid with all sines before all cosines, where ours interleaves them: the weights are permuted
by the table the Marian import reads backwards (playground/packages/marian_weights.py). Learned positions have no
such twin (BART/mBART add a LayerNorm on the embeddings
and offset positions by 2), so they are refused, naming the setting.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from playground.core.model import Transformer, TransformerConfig
from playground.core.tokenizer import EOS_ID, SPECIAL_TOKENS
from playground.errors import PlaygroundError
from playground.export.optional import require
from playground.packages.marian_weights import to_marian

TARGET_TOKENIZER_DIR = "target_tokenizer"  # separate vocabularies: the target side's tokenizer, for decoding


def architecture(cfg: TransformerConfig) -> str:
    """The transformers architecture that reproduces `cfg`, or PlaygroundError naming the setting that has none."""
    if cfg.positional_encoding != "sinusoidal":
        raise PlaygroundError(
            "This model uses positional_encoding='learned', which no 🤗 transformers translation architecture "
            "reproduces exactly (BART/mBART add a LayerNorm on the embeddings). Train with sinusoidal positions "
            "to export it.")
    if cfg.norm_placement == "post":
        return "marian"
    if not (cfg.joint_vocab and cfg.tie_embeddings):
        raise PlaygroundError(
            "A pre-LN model exports as Pegasus, which shares one embedding between source, target and output: "
            f"this one has joint_vocab={cfg.joint_vocab}, tie_embeddings={cfg.tie_embeddings}. Train it with a joint "
            "vocabulary and tied embeddings, or post-LN (exported as Marian, which allows separate vocabularies).")
    return "pegasus"


def hf_config(cfg: TransformerConfig):
    """The MarianConfig / PegasusConfig of the same network."""
    transformers = require("transformers")
    common = dict(
        vocab_size=cfg.src_vocab_size, d_model=cfg.d_model, encoder_layers=cfg.n_encoder_layers,
        decoder_layers=cfg.n_decoder_layers, encoder_attention_heads=cfg.n_heads, decoder_attention_heads=cfg.n_heads,
        encoder_ffn_dim=cfg.d_ff, decoder_ffn_dim=cfg.d_ff, activation_function=cfg.activation, dropout=cfg.dropout,
        attention_dropout=cfg.attention_dropout, activation_dropout=0.0, max_position_embeddings=cfg.max_positions,
        scale_embedding=cfg.scale_embedding, pad_token_id=cfg.pad_id, bos_token_id=cfg.bos_id, eos_token_id=cfg.eos_id,
        decoder_start_token_id=cfg.bos_id, forced_eos_token_id=None, tie_word_embeddings=cfg.tie_embeddings,
        init_std=0.02)
    if architecture(cfg) == "marian":
        return transformers.MarianConfig(
            **common, decoder_vocab_size=cfg.tgt_vocab_size,
            share_encoder_decoder_embeddings=cfg.joint_vocab and cfg.tie_embeddings)
    return transformers.PegasusConfig(**common)


def hf_weights(model: Transformer) -> dict[str, torch.Tensor]:
    """Our weights under the transformers names, the model dimension permuted (packages/marian_weights.py)."""
    weights = to_marian(model.state_dict(), model.cfg)
    if model.cfg.final_logits_bias:
        weights["final_logits_bias"] = model.final_logits_bias.detach().float().cpu()[None]
    return weights


def hf_model(model: Transformer):
    """A transformers model (Marian or Pegasus) holding our weights."""
    transformers = require("transformers")
    config = hf_config(model.cfg)
    cls = transformers.MarianMTModel if config.model_type == "marian" else transformers.PegasusForConditionalGeneration
    hf = cls(config).eval()
    weights = hf_weights(model)
    missing, unexpected = hf.load_state_dict(weights, strict=False)
    # the sinusoids are recomputed by transformers (never saved); final_logits_bias stays 0 where ours has none
    missing = [k for k in missing if not k.endswith("embed_positions.weight") and k != "final_logits_bias"]
    if missing or unexpected:
        raise PlaygroundError(f"Internal export error: transformers expects {missing}, got unexpected {unexpected}.")
    hf.generation_config = transformers.GenerationConfig(
        decoder_start_token_id=model.cfg.bos_id, bos_token_id=model.cfg.bos_id, eos_token_id=model.cfg.eos_id,
        pad_token_id=model.cfg.pad_id, forced_eos_token_id=None, max_length=model.cfg.max_positions,
        # generate() defaults to the app's beam search (5 beams, length penalty 1; num_beams=1 is greedy). Ours
        # ends a sentence once it holds num_beams finished hypotheses and scores them sum(log p) / len ** penalty,
        # len counting <eos> and not <bos>, as transformers does: early_stopping=True is the same stopping rule
        num_beams=5, length_penalty=1.0, early_stopping=True,
        bad_words_ids=[[model.cfg.pad_id], [model.cfg.bos_id]] if model.cfg.never_generate_pad else None)
    return hf


def hf_tokenizer(tokenizer, max_positions: int):
    """PreTrainedTokenizerFast over our tokenizer.json, appending <eos> to each source as our model expects."""
    transformers = require("transformers")
    from tokenizers import Tokenizer, processors

    backend = Tokenizer.from_str(tokenizer.to_str())
    backend.post_processor = processors.TemplateProcessing(
        single=f"$A {SPECIAL_TOKENS[EOS_ID]}", special_tokens=[(SPECIAL_TOKENS[EOS_ID], EOS_ID)])
    pad, unk, bos, eos = SPECIAL_TOKENS
    # our source is cut to max_positions - 2 tokens + <eos>; clean_up off: it would change spaces around punctuation
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token=pad, unk_token=unk, bos_token=bos, eos_token=eos,
        model_max_length=max_positions - 1, clean_up_tokenization_spaces=False)


def export_transformers(package_folder: str | os.PathLike, out: str | os.PathLike) -> Path:
    """Write the transformers folder (config, weights, generation config, tokenizer, model card) to `out`."""
    from playground.packages.card import hub_card
    from playground.packages.format import write_json
    from playground.packages.store import load_package

    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise PlaygroundError(f"{out} already exists and is not empty: choose a new folder for the export.")
    package = load_package(package_folder)
    architecture(package.model.cfg)  # refuse before writing anything
    hf = hf_model(package.model)
    hf.save_pretrained(out)
    os.chmod(out / "model.safetensors", 0o644)  # safetensors writes 0600, the other files are world-readable
    pair = package.tokenizer
    hf_tokenizer(pair.src_tokenizer, package.model.cfg.max_positions).save_pretrained(out)
    if not pair.joint:
        hf_tokenizer(pair.tgt_tokenizer, package.model.cfg.max_positions).save_pretrained(out / TARGET_TOKENIZER_DIR)
    (out / "README.md").write_text(hub_card(package.config, package.training, transformers_folder=True),
                                   encoding="utf-8")
    write_json(out / "playground.json", package.config)  # where the export came from
    return out
