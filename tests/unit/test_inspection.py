"""The "see inside" views' pure functions (playground.insight.inspection and plots): positional encodings, masks,
decoding step by step, batching, embeddings, and their figures, on small models with each architecture choice."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import PAIRS, peaked, tiny_model

from playground.core.decode import DecodeOptions, beam_search, source_ids, translate
from playground.core.sequences import pad_batch
from playground.core.tokenizer import PAD_ID, train_tokenizer
from playground.data.batching import encode_pairs, make_batches
from playground.insight import decoding_plots, inspection, model_plots, plots

SENTENCE = "the cat sees the dog"


pytestmark = pytest.mark.usefixtures("one_thread")


# ----------------------------------------------------------------------------------------------------------
# Positional encoding


def test_sinusoidal_table_is_the_models_buffer(model):
    table = inspection.positional_encoding(model)
    assert table.shape == (model.cfg.max_positions, model.cfg.d_model)
    np.testing.assert_array_equal(table, model.src_embed.table.numpy())
    np.testing.assert_array_equal(inspection.positional_encoding(model, "target"), table)
    assert table[0, 0] == 0 and table[0, 1] == 1  # sin(0), cos(0)


def test_learned_encoding_is_each_sides_positions_embedding(tokenizer):
    model = tiny_model(tokenizer, positional_encoding="learned")
    np.testing.assert_array_equal(inspection.positional_encoding(model, "source"),
                                  model.src_embed.positions.weight.detach().numpy())
    np.testing.assert_array_equal(inspection.positional_encoding(model, "target"),
                                  model.tgt_embed.positions.weight.detach().numpy())
    with pytest.raises(Exception, match="side"):
        inspection.positional_encoding(model, "middle")


def test_curve_dimensions_spread_over_the_frequencies():
    assert inspection.curve_dimensions(128) == [0, 8, 16, 32]
    assert inspection.curve_dimensions(512) == [0, 32, 64, 128]
    assert inspection.curve_dimensions(2) == [0]


# ----------------------------------------------------------------------------------------------------------
# Masks


def test_masks_have_their_zeros_where_the_padding_and_the_future_are(model, tokenizer):
    batch = inspection.mask_batch(model, tokenizer, PAIRS, n_pairs=4, seed=1)
    B, S = batch.padding_mask.shape
    assert B == 4 and batch.padding_mask.sum(1).max() == S  # padded to the longest pair, as the trainer pads on a CPU
    for row, tokens in enumerate(batch.src_tokens):
        assert len(tokens) == S
        assert batch.padding_mask[row].tolist() == [0 if t == "<pad>" else 1 for t in tokens]
        assert tokens[batch.padding_mask[row].sum() - 1] == "<eos>"
        square = batch.self_attention_mask(row)
        assert square.shape == (S, S) and (square == batch.padding_mask[row]).all()
    T = batch.look_ahead_mask.shape[0]
    assert all(len(t) == T and t[0] == "<bos>" for t in batch.tgt_tokens)
    i, j = np.indices((T, T))
    np.testing.assert_array_equal(batch.look_ahead_mask, (j <= i).astype(int))


def test_masks_need_data(model, tokenizer):
    with pytest.raises(Exception, match="Load data"):
        inspection.mask_batch(model, tokenizer, [])


# ----------------------------------------------------------------------------------------------------------
# Decoding step by step


def test_greedy_steps_follow_the_argmax(model, tokenizer):
    peaked(model)
    opts = DecodeOptions("greedy", max_output_tokens=8, temperature=1.5, top_k=3, seed=2)
    hypothesis, steps = inspection.sampling_steps(model, tokenizer, SENTENCE, opts, k=4)
    assert hypothesis.ids == translate(model, tokenizer, [SENTENCE], opts)[0].best.ids
    assert [s.step for s in steps] == list(range(1, len(hypothesis.ids) + 1))
    assert [s.taken for s in steps] == tokenizer.tgt_tokens(hypothesis.ids)
    for s in steps:
        probs = [p for _, p, _ in s.candidates]
        assert probs == sorted(probs, reverse=True) and len(s.candidates) == 4
        assert s.greedy == s.taken == s.candidates[0][0]  # greedy choice = argmax of the step table
        sampling = [q for _, _, q in s.candidates]
        assert sampling[3] == 0.0 and sum(sampling[:3]) == pytest.approx(1.0, abs=1e-5)  # top-k 3 cut the 4th
        assert s.sampled in [t for t, _, _ in s.candidates[:3]]  # the draw obeys top-k


def test_sampled_steps_are_the_sampled_translation(model, tokenizer):
    opts = DecodeOptions("sample", max_output_tokens=8, temperature=1.2, top_p=0.9, seed=5)
    hypothesis, steps = inspection.sampling_steps(model, tokenizer, SENTENCE, opts)
    assert hypothesis.ids == translate(model, tokenizer, [SENTENCE], opts)[0].best.ids  # same seed, same draws
    assert all(s.sampled == s.taken for s in steps)
    assert all(s.greedy == s.candidates[0][0] for s in steps)


def test_beam_trace_leaves_the_search_unchanged(model, tokenizer):
    peaked(model)
    opts = DecodeOptions("beam", beam_size=3, nbest=3, max_output_tokens=9)
    src = pad_batch(source_ids(tokenizer, [SENTENCE, "a dog runs"], model.cfg), pad_id=PAD_ID)
    trace: list[dict] = []
    traced, plain = beam_search(model, src, opts, trace), beam_search(model, src, opts)
    assert [[h.ids for h in hyps] for hyps in traced.hypotheses] == [[h.ids for h in hyps] for hyps in plain.hypotheses]
    assert trace and all(len(r["sentences"]) == len(r["scores"]) == len(r["parents"]) for r in trace)


def test_beam_steps_are_consistent_with_the_final_hypotheses(model, tokenizer):
    peaked(model)
    opts = DecodeOptions("beam", beam_size=3, nbest=3, max_output_tokens=9, length_penalty=0.6)
    hypotheses, nodes = inspection.beam_steps(model, tokenizer, SENTENCE, opts)
    expected = translate(model, tokenizer, [SENTENCE], opts)[0].hypotheses
    assert [h.ids for h in hypotheses] == [h.ids for h in expected]
    beams = {(n.step, n.rank): n for n in nodes if not n.finished}
    finished = [n for n in nodes if n.finished]
    for h in hypotheses:  # every final hypothesis ended in the trace, with its score ...
        ended = [n for n in finished if n.text == h.text and n.score == pytest.approx(h.score)]
        assert ended, h.text
        node, logp = ended[0], np.cumsum(h.token_logprobs)
        assert node.step == len(h.ids) and node.logp == pytest.approx(logp[-1], abs=1e-4)
        assert node.score == pytest.approx(node.logp / len(h.ids) ** 0.6, abs=1e-4)
        parent = beams[(node.step - 1, node.parent)]  # ... and its prefixes are beams with the prefix's log p
        while parent.step > 0:
            assert parent.logp == pytest.approx(logp[parent.step - 1], abs=1e-4)
            parent = beams[(parent.step - 1, parent.parent)]
    for step in {n.step for n in beams.values() if n.step > 0}:  # beams are ranked by score at every step
        scores = [beams[(step, r)].logp for r in range(opts.beam_size) if (step, r) in beams]
        assert scores == sorted(scores, reverse=True)


# ----------------------------------------------------------------------------------------------------------
# Batching and embeddings


def test_grouped_batches_pad_less_than_random_ones(tokenizer):
    words = "the cat sees a dog runs small bird sings".split()
    rng = np.random.default_rng(0)
    lengths = rng.choice([2, 3, 25, 30], size=300)  # skewed: mostly very short or very long
    pairs = [(" ".join(rng.choice(words, n)), " ".join(rng.choice(words, n))) for n in lengths]
    random_batches, grouped = inspection.compare_batching(tokenizer, pairs, batch_tokens=800, max_sentence_tokens=64)
    assert grouped.padding_per_sequence < random_batches.padding_per_sequence / 3
    assert grouped.batches == random_batches.batches  # the same batch sizes, cut two ways
    assert sum(grouped.real_tokens) == sum(random_batches.real_tokens)
    assert max(grouped.padded_tokens) <= 800 < max(random_batches.padded_tokens)
    encoded = encode_pairs(tokenizer, pairs, 64)
    assert grouped.batches == len(make_batches(encoded, 800, 0))


def test_batch_padding_counts_tokens_to_the_longest_sentence():
    encoded = [([1, 2, 3], [1]), ([1], [1, 2, 3, 4])]  # target lengths count <bos>/<eos>: 2 and 5
    stats = inspection.batch_padding(encoded, [[0, 1]], "one batch")
    assert (stats.src_padding, stats.tgt_padding) == (1.0, 1.5)
    assert stats.real_tokens == [11] and stats.padded_tokens == [16]
    assert stats.padding_share == pytest.approx(5 / 16)


def test_pca_returns_n_by_2_along_the_largest_spread():
    direction = torch.tensor([3.0, 4.0, 0.0]) / 5
    points = torch.linspace(-2, 2, 9)[:, None] * direction + 0.01 * torch.randn(9, 3)
    coords, explained = inspection.pca_2d(points)
    assert coords.shape == (9, 2) and explained[0] > 0.99 and explained[0] >= explained[1]
    assert np.corrcoef(coords[:, 0], np.linspace(-2, 2, 9))[0, 1] ** 2 > 0.99


def test_embedding_map_of_a_joint_vocabulary(model, tokenizer):
    emb = inspection.embedding_map(model, tokenizer, PAIRS, n_tokens=30)
    assert emb.coords.shape == (len(emb.labels), 2) and len(emb.labels) <= 30
    assert set(emb.groups) <= {"source only", "target only", "both"} and "target only" in emb.groups
    assert "▁the" in emb.labels and not {"<pad>", "<bos>", "<eos>", "<unk>"} & set(emb.labels)
    without_data = inspection.embedding_map(model, tokenizer, (), n_tokens=12)
    assert without_data.coords.shape == (12, 2) and set(without_data.groups) == {"vocabulary"}


def test_embedding_map_of_separate_vocabularies():
    separate = train_tokenizer(PAIRS, kind="word", vocab_size=60, joint=False)
    model = tiny_model(separate, tie_embeddings=False)
    emb = inspection.embedding_map(model, separate, PAIRS, n_tokens=20)
    assert emb.coords.shape == (len(emb.labels), 2)
    assert emb.groups.count("source") == 10 and emb.groups.count("target") == 10


# ----------------------------------------------------------------------------------------------------------
# Figures


def test_every_view_has_a_figure(model, tokenizer):
    peaked(model)
    table = inspection.positional_encoding(model)
    assert model_plots.positional_heatmap(table).data[0].z.shape == table.shape
    assert [t.name for t in model_plots.positional_curves(table, [0, 8]).data] == ["dim 0", "dim 8"]
    batch = inspection.mask_batch(model, tokenizer, PAIRS, 3)
    assert model_plots.padding_mask_figure(batch.padding_mask, batch.src_tokens).data[0].text is not None
    look_ahead = model_plots.attention_mask_figure(batch.look_ahead_mask, batch.tgt_tokens[0], batch.tgt_tokens[0])
    assert len(look_ahead.data) == 1
    _, steps = inspection.sampling_steps(model, tokenizer, SENTENCE, DecodeOptions("greedy", max_output_tokens=5))
    fig = decoding_plots.sampling_steps_figure(steps)
    assert "✓" in fig.data[0].text[0][0] and "●" in str(fig.data[0].text)
    opts = DecodeOptions("beam", beam_size=2, max_output_tokens=6)
    _, nodes = inspection.beam_steps(model, tokenizer, SENTENCE, opts)
    assert {t.name for t in decoding_plots.beam_tree_figure(nodes).data} >= {"open beam", "best hypothesis"}
    random_batches, grouped = inspection.compare_batching(tokenizer, PAIRS, 256, 30)
    assert len(plots.batching_figure(random_batches, grouped, 256).data) == 5
    emb = inspection.embedding_map(model, tokenizer, PAIRS, 20)
    emb_figure = model_plots.embedding_figure(emb.coords, emb.labels, emb.groups, emb.explained)
    assert len(emb_figure.data) == len(set(emb.groups))


# ----------------------------------------------------------------------------------------------------------
# Through the web UI: the demo model and small packages with the other architecture choices


def test_plots_are_pure_figures():
    steps = list(range(1, 5001))
    fig = plots.loss_figure(steps, [1 / s for s in steps], [{"step": 100, "val_loss": 0.5}])
    assert len(fig.data[0].x) <= plots.MAX_POINTS + 1 and fig.data[2].name == "validation"
    assert plots.ema([1.0, 1.0, 1.0]) == pytest.approx([1.0, 1.0, 1.0])  # bias-corrected
    assert model_plots.token_labels(["the", "cat", "the"]) == ["0:the", "1:cat", "2:the"]
    grid = model_plots.attention_grid(np.random.rand(2, 3, 4, 5), list("abcde"), list("wxyz"))
    assert len(grid.data) == 6
