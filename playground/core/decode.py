"""Search: greedy, sampling (temperature, top-k, top-p) and beam search, batched and with a key/value cache.

The paper translates with beam search (§6.1: beam size 4, output up to the input length + 50, stopping early when
possible) and GNMT's length penalty with α = 0.6 (Wu et al. 2016, "Google's Neural Machine Translation System",
§7: ((5 + length) / 6)^α); here a finished hypothesis scores sum(log p) / length^α, the simpler form, each sentence
may output up to 2 x its source length + 10 tokens, and it stops once it has `beam_size` finished hypotheses.
Sampling's top-p is nucleus sampling (Holtzman et al. 2020, "The Curious Case of Neural Text Degeneration"). Each step
feeds one token per row through Transformer.decode_step (computed as core/decoder_step.py computes it, without its
module calls), whose key/value cache (core/kv_cache.py) holds the rest.
Also what decoding's caches cost and `translate`, sentences in and text out. What one call may
use is the caller's to say (DecodeBounds): this module knows no server, no quota and no environment variable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeAlias

import torch
import torch.nn.functional as F

from playground.core.attention_maps import attention_maps
from playground.core.decoder_step import Step, decoder_step
from playground.core.model import Transformer, TransformerConfig, model_device
from playground.core.sequences import pad_batch, sentence_tokens
from playground.errors import PlaygroundError, numbered

METHODS = ("greedy", "sample", "beam")


@dataclass
class DecodeOptions:
    method: str = "greedy"
    max_output_tokens: int | None = None  # default 2 * source length + 10, capped by the model's positions
    temperature: float = 1.0
    top_k: int = 0  # 0 = no limit
    top_p: float = 1.0  # 1.0 = no nucleus cut
    seed: int | None = 0
    beam_size: int = 5
    length_penalty: float = 1.0  # beam scores are sum(log p) / length ** length_penalty
    nbest: int = 1
    batch_size: int = 64
    return_attention: bool = False

    @property
    def beams(self) -> int:
        """Hypotheses kept per sentence at each step."""
        return self.beam_size if self.method == "beam" else 1

    def check(self) -> None:
        problems = []
        if self.method not in METHODS:
            problems.append(f"method must be one of {', '.join(METHODS)}, not {self.method!r}")
        if self.temperature <= 0:
            problems.append("temperature must be above 0 (use greedy for temperature → 0)")
        if not 0 < self.top_p <= 1:
            problems.append("top-p must be in (0, 1]")
        if self.top_k < 0:
            problems.append("top-k must be 0 (off) or positive")
        if self.beam_size < 1 or self.nbest < 1 or self.batch_size < 1:
            problems.append("beam size, n-best and batch size must be at least 1")
        if self.seed is not None and not 0 <= self.seed < 2**63:  # torch's generators take 64-bit seeds
            problems.append(f"seed must be a whole number from 0 to {2**63 - 1}")
        if self.method == "beam" and self.nbest > self.beam_size:
            problems.append(f"n-best ({self.nbest}) cannot exceed the beam size ({self.beam_size})")
        if problems:
            raise PlaygroundError("Invalid decoding options: " + "; ".join(problems) + ".")


def never_stop() -> None:
    """The stop check of an unbounded call: nothing but its length limits ends a search."""


@dataclass(frozen=True)
class DecodeBounds:
    """What one decoding call may use, set by its caller: the characters of a line kept before it is encoded, the
    bytes of one batch's decoder caches (batches shrink to fit, down to one sentence), the attention weights drawn
    with a translation (attention_maps), a check called between steps that raises to stop the search (a
    deadline), and whether the searches may use oneDNN's copies of the weights (core/packed_weights.py: not in a
    training run, whose own kernels theirs would push out of oneDNN's cache). None: no bound."""

    line_chars: int | None = None
    batch_bytes: int | None = None
    attention_cells: int | None = None
    stop_check: Callable[[], None] = never_stop
    weight_copies: bool = True

    def cut_line(self, text: str) -> str:
        """A line cut to line_chars before it is encoded: encoding a megabyte only to keep its first few hundred
        tokens costs time and memory for nothing."""
        return text if self.line_chars is None else text[: self.line_chars]


UNBOUNDED = DecodeBounds()


@dataclass
class Hypothesis:
    ids: list[int]  # target tokens without <bos>, ending with <eos> when the model stopped
    token_logprobs: list[float]
    score: float  # sum of log-probabilities (beam: normalised by length ** length_penalty)
    text: str = ""


@dataclass
class Translation:
    source: str
    source_ids: list[int]
    hypotheses: list[Hypothesis]  # best first
    attention: dict | None = None  # see attention_maps()
    source_cut: bool = False  # the source had more tokens than the model reads: those past them were not translated

    @property
    def best(self) -> Hypothesis:
        return self.hypotheses[0]

    @property
    def text(self) -> str:
        return self.best.text


@dataclass
class SearchResult:
    """Raw search output for one batch: per sentence, hypotheses best first."""

    hypotheses: list[list[Hypothesis]] = field(default_factory=list)


# ----------------------------------------------------------------------------------------------------------
# Token-level helpers


def source_ids(tokenizer, texts: list[str], cfg: TransformerConfig,
               bounds: DecodeBounds = UNBOUNDED) -> list[list[int]]:
    """Source tokens + <eos>, cut as the trainer cuts them (batching.encode_pairs), so inference never reaches a
    position that training left unfilled; each text is cut by characters first (DecodeBounds.cut_line)."""
    return [ids for ids, _ in encoded_sources(tokenizer, texts, cfg, bounds)]


def encoded_sources(tokenizer, texts: list[str], cfg: TransformerConfig,
                    bounds: DecodeBounds = UNBOUNDED) -> list[tuple[list[int], bool]]:
    """Per text: source_ids' tokens, and whether the text had more tokens than the model reads."""
    texts, most = [bounds.cut_line(text) for text in texts], sentence_tokens(cfg.max_positions)
    return [(ids[:most] + [cfg.eos_id], len(ids) > most) for ids in tokenizer.encode_src_batch(texts)]


def output_limit(cfg: TransformerConfig, source_length: int, max_output_tokens: int | None) -> int:
    """The most target tokens a sentence of `source_length` tokens (with <eos>) may decode (see length_limits)."""
    return max(1, min(max_output_tokens or 2 * source_length + 10, cfg.max_positions - 1))


def cache_bytes(cfg: TransformerConfig, source_length: int, output_length: int, beams: int) -> int:
    """Memory decoding one sentence takes: the decoder's self-attention keys, values and their spare buffer (one
    layer's) for output_length steps, the cross-attention keys and values of the source, and three rows of logits,
    per beam."""
    per_beam = ((2 * cfg.n_decoder_layers + 2) * output_length * cfg.d_model
                + 2 * cfg.n_decoder_layers * source_length * cfg.d_model + 3 * cfg.tgt_vocab_size)
    return 4 * beams * per_beam


def fitting_batch(cfg: TransformerConfig, ids: list[list[int]], opts: DecodeOptions, batch_bytes: int | None) -> int:
    """The batch size that keeps one batch's caches within batch_bytes (at most opts.batch_size, at least one
    sentence: refusing a sentence too big is the caller's, before it calls)."""
    if batch_bytes is None:
        return opts.batch_size
    return max(1, min(opts.batch_size, batch_bytes // one_sentence_cache_bytes(cfg, ids, opts)))


def one_sentence_cache_bytes(cfg: TransformerConfig, ids: list[list[int]], opts: DecodeOptions) -> int:
    """The decoder memory of the longest of these sentences, with its beams."""
    longest = max(len(i) for i in ids)
    return cache_bytes(cfg, longest, output_limit(cfg, longest, opts.max_output_tokens), opts.beams)


def filter_logits(logits: torch.Tensor, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """Temperature, then keep the top-k tokens, then the smallest set whose probability reaches top-p (nucleus
    sampling, Holtzman et al. 2020)."""
    logits = logits / temperature
    if top_k and top_k < logits.size(-1):
        kth = logits.topk(top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        cumulative = sorted_logits.softmax(-1).cumsum(-1)
        # drop a token when the tokens before it already reach top_p (the first one always stays)
        drop_sorted = (cumulative - sorted_logits.softmax(-1)) >= top_p
        logits = logits.masked_fill(drop_sorted.scatter(-1, order, drop_sorted), float("-inf"))
    return logits


def sample_tokens(probs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One token per row of probs [B,V] by inverse-CDF sampling: the same distribution as torch.multinomial at a
    fraction of its cost for large vocabularies (bench/decode_speed.py)."""
    cdf = probs.cumsum(-1)
    u = torch.rand(probs.size(0), 1, generator=generator, device=probs.device) * cdf[:, -1:]
    return torch.searchsorted(cdf, u, right=True).squeeze(1).clamp_(max=probs.size(-1) - 1)


def length_limits(model: Transformer, src: torch.Tensor, max_output_tokens: int | None) -> torch.Tensor:
    """Per sentence: at most max_output_tokens target tokens, by default 2 x its own source length + 10 (so a sentence
    decodes the same alone or in a batch), and never past the model's positions (0 holds <bos>)."""
    src_lengths = (src != model.cfg.pad_id).sum(1)
    limits = torch.full_like(src_lengths, max_output_tokens) if max_output_tokens else 2 * src_lengths + 10
    return limits.clamp(1, model.cfg.max_positions - 1)


def next_token_logprobs(cfg: TransformerConfig, next_logits: Step, tokens: torch.Tensor, state) -> torch.Tensor:
    """[rows, V] log-probabilities of each row's next token (next_logits: core/decoder_step.py's). A model
    that never outputs <pad> and <bos> (Marian's bad_words_ids) gets them at -inf after the softmax, as transformers
    masks them, so the others keep their values."""
    logp = F.log_softmax(next_logits(tokens, state).float(), dim=-1)
    if cfg.never_generate_pad:
        logp[:, cfg.pad_id] = logp[:, cfg.bos_id] = float("-inf")  # scalar fills: no index tensor
    return logp


# ----------------------------------------------------------------------------------------------------------
# Searches over a padded source batch src [B,S]


@torch.inference_mode()
def greedy_or_sample(model: Transformer, src: torch.Tensor, opts: DecodeOptions,
                     stop_check: Callable[[], None] = never_stop, weight_copies: bool = True) -> SearchResult:
    """One token per step for every sentence; finished rows leave the batch so the rest runs on fewer. stop_check
    is called before each step, and weight_copies says whether the steps may use oneDNN's (DecodeBounds)."""
    cfg, B = model.cfg, src.size(0)
    limits = length_limits(model, src, opts.max_output_tokens)
    output_steps = int(limits.max())
    generator = None
    if opts.method == "sample":
        generator = torch.Generator(device=src.device)
        if opts.seed is None:
            generator.seed()  # a fresh seed for this generator only: torch.seed() would re-seed everyone's global RNG
        else:
            generator.manual_seed(opts.seed)
    state, next_logits = model.start_decoding(src, output_steps), decoder_step(model, weight_copies)
    tokens = torch.full((B,), cfg.bos_id, dtype=torch.long, device=src.device)
    rows = torch.arange(B, device=src.device)  # which sentence each live row belongs to
    row_limits, shortest_limit = limits, int(limits.min())  # limits[rows]; the smallest of them
    out_ids = torch.full((B, output_steps), cfg.pad_id, dtype=torch.long, device=src.device)
    out_lp = torch.zeros(B, output_steps, device=src.device)
    lengths = torch.zeros(B, dtype=torch.long, device=src.device)
    # a step at batch 1 takes ~1 ms, so each tensor operation and host sync of the bookkeeping counts: one sync a
    # step (ends.any()), the limits compared only from the first step that reaches one, a row's length written once
    # (when it leaves), and the outputs written as columns while every row is live
    for step in range(output_steps):
        stop_check()
        logp = next_token_logprobs(cfg, next_logits, tokens, state)  # [live, V]
        if generator is None:
            token_lp, tokens = logp.max(-1)
        else:
            probs = filter_logits(logp, opts.temperature, opts.top_k, opts.top_p).softmax(-1)
            tokens = sample_tokens(probs, generator)
            token_lp = logp.gather(1, tokens[:, None]).squeeze(1)
        out_at = (slice(None), step) if len(rows) == B else (rows, step)
        out_ids[out_at], out_lp[out_at] = tokens, token_lp
        ends = tokens == cfg.eos_id
        if step + 1 >= shortest_limit:
            ends |= row_limits <= step + 1
        if not ends.any():
            continue
        lengths[rows[ends]] = step + 1
        keep = (~ends).nonzero().squeeze(1)
        if keep.numel() == 0:
            break
        state.select(keep)
        rows, row_limits, tokens = rows[keep], row_limits[keep], tokens[keep]
        shortest_limit = int(row_limits.min())
    hypotheses = []
    for ids, lps, n in zip(out_ids.tolist(), out_lp.tolist(), lengths.tolist()):  # one copy to Python at the end
        hypotheses.append([Hypothesis(ids[:n], lps[:n], sum(lps[:n]))])
    return SearchResult(hypotheses)


def best_continuations(scores: torch.Tensor, logp: torch.Tensor,
                       count: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The `count` best one-token continuations over each sentence's K beams. scores [n, K]: each beam's summed
    log-probability; logp [n*K, V]: its next-token log-probabilities. Returns, each [n, count], best first: the
    continuation's summed log-probability, the beam it extends, its token and that token's log-probability."""
    n, K = scores.shape
    V = logp.size(-1)
    top_scores, top_index = largest((scores[:, :, None] + logp.view(n, K, V)).view(n, K * V), count)
    # top_index = beam * V + token, also the index of the token's log-probability in logp's [n, K * V] view
    return top_scores, top_index // V, top_index % V, logp.view(n, K * V).gather(1, top_index)


def largest(x: torch.Tensor, k: int, strips: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """x.topk(k, dim=1) for rows much wider than k, in a third of its time (beam search's K x V candidates, where
    topk was an eighth of a step at batch 1: bench/decode_speed.py): each row seen as `strips` strips side by side,
    the k largest values lie in the k columns with the largest maxima (each of them is at least the k-th largest
    column maximum), so topk runs over those k columns only. The same values and indices, up to which of several
    equal values is taken, which topk leaves open too."""
    n, m = x.shape
    if m % strips or m < 4 * strips * k:
        return x.topk(k, dim=1)
    width = m // strips
    grid = x.view(n, strips, width)
    columns = grid.amax(1).topk(k, dim=1).indices  # [n, k]
    values, at = grid.gather(2, columns[:, None, :].expand(n, strips, k)).view(n, strips * k).topk(k, dim=1)
    return values, (at // k) * width + columns.gather(1, at % k)


BeamPath: TypeAlias = "tuple[int, float, BeamPath | None]"  # (token, its log-probability, the path before it)


def unrolled(path: BeamPath | None) -> tuple[list[int], list[float]]:
    """A path's tokens and their log-probabilities, oldest first."""
    ids, logprobs = [], []
    while path is not None:
        token, logprob, path = path
        ids.append(token)
        logprobs.append(logprob)
    return ids[::-1], logprobs[::-1]


def scored_hypothesis(path: BeamPath, length_penalty: float) -> Hypothesis:
    """A finished beam, scored sum(log p) / length ** length_penalty (a length penalty α, in a simpler form than
    GNMT's, which the paper uses: Wu et al. 2016): with α = 0 the plain sum, which favours short outputs; larger α
    favours longer ones."""
    ids, token_logprobs = unrolled(path)
    return Hypothesis(ids, token_logprobs, sum(token_logprobs) / (len(ids) ** length_penalty))


@torch.inference_mode()
def beam_search(model: Transformer, src: torch.Tensor, opts: DecodeOptions,
                trace: list[dict] | None = None, stop_check: Callable[[], None] = never_stop,
                weight_copies: bool = True) -> SearchResult:
    """Beam search: K beams per sentence; a hypothesis ends at <eos>; a sentence ends with K finished ones.

    The decoder and the choice of the 2K best candidates run as tensors; what follows from those 2K per sentence
    (which end, which go on, their paths) is a few dozen numbers, kept in Python: as tensor operations it was some
    twenty small operations a step, and a beam search at batch 1 takes 5% less time without them; at batch 64 the
    Python loop over 64 sentences costs about as much as they did (docs/BENCHMARKS.md, section 2). A beam's tokens
    are a path of (token, log-probability, parent path), shared with the beams it came from and unrolled when it
    ends.

    With a `trace` list, one dict per step is appended (for the step-by-step view): "sentences" [n] (the sentence
    of each live group), "parents" [n][K] (each new beam's beam at the previous step), "tokens" [n][K] and
    "scores" [n][K] (summed log-probabilities) of the open beams, and "finished": the hypotheses that ended at this
    step, as {"sentence", "parent", "hypothesis"}."""
    cfg, B, K = model.cfg, src.size(0), opts.beam_size
    limits = length_limits(model, src, opts.max_output_tokens).tolist()
    device = src.device
    state, next_logits = model.start_decoding(src, max(limits)), decoder_step(model, weight_copies)
    scores = torch.full((B, K), float("-inf"), device=device)
    scores[:, 0] = 0.0  # all beams start identical: let only the first one expand
    tokens = torch.full((B * K,), cfg.bos_id, dtype=torch.long, device=device)
    sentences = list(range(B))  # which sentence each live group of K rows belongs to
    paths: list[list[BeamPath | None]] = [[None] * K for _ in range(B)]  # per live group, each open beam's path
    finished: list[list[Hypothesis]] = [[] for _ in range(B)]
    for step in range(max(limits)):
        stop_check()
        if step == 0:  # the K beams are one: the first step runs on one row per sentence, then the rows are copied
            logp = next_token_logprobs(cfg, next_logits, tokens[::K], state).repeat_interleave(K, dim=0)
        else:
            logp = next_token_logprobs(cfg, next_logits, tokens, state)  # [n*K, V]
        # 2K candidates: at most K of them end in <eos> (one per beam), so K open ones remain
        candidates = [c.tolist() for c in best_continuations(scores, logp, 2 * K)]  # 4 x [n][2K]
        record = {"sentences": sentences, "parents": [], "tokens": [], "scores": [], "finished": []}
        kept, rows, next_scores, next_tokens, next_paths = [], [], [], [], []
        for i, (b, group_paths, *group) in enumerate(zip(sentences, paths, *candidates)):
            at_limit = limits[b] <= step + 1
            beams, ended = next_beams(group_paths, group, K, cfg.eos_id, at_limit, finished[b], opts.length_penalty)
            parents, beam_scores, beam_paths = zip(*beams)
            if trace is not None:
                record["finished"] += [{"sentence": b, "parent": k, "hypothesis": hyp} for k, hyp in ended]
                record["parents"].append(list(parents))
                record["tokens"].append([path[0] for path in beam_paths])
                record["scores"].append(list(beam_scores))
            if not at_limit and len(finished[b]) < K:  # not done: it keeps its beams
                kept.append(b)
                rows += [i * K + k for k in parents]  # the parents' rows in the decoder state
                next_scores.append(beam_scores)
                next_tokens += [path[0] for path in beam_paths]
                next_paths.append(beam_paths)
        if trace is not None:
            trace.append(record)
        if not kept:
            break
        leaving = len(kept) < len(sentences)  # a sentence is done: its group leaves the batch
        if step == 0:  # one row per sentence so far: each beam's row is its sentence's, the encoder side too
            state.select(torch.tensor([row // K for row in rows], device=device))
        elif leaving or rows != list(range(len(rows))):  # no copy when every beam extends its own row
            # among one source's beams the encoder side is the same: it is selected only when groups leave
            state.select(torch.tensor(rows, device=device), memory=leaving)
        sentences, paths = kept, next_paths
        scores = torch.tensor(next_scores, dtype=logp.dtype, device=device)
        tokens = torch.tensor(next_tokens, device=device)

    results = []
    for hyps in finished:
        hyps.sort(key=lambda h: h.score, reverse=True)
        results.append(hyps[: opts.nbest])
    return SearchResult(results)


def next_beams(paths: list[BeamPath | None] | tuple[BeamPath | None, ...],
               candidates: list[list], beam_size: int, eos_id: int, at_limit: bool, finished: list[Hypothesis],
               length_penalty: float) -> tuple[list[tuple[int, float, BeamPath]], list[tuple[int, Hypothesis]]]:
    """One sentence's step. `candidates`: its 2K best continuations, best first, as four lists (summed
    log-probabilities, beams, tokens, token log-probabilities). Those among the first K that end (<eos>, or any at
    the sentence's length limit) are appended to `finished` while it has fewer than K; the K best that do not end in
    <eos> become its beams. Returns the beams as (parent beam, summed log-probability, path), and the hypotheses
    that ended as (parent beam, hypothesis). Each beam has at most one <eos> among the 2K, so at least K of them do
    not end in it."""
    beams, ended = [], []
    for j, (score, k, token, logprob) in enumerate(zip(*candidates)):
        path = (token, logprob, paths[k])
        if j < beam_size and (token == eos_id or at_limit) and len(finished) < beam_size and score > float("-inf"):
            finished.append(scored_hypothesis(path, length_penalty))
            ended.append((k, finished[-1]))
        if token != eos_id:
            beams.append((k, score, path))
    return beams[:beam_size], ended


# ----------------------------------------------------------------------------------------------------------
# Sentences in, translations out


def distinct_hypotheses(hypotheses: list[Hypothesis]) -> list[tuple[Hypothesis, int]]:
    """The hypotheses (best first) with those of the same text merged: (the best-scored one, how many there were).
    Beam search can finish the same words as two token sequences ("Student." as "_Student ." and "_St udent ."),
    and sampling draws the same sentence again and again."""
    merged: dict[str, list] = {}
    for h in hypotheses:
        if h.text in merged:
            merged[h.text][1] += 1
        else:
            merged[h.text] = [h, 1]
    return [(h, count) for h, count in merged.values()]


def cut_sources_note(translations: list[Translation], unit: str = "Line") -> str:
    """Which of these sources (counted from 1 as `unit`s) had more tokens than the model reads ("" when none): only
    their first tokens were translated."""
    cut = [i + 1 for i, t in enumerate(translations) if t.source_cut]
    if not cut:
        return ""
    most = len(translations[cut[0] - 1].source_ids) - 1  # a cut source holds as many as the model reads, and <eos>
    many = len(cut) > 1
    return (f"{unit}{'s' if many else ''} {numbered(cut)} {'have' if many else 'has'} more tokens than this model "
            f"reads ({most:,}): only {'their' if many else 'its'} first {most:,} tokens were translated. Split long "
            "lines into sentences.")


def translate(model: Transformer, tokenizer, sentences: list[str], opts: DecodeOptions | None = None,
              bounds: DecodeBounds = UNBOUNDED,
              encoded: list[tuple[list[int], bool]] | None = None) -> list[Translation]:
    """Translate many sentences: sorted by length into batches (less padding), results in input order, within the
    caller's bounds. `encoded`: the sentences' encoded_sources, when the caller has them already."""
    opts = opts or DecodeOptions()
    opts.check()
    model.eval()
    device = model_device(model)
    encoded = encoded_sources(tokenizer, sentences, model.cfg, bounds) if encoded is None else encoded
    if not encoded:
        return []
    ids = [source for source, _ in encoded]
    order = sorted(range(len(sentences)), key=lambda i: len(ids[i]))
    search = beam_search if opts.method == "beam" else greedy_or_sample
    results: list[Translation | None] = [None] * len(sentences)
    batch_size = fitting_batch(model.cfg, ids, opts, bounds.batch_bytes)
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        src = pad_batch([ids[i] for i in chunk], pad_id=model.cfg.pad_id).to(device)
        found = search(model, src, opts, stop_check=bounds.stop_check, weight_copies=bounds.weight_copies)
        for i, hyps in zip(chunk, found.hypotheses):
            for h in hyps:
                h.text = tokenizer.decode_tgt(h.ids)
            results[i] = Translation(bounds.cut_line(sentences[i]), ids[i], hyps, source_cut=encoded[i][1])
    if opts.return_attention:
        for t in results:
            t.attention = attention_maps(model, tokenizer, t.source_ids, [model.cfg.bos_id] + t.best.ids,
                                         bounds.attention_cells)
    return results
