"""Export a package to CTranslate2 (a fast C++ inference engine, the usual pick to serve translation on a CPU).

CTranslate2's transformers converter does not fit our exports (its Marian loader drops the last vocabulary entry
and starts the decoder from a zero embedding, as Marian-NMT models do), so this module fills CTranslate2's own
Transformer specification from our weights and lets its Converter quantize and save it. Our layout maps one to one:
fused QKV and KV projections, our sinusoid given as the position table, sqrt(d_model) embedding scale, pre- or
post-LN with our final norms, LayerNorm eps 1e-5. Inputs are token strings; the model adds <eos> to the source.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from playground.core.model import Transformer
from playground.core.tokenizer import BOS_ID, EOS_ID, SPECIAL_TOKENS, UNK_ID
from playground.errors import PlaygroundError
from playground.export.optional import check_quantization, require

NEVER = -1e9  # a logit bias that no token's logit overcomes


def model_spec(model: Transformer, src_vocab: list[str], tgt_vocab: list[str]):
    """The ctranslate2 TransformerSpec holding our weights."""
    require("ctranslate2")
    from ctranslate2.specs import common_spec, transformer_spec

    cfg = model.cfg
    if cfg.positional_encoding != "sinusoidal":
        raise PlaygroundError("CTranslate2 export needs sinusoidal positions; this model uses "
                              "positional_encoding='learned'. Train with sinusoidal positions to export it.")
    activation = {"relu": common_spec.Activation.RELU, "gelu": common_spec.Activation.GELU,
                  "swish": common_spec.Activation.SWISH}[cfg.activation]
    spec = transformer_spec.TransformerSpec.from_config(
        (cfg.n_encoder_layers, cfg.n_decoder_layers), cfg.n_heads, pre_norm=cfg.norm_placement == "pre",
        activation=activation)
    w = {k: v.detach().float().cpu().numpy() for k, v in model.state_dict().items()}

    def linear(spec_part, name: str) -> None:
        spec_part.weight = w[f"{name}.weight"]
        if f"{name}.bias" in w:
            spec_part.bias = w[f"{name}.bias"]

    def norm(spec_part, name: str) -> None:
        spec_part.gamma, spec_part.beta = w[f"{name}.weight"], w[f"{name}.bias"]

    def feed_forward(spec_part, name: str, norm_name: str) -> None:
        linear(spec_part.linear_0, f"{name}.up")
        linear(spec_part.linear_1, f"{name}.down")
        norm(spec_part.layer_norm, norm_name)

    for side, embed in ((spec.encoder, "src_embed"), (spec.decoder, "tgt_embed")):
        side.scale_embeddings = math.sqrt(cfg.d_model) if cfg.scale_embedding else 1.0
        side.position_encodings.encodings = getattr(model, embed).table.cpu().numpy()
        embeddings = side.embeddings[0] if isinstance(side.embeddings, list) else side.embeddings
        embeddings.weight = w[f"{embed}.tokens.weight"]
    for layer, i in zip(spec.encoder.layer, range(cfg.n_encoder_layers)):
        linear(layer.self_attention.linear[0], f"encoder.{i}.self_attn.qkv")
        linear(layer.self_attention.linear[1], f"encoder.{i}.self_attn.out")
        norm(layer.self_attention.layer_norm, f"encoder.{i}.attn_block.norm")
        feed_forward(layer.ffn, f"encoder.{i}.ff", f"encoder.{i}.ff_block.norm")
    for layer, i in zip(spec.decoder.layer, range(cfg.n_decoder_layers)):
        linear(layer.self_attention.linear[0], f"decoder.{i}.self_attn.qkv")
        linear(layer.self_attention.linear[1], f"decoder.{i}.self_attn.out")
        norm(layer.self_attention.layer_norm, f"decoder.{i}.self_block.norm")
        linear(layer.attention.linear[0], f"decoder.{i}.cross_attn.q")
        linear(layer.attention.linear[1], f"decoder.{i}.cross_attn.kv")
        linear(layer.attention.linear[2], f"decoder.{i}.cross_attn.out")
        norm(layer.attention.layer_norm, f"decoder.{i}.cross_block.norm")
        feed_forward(layer.ffn, f"decoder.{i}.ff", f"decoder.{i}.ff_block.norm")
    if cfg.norm_placement == "pre":
        norm(spec.encoder.layer_norm, "encoder_norm")
        norm(spec.decoder.layer_norm, "decoder_norm")
    linear(spec.decoder.projection, "output")
    if cfg.final_logits_bias or cfg.never_generate_pad:
        bias = w["final_logits_bias"].copy() if cfg.final_logits_bias else np.zeros(cfg.tgt_vocab_size, np.float32)
        if cfg.never_generate_pad:  # CTranslate2 has no generation config: <pad> and <bos> are out of reach here
            bias[[cfg.pad_id, cfg.bos_id]] = NEVER
        spec.decoder.projection.bias = bias

    spec.register_source_vocabulary(src_vocab)
    spec.register_target_vocabulary(tgt_vocab)
    spec.config.bos_token, spec.config.eos_token = SPECIAL_TOKENS[BOS_ID], SPECIAL_TOKENS[EOS_ID]
    spec.config.unk_token, spec.config.decoder_start_token = SPECIAL_TOKENS[UNK_ID], SPECIAL_TOKENS[BOS_ID]
    spec.config.add_source_eos = True  # our encoder reads the source tokens followed by <eos>
    spec.config.layer_norm_epsilon = 1e-5  # torch's LayerNorm default; CTranslate2 would assume 1e-6
    return spec


def vocabulary(tokenizer) -> list[str]:
    """Token strings in id order (what CTranslate2 reads and writes)."""
    return [tokenizer.id_to_token(i) for i in range(tokenizer.get_vocab_size())]


def export_ctranslate2(package_folder: str | os.PathLike, out: str | os.PathLike,
                       quantization: str = "float32") -> Path:
    """Write a folder that ctranslate2.Translator loads; weights stored as `quantization`."""
    from playground.packages.format import write_json
    from playground.packages.store import load_package

    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise PlaygroundError(f"{out} already exists and is not empty: choose a new folder for the export.")
    package = load_package(package_folder)
    write_ctranslate2(package.model, package.tokenizer, out, quantization)
    write_json(out / "playground.json", package.config)  # the package's config: languages, max_positions
    return out


def write_ctranslate2(model: Transformer, tokenizer, out: Path, quantization: str = "float32") -> None:
    """Convert a model and its PairTokenizer into the folder `out` (replaced if it exists)."""
    ctranslate2 = require("ctranslate2")
    check_quantization(quantization)
    spec = model_spec(model, vocabulary(tokenizer.src_tokenizer), vocabulary(tokenizer.tgt_tokenizer))

    class ModelConverter(ctranslate2.converters.Converter):
        def _load(self):
            return spec

    ModelConverter().convert(str(out), quantization=quantization, force=True)
    tokenizer.save(out)  # tokenizer.json (+ tokenizer.tgt.json): to turn text into the token strings and back


def translate_with_ctranslate2(translator, tokenizer, sentences: list[str], positions: int, beam_size: int = 1,
                               length_penalty: float = 1.0, max_output_tokens: int | None = None,
                               batch_size: int = 64) -> list[str]:
    """Translate with a loaded ctranslate2.Translator and the package's PairTokenizer (saved beside the export):
    text -> source token strings -> CTranslate2 -> target token strings -> text. `positions`: the model's max_positions
    (playground.json in the export); without max_output_tokens a batch may produce up to 2 x its longest source + 10
    tokens, our own default, and never more than the model has positions for."""
    src = [[tokenizer.src_tokenizer.id_to_token(i) for i in ids[: positions - 2]]  # cut as decode.source_ids does
           for ids in tokenizer.encode_src_batch(sentences)]
    longest = max(map(len, src), default=0) + 1  # +1: the appended <eos>
    limit = min(max_output_tokens or 2 * longest + 10, positions - 1)
    # min_decoding_length 0: <eos> may come first, as in ours (CTranslate2's default of 1 forces a token)
    results = translator.translate_batch(src, beam_size=beam_size, length_penalty=length_penalty,
                                         max_decoding_length=limit, min_decoding_length=0, max_batch_size=batch_size)
    vocab = tokenizer.tgt_tokenizer
    return [tokenizer.decode_tgt([vocab.token_to_id(t) for t in r.hypotheses[0]]) for r in results]
