"""The "see inside" views: the pure data functions of playground.insight.inspection (positional encodings, masks, decoding
step by step, batching, embeddings), their figures, and every view through gradio_client on the demo model and on
small packages with the other architecture choices (learned positions, separate vocabularies)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from gradio_client import Client, handle_file  # noqa: E402

from playground.insight import inspection  # noqa: E402

from playground.insight import decoding_plots, model_plots, plots
from playground.data.batching import encode_pairs, make_batches  # noqa: E402
from playground.core.decode import DecodeOptions, beam_search, source_ids, translate  # noqa: E402
from playground.core.model import Transformer, TransformerConfig  # noqa: E402
from playground.packages.store import save_package  # noqa: E402
from playground.core.tokenizer import PAD_ID, train_tokenizer  # noqa: E402
from playground.core.sequences import pad_batch  # noqa: E402
from conftest import PAIRS, free_port, refusal_of  # noqa: E402

DEMO = Path(__file__).resolve().parents[1] / "models" / "demo-en-de"
DEMO_FILES = ("config.json", "model.safetensors", "tokenizer.json", "training.json", "README.md")
SENTENCE = "the cat sees the dog"


pytestmark = pytest.mark.usefixtures("one_thread")


def peaked(model: Transformer) -> Transformer:
    """A random model made confident, so searches end with <eos> instead of wandering."""
    with torch.no_grad():
        model.output.weight.mul_(8)
    return model


def tiny_model(tokenizer, **overrides) -> Transformer:
    torch.manual_seed(0)
    cfg = TransformerConfig(src_vocab_size=tokenizer.src_vocab_size, tgt_vocab_size=tokenizer.tgt_vocab_size,
                            d_model=32, n_heads=4, n_encoder_layers=1, n_decoder_layers=1, d_ff=64, dropout=0.0,
                            max_len=34, joint_vocab=tokenizer.joint, **overrides)
    return Transformer(cfg).eval()


# ----------------------------------------------------------------------------------------------------------
# Positional encoding


def test_sinusoidal_table_is_the_models_buffer(model):
    table = inspection.positional_encoding(model)
    assert table.shape == (model.cfg.max_len, model.cfg.d_model)
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
    opts = DecodeOptions("greedy", max_len=8, temperature=1.5, top_k=3, seed=2)
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
    opts = DecodeOptions("sample", max_len=8, temperature=1.2, top_p=0.9, seed=5)
    hypothesis, steps = inspection.sampling_steps(model, tokenizer, SENTENCE, opts)
    assert hypothesis.ids == translate(model, tokenizer, [SENTENCE], opts)[0].best.ids  # same seed, same draws
    assert all(s.sampled == s.taken for s in steps)
    assert all(s.greedy == s.candidates[0][0] for s in steps)


def test_beam_trace_leaves_the_search_unchanged(model, tokenizer):
    peaked(model)
    opts = DecodeOptions("beam", beam_size=3, nbest=3, max_len=9)
    src = pad_batch(source_ids(tokenizer, [SENTENCE, "a dog runs"], model.cfg), pad_id=PAD_ID)
    trace: list[dict] = []
    traced, plain = beam_search(model, src, opts, trace), beam_search(model, src, opts)
    assert [[h.ids for h in hyps] for hyps in traced.hypotheses] == [[h.ids for h in hyps] for hyps in plain.hypotheses]
    assert trace and all(len(r["sentences"]) == len(r["scores"]) == len(r["parents"]) for r in trace)


def test_beam_steps_are_consistent_with_the_final_hypotheses(model, tokenizer):
    peaked(model)
    opts = DecodeOptions("beam", beam_size=3, nbest=3, max_len=9, length_penalty=0.6)
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
    random_batches, grouped = inspection.compare_batching(tokenizer, pairs, batch_tokens=800, max_len=64)
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
    _, steps = inspection.sampling_steps(model, tokenizer, SENTENCE, DecodeOptions("greedy", max_len=5))
    fig = decoding_plots.sampling_steps_figure(steps)
    assert "✓" in fig.data[0].text[0][0] and "●" in str(fig.data[0].text)
    _, nodes = inspection.beam_steps(model, tokenizer, SENTENCE, DecodeOptions("beam", beam_size=2, max_len=6))
    assert {t.name for t in decoding_plots.beam_tree_figure(nodes).data} >= {"open beam", "best hypothesis"}
    random_batches, grouped = inspection.compare_batching(tokenizer, PAIRS, 256, 30)
    assert len(plots.batching_figure(random_batches, grouped, 256).data) == 5
    emb = inspection.embedding_map(model, tokenizer, PAIRS, 20)
    emb_figure = model_plots.embedding_figure(emb.coords, emb.labels, emb.groups, emb.explained)
    assert len(emb_figure.data) == len(set(emb.groups))


# ----------------------------------------------------------------------------------------------------------
# Through the web UI: the demo model and small packages with the other architecture choices


@pytest.fixture(scope="module")
def views_models(tmp_path_factory) -> Path:
    """The demo model (when the checkout has it), plus one with learned positions and separate vocabularies."""
    folder = tmp_path_factory.mktemp("view-models")
    if DEMO.is_dir():
        (folder / DEMO.name).mkdir()
        for name in DEMO_FILES:
            shutil.copy2(DEMO / name, folder / DEMO.name / name)
    separate = train_tokenizer(PAIRS, kind="word", vocab_size=60, joint=False)
    save_package(folder / "learned-separate", peaked(tiny_model(separate, positional_encoding="learned",
                                                                tie_embeddings=False)), separate,
                 src_lang="en", tgt_lang="de")
    return folder


@pytest.fixture(scope="module")
def views_app(views_models):
    from playground.ui.app import build_app

    demo = build_app(views_models)
    port = free_port()
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True)
    yield f"http://127.0.0.1:{port}/"
    demo.close()


@pytest.fixture(scope="module")
def views_client(views_app, tmp_path_factory) -> Client:
    """A session that has loaded a few pairs (one browser tab)."""
    client = Client(views_app, verbose=False)
    data = tmp_path_factory.mktemp("view-data") / "pairs.tsv"
    data.write_text("en\tde\n" + "".join(f"{s}\t{t}\n" for s, t in PAIRS[:4] + [
        ("The queen does not paint the mother.", "Die Königin malt die Mutter nicht."),
        ("My friend always sleeps.", "Mein Freund schläft immer.")]), encoding="utf-8")
    client.predict([handle_file(str(data))], 0.2, api_name="/load_files")
    return client


def figure_json(output: dict) -> dict:
    assert output["type"] == "plotly"
    return json.loads(output["plot"])


def view_models(views_models: Path) -> list[str]:
    return sorted(p.name for p in views_models.iterdir())


def test_views_render_for_every_model(views_client, views_models):
    assert "demo-en-de" in view_models(views_models) or not DEMO.is_dir()
    for name in view_models(views_models):
        heatmap, curves, _, note = views_client.predict(name, "target", [], api_name="/positional_encoding")
        assert figure_json(heatmap)["data"][0]["type"] == "heatmap" and len(figure_json(curves)["data"]) >= 1
        assert name in note and ("learned" in note) == (name == "learned-separate")
        padding, self_mask, look_ahead, note = views_client.predict(name, 3, 0, 2, api_name="/masks")
        assert len(figure_json(padding)["data"][0]["z"]) == 3 and "3 pairs" in note
        assert "<eos>" in str(figure_json(self_mask)["data"][0]["x"])
        assert figure_json(look_ahead)["data"][0]["y"][0] == "0:<bos>"
        batching, note = views_client.predict(name, 64, 0, api_name="/batching")
        assert len(figure_json(batching)["data"]) == 5 and "Random batches pad" in note
        embeddings, note = views_client.predict(name, 20, api_name="/embeddings")
        assert figure_json(embeddings)["data"] and "most frequent tokens of your data" in note


def test_decoding_step_by_step_in_three_ways(views_client, views_models):
    name = view_models(views_models)[0]
    source = "The queen does not paint the mother."
    plot, table, note = views_client.predict(name, source, "greedy", api_name="/decode_steps")
    assert table["headers"][:4] == ["step", "token taken", "greedy ✓ (p)", "sampled ● (p)"]
    assert all(row[2].startswith(row[1]) for row in table["data"])  # greedy: the greedy choice is the one taken
    plot, table, note = views_client.predict(name, source, "sample", temperature=1.5, top_k=3, seed=4, k=3,
                                             api_name="/decode_steps")
    assert "sampled" in note and all(row[3].startswith(row[1]) for row in table["data"])
    plot, table, note = views_client.predict(name, source, "beam", beam_size=3, length_penalty=0.6,
                                             api_name="/decode_steps")
    assert table["headers"][:3] == ["step", "beam", "sum of log p"] and "Beam size 3" in note
    assert any(row[1] == "ended" and row[3] != "" for row in table["data"])
    assert "star" in plot["plot"]  # finished hypotheses


def test_views_explain_what_is_missing(views_app, views_models):
    client = Client(views_app, verbose=False)  # a new session: no data loaded
    name = view_models(views_models)[0]
    padding, *_ = client.predict(name, api_name="/masks")
    assert "Load data on the Data tab" in figure_json(padding)["layout"]["annotations"][0]["text"]
    _, note = client.predict(name, 20, api_name="/embeddings")
    assert "first tokens of the vocabulary" in note
    assert "Type a source sentence" in refusal_of(client.predict(name, "  ", "greedy", api_name="/decode_steps"))


@pytest.mark.skipif(not DEMO.is_dir(), reason="the checkout has no demo model")
def test_attention_over_training_of_the_demo(views_client):
    training = json.loads((DEMO / "training.json").read_text(encoding="utf-8"))
    probe = training["history"]["probe"]
    last = figure_json(views_client.predict("demo-en-de", len(probe) - 1, api_name="/attention_probe"))
    layers = len(probe[-1]["cross"])
    assert len(last["data"]) == layers  # one heatmap per decoder layer
    assert f"validation {len(probe)} of {len(probe)}" in last["layout"]["title"]["text"]
