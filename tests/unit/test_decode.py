import pytest
import torch
from helpers import DEMO, peaked

from playground.core.decode import DecodeOptions, filter_logits, greedy_or_sample, largest, translate
from playground.errors import PlaygroundError
from playground.insight.inspection import next_token_table

SENTENCES = ["the cat sees the dog", "a dog runs", "the small bird sings", "we see a red ball a dog"]


def test_greedy_translations_are_independent_of_batching(model, tokenizer):
    peaked(model)
    together = translate(model, tokenizer, SENTENCES, DecodeOptions("greedy", batch_size=64))
    alone = [translate(model, tokenizer, [s], DecodeOptions("greedy"))[0] for s in SENTENCES]
    assert [t.best.ids for t in together] == [t.best.ids for t in alone]
    for t in together:
        assert len(t.best.token_logprobs) == len(t.best.ids)
        assert t.best.score == pytest.approx(sum(t.best.token_logprobs))
        assert t.text == tokenizer.decode_tgt(t.best.ids)


def test_greedy_picks_the_argmax_of_full_recomputation(model, tokenizer):
    peaked(model)
    t = translate(model, tokenizer, SENTENCES[:1], DecodeOptions("greedy", max_output_tokens=6))[0]
    src = torch.tensor([t.source_ids])
    tgt = torch.tensor([[model.cfg.bos_id] + t.best.ids[:-1]])
    logp = model(src, tgt)[0].log_softmax(-1)
    assert logp.argmax(-1).tolist() == t.best.ids
    torch.testing.assert_close(logp.max(-1).values, torch.tensor(t.best.token_logprobs), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("width", [40_000, 10_000, 130, 40_001])  # 130 and 40,001: topk itself
def test_the_largest_candidates_are_topks(width):
    g = torch.Generator().manual_seed(width)
    rows = torch.randn(3, width, generator=g).log_softmax(-1) - torch.rand(3, 1, generator=g)
    rows[0, width // 5 :] = float("-inf")  # beam search's first step: only the first beam's candidates count
    rows[1, :: width // 9] += 30  # the best ones spread over the row
    values, index = largest(rows, 10)
    expected = rows.topk(10, dim=1)
    assert torch.equal(values, expected.values) and torch.equal(index, expected.indices)


def test_greedy_stops_at_the_first_eos(model, tokenizer):
    shift_eos(model, 100)  # <eos> the best token everywhere
    stopped = translate(model, tokenizer, SENTENCES, DecodeOptions("greedy", max_output_tokens=9))
    assert [t.best.ids for t in stopped] == [[model.cfg.eos_id]] * len(SENTENCES)


def test_greedy_stops_at_the_max_output_length_without_an_eos(model, tokenizer):
    shift_eos(model, -100)  # <eos> never wins
    cut = translate(model, tokenizer, SENTENCES, DecodeOptions("greedy", max_output_tokens=9))
    assert [len(t.best.ids) for t in cut] == [9] * len(SENTENCES)
    assert all(model.cfg.eos_id not in t.best.ids for t in cut)


def test_each_sentence_runs_to_its_own_length_limit_in_one_batch(model, tokenizer):
    shift_eos(model, -100)  # <eos> never wins: each output ends at 2 x its source + 10, at a different step
    for method in ("greedy", "beam"):
        results = translate(model, tokenizer, SENTENCES, DecodeOptions(method, beam_size=3))
        assert [len(t.best.ids) for t in results] == [min(2 * len(t.source_ids) + 10, 31) for t in results]
        assert len({len(t.best.ids) for t in results}) > 1


def test_beam_at_a_one_token_limit_ends_every_beam_at_once(model, tokenizer):
    results = translate(model, tokenizer, SENTENCES, DecodeOptions("beam", beam_size=4, nbest=4, max_output_tokens=1))
    for t in results:
        assert len(t.hypotheses) == 4 and all(len(h.ids) == 1 for h in t.hypotheses)
        assert [h.score for h in t.hypotheses] == sorted((h.score for h in t.hypotheses), reverse=True)
        assert len({h.ids[0] for h in t.hypotheses}) == 4  # the four best first tokens, each once


def test_sampling_repeats_with_a_seed_and_differs_across_seeds(model, tokenizer):
    def opts(seed):
        return DecodeOptions("sample", seed=seed, max_output_tokens=8, temperature=1.5)
    a = [t.best.ids for t in translate(model, tokenizer, SENTENCES, opts(1))]
    b = [t.best.ids for t in translate(model, tokenizer, SENTENCES, opts(1))]
    c = [t.best.ids for t in translate(model, tokenizer, SENTENCES, opts(2))]
    assert a == b
    assert a != c


def test_filter_logits_keeps_top_k_and_nucleus():
    logits = torch.log(torch.tensor([[0.5, 0.2, 0.15, 0.1, 0.05]]))
    def kept(out):
        return torch.isfinite(out)[0].tolist()
    assert kept(filter_logits(logits, 1.0, 2, 1.0)) == [True, True, False, False, False]
    assert kept(filter_logits(logits, 1.0, 0, 0.6)) == [True, True, False, False, False]  # 0.5 < 0.6 ≤ 0.7
    assert kept(filter_logits(logits, 1.0, 0, 0.5)) == [True, False, False, False, False]
    assert kept(filter_logits(logits, 1.0, 0, 1.0)) == [True] * 5
    sharper = filter_logits(logits, 0.5, 0, 1.0).softmax(-1)
    assert sharper[0, 0] > 0.5


def test_sampled_tokens_stay_inside_top_k(model, tokenizer):
    src = torch.tensor([translate(model, tokenizer, SENTENCES[:1])[0].source_ids])
    for seed in range(5):
        opts = DecodeOptions("sample", top_k=2, seed=seed, max_output_tokens=6)
        out = greedy_or_sample(model, src, opts).hypotheses[0][0]
        tgt = torch.tensor([[model.cfg.bos_id] + out.ids[:-1]])
        top2 = model(src, tgt)[0].topk(2, dim=-1).indices
        assert all(tok in top2[t].tolist() for t, tok in enumerate(out.ids))


def test_beam_of_one_equals_greedy(model, tokenizer):
    peaked(model)
    greedy = translate(model, tokenizer, SENTENCES, DecodeOptions("greedy", max_output_tokens=12))
    beam = translate(model, tokenizer, SENTENCES, DecodeOptions("beam", beam_size=1, max_output_tokens=12))
    assert [t.best.ids for t in greedy] == [t.best.ids for t in beam]


def test_beam_nbest_is_sorted_distinct_and_at_least_as_good_as_greedy(model, tokenizer):
    peaked(model)
    opts = DecodeOptions("beam", beam_size=4, nbest=4, length_penalty=0.0, max_output_tokens=10)
    greedy = translate(model, tokenizer, SENTENCES, DecodeOptions("greedy", max_output_tokens=10))
    for g, t in zip(greedy, translate(model, tokenizer, SENTENCES, opts)):
        scores = [h.score for h in t.hypotheses]
        assert len(t.hypotheses) == 4 and scores == sorted(scores, reverse=True)
        assert len({tuple(h.ids) for h in t.hypotheses}) == 4
        for h in t.hypotheses:
            assert h.score == pytest.approx(sum(h.token_logprobs), abs=1e-4)
        # greedy's output, finished or cut at the same length, is one of the beam's candidates: the beam's best
        # (unnormalised, length_penalty 0) scores at least as well
        assert t.best.score >= g.best.score - 1e-4


def textbook_beam(model, source_ids: list[int], K: int, limit: int, alpha: float) -> list[tuple[list[int], float]]:
    """Beam search as the textbook writes it, for one sentence: the whole prefix of every beam through the model at
    every step (no cache, no batch, no flat step), its 2K best continuations; of the best K, those that end (<eos>,
    or any at the length limit) are finished while fewer than K are, and the K best that do not end in <eos> go on.
    Returns the finished hypotheses as (ids, sum(log p) / length ** alpha), best first."""
    cfg, src = model.cfg, torch.tensor([source_ids])
    beams, finished = [(0.0, [], [])], []  # (summed log-probability, ids, token log-probabilities)
    for step in range(limit):
        candidates = []
        for score, ids, logprobs in beams:
            logp = model(src, torch.tensor([[cfg.bos_id] + ids]))[0, -1].float().log_softmax(-1)
            top = logp.topk(2 * K)
            candidates += [(score + lp, ids + [token], logprobs + [lp])
                           for lp, token in zip(top.values.tolist(), top.indices.tolist())]
        candidates.sort(key=lambda c: c[0], reverse=True)
        at_limit, beams = step + 1 >= limit, []
        for j, (score, ids, logprobs) in enumerate(candidates[: 2 * K]):
            if j < K and (ids[-1] == cfg.eos_id or at_limit) and len(finished) < K:
                finished.append((ids, sum(logprobs) / len(ids) ** alpha))
            if ids[-1] != cfg.eos_id:
                beams.append((score, ids, logprobs))
        beams = beams[:K]
        if at_limit or len(finished) >= K:
            break
    return sorted(finished, key=lambda h: h[1], reverse=True)


@pytest.mark.parametrize("confident", [True, False])  # outputs that end in <eos>, and outputs cut at the limit
def test_beam_search_finds_what_the_textbook_search_finds(model, tokenizer, confident):
    """The search as it runs (a batch of sources with padding, sentences leaving it at different steps, the KV
    cache and its reorders, the flat decoder step, the strip-wise topk, the beams' shared paths) against
    textbook_beam, sentence by sentence: the same hypotheses, in the same order, with the same scores."""
    if confident:
        peaked(model)
    for K, alpha in [(2, 0.0), (3, 0.6), (5, 1.0)]:
        opts = DecodeOptions("beam", beam_size=K, nbest=K, length_penalty=alpha, max_output_tokens=9, batch_size=64)
        for t in translate(model, tokenizer, SENTENCES, opts):
            expected = textbook_beam(model, t.source_ids, K, 9, alpha)
            assert [h.ids for h in t.hypotheses] == [ids for ids, _ in expected], (K, alpha, t.source)
            assert [h.score for h in t.hypotheses] == pytest.approx([score for _, score in expected], abs=1e-4)


def test_beam_scores_match_the_model(model, tokenizer):
    peaked(model)
    t = translate(model, tokenizer, SENTENCES[:1], DecodeOptions("beam", beam_size=3, nbest=3, max_output_tokens=8))[0]
    assert_scores_match_the_model(model, t)


def test_attention_maps_on_request(model, tokenizer):
    opts = DecodeOptions("greedy", max_output_tokens=5, return_attention=True)
    t = translate(model, tokenizer, SENTENCES[:1], opts)[0]
    att = t.attention
    L, H = model.cfg.n_decoder_layers, model.cfg.n_heads
    assert att["cross"].shape == (L, H, len(t.best.ids) + 1, len(t.source_ids))
    assert att["encoder"].shape == (L, H, len(t.source_ids), len(t.source_ids))
    assert len(att["src_tokens"]) == len(t.source_ids) and att["tgt_tokens"][0] == "<bos>"


def test_next_token_table_lists_the_chosen_token(model, tokenizer):
    peaked(model)
    t = translate(model, tokenizer, SENTENCES[:1], DecodeOptions("greedy", max_output_tokens=5))[0]
    rows = next_token_table(model, tokenizer, t.source_ids, t.best.ids, k=3)
    assert len(rows) == len(t.best.ids)
    for row in rows:
        probs = [p for _, p in row["top"]]
        assert probs == sorted(probs, reverse=True) and row["top"][0][0] == row["chosen"]


def test_bad_options_get_a_clear_message(model, tokenizer):
    with pytest.raises(PlaygroundError, match="n-best"):
        translate(model, tokenizer, SENTENCES, DecodeOptions("beam", beam_size=2, nbest=3))
    with pytest.raises(PlaygroundError, match="temperature"):
        translate(model, tokenizer, SENTENCES, DecodeOptions("sample", temperature=0))


def test_inverse_cdf_sampling_follows_the_distribution():
    from playground.core.decode import sample_tokens

    probs = torch.tensor([[0.1, 0.0, 0.6, 0.3]]).expand(20000, 4)
    drawn = sample_tokens(probs, torch.Generator().manual_seed(0))
    freq = torch.bincount(drawn, minlength=4).float() / len(drawn)
    assert freq[1] == 0
    torch.testing.assert_close(freq, probs[0], atol=0.015, rtol=0)


def test_beam_scores_match_the_model_when_sentences_finish_at_different_steps(model, tokenizer):
    peaked(model)  # each sentence's own length limit (2 x its source + 10) ends it at a different step
    results = translate(model, tokenizer, SENTENCES, DecodeOptions("beam", beam_size=3, nbest=3))
    assert len({len(t.best.ids) for t in results}) > 1
    for t in results:
        assert_scores_match_the_model(model, t)


def test_long_sources_are_cut_as_the_trainer_cuts_them(tokenizer):
    from playground.core.decode import encoded_sources, source_ids
    from playground.data.batching import encode_pairs
    from playground.training.config import TrainConfig

    train_cfg = TrainConfig(max_sentence_tokens=6, batch_tokens=64, max_steps=1)
    model_cfg = train_cfg.model_config(tokenizer.src_vocab_size, tokenizer.tgt_vocab_size, True)
    long = "the cat sees the dog " * 5
    trainer_cut = encode_pairs(tokenizer, [(long, "x")], train_cfg.max_sentence_tokens)[0][0]
    assert source_ids(tokenizer, [long], model_cfg)[0] == trainer_cut
    # and the cut is known, for the Translate tab to say (its note: tests/app/test_app.py)
    assert [cut for _, cut in encoded_sources(tokenizer, [long, "the cat"], model_cfg)] == [True, False]


def test_n_best_lists_distinct_sentences_and_counts_identical_samples():
    from playground.core.decode import DecodeOptions, distinct_hypotheses, translate
    from playground.packages.store import load_package

    demo = load_package(DEMO, "cpu")
    # the demo's beam finishes "Heute schwimmt ein Student." as two token sequences, as reported
    beams = translate(demo.model, demo.tokenizer, ["Today a student swims."], DecodeOptions("beam", nbest=5))[0]
    texts = [h.text for h in beams.hypotheses]
    distinct = distinct_hypotheses(beams.hypotheses)
    assert len(distinct) < len(texts)  # some sentence came more than once
    assert [h.text for h, _ in distinct] == list(dict.fromkeys(texts))  # each sentence once, best first
    assert [count for _, count in distinct] == [texts.count(h.text) for h, _ in distinct]
    assert distinct[0][0].score == max(h.score for h in beams.hypotheses)
    draws = [h for seed in range(6)
             for h in translate(demo.model, demo.tokenizer, ["She follows a child."],
                                DecodeOptions("sample", seed=seed, temperature=0.3))[0].hypotheses]
    grouped = distinct_hypotheses(draws)
    assert sum(count for _, count in grouped) == 6 and len(grouped) < 6  # a confident model draws repeats


def shift_eos(model, by: float) -> None:
    """Add `by` to the model's <eos> logit at every position (a hook on its output layer)."""
    shift = torch.zeros(model.cfg.tgt_vocab_size)
    shift[model.cfg.eos_id] = by
    model.output.register_forward_hook(lambda module, inputs, output: output + shift)


def assert_scores_match_the_model(model, t) -> None:
    """Each hypothesis' token log-probabilities are the model's, teacher-forced on that hypothesis."""
    src = torch.tensor([t.source_ids])
    for h in t.hypotheses:
        tgt = torch.tensor([[model.cfg.bos_id] + h.ids[:-1]])
        logp = model(src, tgt)[0].log_softmax(-1).gather(1, torch.tensor(h.ids)[:, None]).squeeze(1)
        torch.testing.assert_close(logp, torch.tensor(h.token_logprobs), atol=1e-4, rtol=1e-4)


def test_the_cli_says_which_lines_had_more_tokens_than_the_model_reads(capsys, one_thread):
    from playground.cli.main import main

    assert main(["translate", "--model", str(DEMO), "A dog runs.", "the dog runs " * 40]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 2
    assert ("note: Sentence 2 has more tokens than this model reads (64): only its first 64 tokens were translated"
            in err)


def test_the_note_names_the_cut_lines_and_counts_them_past_five():
    from playground.core.decode import Hypothesis, Translation, cut_sources_note

    def translation(cut: bool) -> Translation:
        return Translation("s", [5] * (7 if cut else 3) + [3], [Hypothesis([], [], 0.0)], source_cut=cut)

    assert cut_sources_note([translation(False)] * 3) == ""
    one = cut_sources_note([translation(False), translation(True)])
    assert one.startswith("Line 2 has more tokens than this model reads (7): only its first 7 tokens")
    many = cut_sources_note([translation(True)] * 7, unit="Sentence")
    assert many.startswith("Sentences 1, 2, 3, 4, 5 … (7 in all) have more tokens than this model reads (7): only "
                           "their first 7 tokens")
