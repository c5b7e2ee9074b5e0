"""What one search or attention map may use on this server: core's bounds (core/decode.py's DecodeBounds) filled
from playground.limits, and the refusals that name the operator's PLAYGROUND_* variables, made before any work
starts. Core takes its bounds as arguments; the server's quotas and their messages live here."""

from __future__ import annotations

from playground.core.attention_maps import attention_cells
from playground.core.decode import DecodeBounds, DecodeOptions, one_sentence_cache_bytes, output_limit
from playground.core.model import TransformerConfig
from playground.errors import PlaygroundError
from playground.limits import (
    check_time,
    max_attention_cells,
    max_decode_bytes,
    max_decode_tokens,
    max_encoder_flops,
    max_line_chars,
)
from playground.settings import MB

FEWEST_ATTENTION_TOKENS = 4  # a model whose maps cannot show this many tokens is refused rather than drawn


def server_bounds() -> DecodeBounds:
    """The bounds of one call here: a line's characters, one batch's decoder memory and the attention weights from
    the operator's limits, and the deadline of the quick call running on this thread (none outside one)."""
    return DecodeBounds(line_chars=max_line_chars(), batch_bytes=max_decode_bytes(),
                        attention_cells=max_attention_cells(), stop_check=check_time)


def decode_tokens(cfg: TransformerConfig, ids: list[list[int]], opts: DecodeOptions, draws: int = 1) -> int:
    """The most tokens decoding these sources can take: each sentence's output limit x beams (x draws)."""
    return sum(output_limit(cfg, len(i), opts.max_output_tokens) for i in ids) * opts.beams * draws


def encoder_flops(cfg: TransformerConfig, ids: list[list[int]]) -> int:
    """What encoding these sources costs, in multiply-adds x 2: per layer and sentence of n tokens, the attention's
    four projections (8 n d^2), the feed-forward (4 n d d_ff) and the attention itself (4 n^2 d), which grows with
    the square of a sentence's length (24 lines of 4,095 byte tokens on the demo's shape: 730 GFLOP)."""
    d = cfg.d_model
    return cfg.n_encoder_layers * sum(8 * n * d * d + 4 * n * d * cfg.d_ff + 4 * n * n * d for n in map(len, ids))


def check_encoder_work(flops: int, what: str) -> None:
    """Refuse encoding that costs more than max_encoder_flops() before it starts (`what`: the sources, said)."""
    allowed = max_encoder_flops()
    if flops > allowed:
        raise PlaygroundError(
            f"Encoding {what} would take {flops / 1e9:,.0f} GFLOP; one request may take at most {allowed / 1e9:,.0f} "
            "here (the operator sets PLAYGROUND_MAX_ENCODER_GFLOP). Send fewer or shorter sentences.")


def check_decode_work(cfg: TransformerConfig, ids: list[list[int]], opts: DecodeOptions, draws: int = 1) -> None:
    """Refuse a quick call whose decoding could take more than max_decode_tokens(), or more decoder memory for
    one sentence than max_decode_bytes(), before it starts: the sentences, the output length (the request's, else
    the package's positions) and the beams together."""
    longest = max(map(len, ids))
    check_encoder_work(encoder_flops(cfg, ids), f"{len(ids)} sentence{'s' if len(ids) > 1 else ''} of up to "
                                                f"{longest - 1:,} tokens")
    tokens, allowed = decode_tokens(cfg, ids, opts, draws), max_decode_tokens()
    if tokens > allowed:
        longest = max(output_limit(cfg, len(i), opts.max_output_tokens) for i in ids)
        beams = f" x {opts.beam_size} beams" if opts.method == "beam" else ""
        raise PlaygroundError(
            f"This could decode up to {tokens:,} tokens ({len(ids)} sentence{'s' if len(ids) > 1 else ''} of up to "
            f"{longest:,} output tokens{beams}{f' x {draws} draws' if draws > 1 else ''}); one request may decode "
            f"at most {allowed:,} here (the operator sets PLAYGROUND_MAX_DECODE_TOKENS). Translate fewer sentences, "
            "set a lower max output length or beam size, or use `python -m playground translate` for files.")
    check_decode_memory(cfg, ids, opts)


def check_decode_memory(cfg: TransformerConfig, ids: list[list[int]], opts: DecodeOptions) -> None:
    """Refuse decoding whose longest sentence alone needs more decoder memory than one batch may have (the rest
    shrink their batches to fit: core/decode.py's fitting_batch)."""
    one, allowed = one_sentence_cache_bytes(cfg, ids, opts), max_decode_bytes()
    if one > allowed:
        longest, beams = max(len(i) for i in ids), opts.beams
        raise PlaygroundError(
            f"Decoding one sentence of {longest:,} tokens with {beams} beam{'s' if beams > 1 else ''} needs "
            f"{one / MB:,.0f} MB of decoder memory; this server allows {allowed / MB:,.0f} MB (the "
            "operator sets PLAYGROUND_MAX_DECODE_MB). Lower the beam size or the max output length.")


def attention_cell_limit(cfg: TransformerConfig) -> int:
    """The attention weights one request may draw with this model (max_attention_cells()); PlaygroundError when
    its layers x heads leave room for fewer than FEWEST_ATTENTION_TOKENS tokens."""
    allowed = max_attention_cells()
    if attention_cells(cfg, FEWEST_ATTENTION_TOKENS, FEWEST_ATTENTION_TOKENS) > allowed:
        raise PlaygroundError(
            f"This model's {cfg.n_encoder_layers}+{cfg.n_decoder_layers} layers x {cfg.n_heads} heads leave room for "
            f"fewer than {FEWEST_ATTENTION_TOKENS} tokens in the {allowed:,} attention weights one request may draw "
            "here (the operator sets PLAYGROUND_MAX_ATTENTION_CELLS).")
    return allowed
