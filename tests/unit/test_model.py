import pytest
import torch

from playground.core.dropout import Dropout, keep_mask
from playground.core.model import Transformer, TransformerConfig


def tiny_config(**changes) -> TransformerConfig:
    values = dict(src_vocab_size=50, tgt_vocab_size=50, d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2,
                  d_ff=64, dropout=0.0, max_positions=40)
    return TransformerConfig(**{**values, **changes})


def batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, 50, (3, 9), generator=g)
    src[0, 6:] = 0  # padding
    src[1, 3:] = 0
    tgt = torch.randint(4, 50, (3, 7), generator=g)
    tgt[:, 0] = 2  # <bos>
    return src, tgt


VARIANTS = [dict(), dict(norm_placement="pre"), dict(positional_encoding="learned"), dict(activation="gelu"),
            dict(joint_vocab=False, tgt_vocab_size=60), dict(tie_embeddings=False)]


@pytest.mark.parametrize("changes", VARIANTS)
def test_inspection_path_gives_the_fast_path_outputs(changes):
    torch.manual_seed(0)
    model = Transformer(tiny_config(**changes)).eval()
    src, tgt = batch()
    fast = model(src, tgt)
    inspected, attention = model(src, tgt, return_attention=True)
    torch.testing.assert_close(fast, inspected, atol=1e-5, rtol=1e-5)
    assert [w.shape for w in attention["encoder"]] == [(3, 4, 9, 9)] * 2
    assert [w.shape for w in attention["decoder"]] == [(3, 4, 7, 7)] * 2
    assert [w.shape for w in attention["cross"]] == [(3, 4, 7, 9)] * 2


def test_no_attention_weight_on_padding_or_future_positions():
    torch.manual_seed(0)
    model = Transformer(tiny_config()).eval()
    src, tgt = batch()
    _, attention = model(src, tgt, return_attention=True)
    for layer in range(2):
        enc, dec, cross = (attention[k][layer] for k in ("encoder", "decoder", "cross"))
        assert enc[0, :, :, 6:].abs().max() == 0 and enc[1, :, :, 3:].abs().max() == 0
        assert cross[0, :, :, 6:].abs().max() == 0 and cross[1, :, :, 3:].abs().max() == 0
        future = torch.ones(7, 7, dtype=torch.bool).triu(1)
        assert dec[:, :, future].abs().max() == 0
        for w in (enc, dec, cross):  # each query's weights are a distribution
            torch.testing.assert_close(w.sum(-1), torch.ones_like(w.sum(-1)))


def test_padding_does_not_change_a_sentence_translation_scores():
    torch.manual_seed(0)
    model = Transformer(tiny_config()).eval()
    src, tgt = batch()
    alone = model(src[1:2, :3], tgt[1:2])
    padded = model(src, tgt)[1:2]
    torch.testing.assert_close(alone, padded, atol=1e-5, rtol=1e-5)


def test_future_target_tokens_do_not_change_earlier_logits():
    torch.manual_seed(0)
    model = Transformer(tiny_config()).eval()
    src, tgt = batch()
    changed = tgt.clone()
    changed[:, 4:] = 5
    torch.testing.assert_close(model(src, tgt)[:, :4], model(src, changed)[:, :4])


@pytest.mark.parametrize("changes", VARIANTS[:3])
def test_cached_step_logits_equal_full_recomputation(changes):
    torch.manual_seed(0)
    model = Transformer(tiny_config(**changes)).eval()
    src, tgt = batch()
    full = model(src, tgt)
    state = model.start_decoding(src, output_steps=10)
    steps = torch.stack([model.decode_step(tgt[:, t], state) for t in range(tgt.size(1))], dim=1)
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=1e-5)


def test_cache_rows_can_be_reordered_like_beams():
    torch.manual_seed(0)
    model = Transformer(tiny_config()).eval()
    src, tgt = batch()
    state = model.start_decoding(src, output_steps=10)
    for t in range(3):
        model.decode_step(tgt[:, t], state)
    order = torch.tensor([2, 2, 0])
    state.select(order)
    logits = model.decode_step(tgt[order, 3], state)
    torch.testing.assert_close(logits, model(src[order], tgt[order, :4])[:, -1], atol=1e-5, rtol=1e-5)


def test_tied_embeddings_share_one_tensor():
    model = Transformer(tiny_config())
    assert model.output.weight is model.tgt_embed.tokens.weight is model.src_embed.tokens.weight
    separate = Transformer(tiny_config(joint_vocab=False, tgt_vocab_size=60))
    assert separate.output.weight is separate.tgt_embed.tokens.weight
    assert separate.src_embed.tokens.weight is not separate.tgt_embed.tokens.weight


def test_base_config_has_the_papers_65m_parameters():
    with torch.device("meta"):  # count without allocating 250 MB
        model = Transformer(TransformerConfig(src_vocab_size=37000, tgt_vocab_size=37000))
    assert abs(model.num_parameters() - 65e6) / 65e6 < 0.05


def test_invalid_config_says_what_is_wrong():
    with pytest.raises(ValueError, match="divisible"):
        tiny_config(d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="norm_placement"):
        tiny_config(norm_placement="middle")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("p", [0.1, 0.3])
def test_dropout_from_a_generator_drops_p_and_keeps_the_expected_value(dtype, p):
    x = torch.ones(200, 1000, dtype=dtype)
    mask = keep_mask(x, p, torch.Generator().manual_seed(0))
    assert mask.shape == x.shape and mask.dtype == dtype
    kept = mask != 0
    assert abs(1 - kept.float().mean().item() - p) < 0.005  # 200k draws: 5 standard deviations
    torch.testing.assert_close(mask[kept].float(), torch.full((int(kept.sum()),), 1 / (1 - p)), rtol=1e-2, atol=0)
    rows_kept = kept.float().mean(1)  # every row draws its own bits (no repeats from reusing a draw)
    assert rows_kept.std() > 0 and not torch.equal(kept[0], kept[1])


def test_dropout_from_a_generator_is_reproducible_and_differentiable():
    drop = Dropout(0.3).train()
    x = torch.randn(4, 7, 33, requires_grad=True)  # a size that is not a multiple of four 16-bit draws
    drop.generator = torch.Generator().manual_seed(5)
    first = drop(x)
    drop.generator = torch.Generator().manual_seed(5)
    assert torch.equal(drop(x), first)
    first.sum().backward()
    torch.testing.assert_close(x.grad, (first != 0).float() / 0.7, rtol=1e-4, atol=0)
    assert torch.equal(keep_mask(x, 1.0, torch.Generator()), torch.zeros_like(x))
    assert torch.equal(drop.eval()(x), x)
