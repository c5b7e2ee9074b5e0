"""The flat decoding step (core/decoder_step.py) computes what the model's modules compute, bit for bit."""

import pytest
import torch

from playground.core.decoder_step import FlatDecoderStep, decoder_step
from playground.core.model import Transformer
from playground.core.quantize import int8_linears
from tests.unit.test_model import batch, tiny_config

VARIANTS = [dict(), dict(norm_placement="pre"), dict(positional_encoding="learned", activation="gelu"),
            dict(activation="swish", joint_vocab=False, tgt_vocab_size=60, tie_embeddings=False),
            dict(final_logits_bias=True)]


def model_of(changes: dict, int8: bool) -> Transformer:
    torch.manual_seed(0)
    model = Transformer(tiny_config(**changes)).eval()
    if model.cfg.final_logits_bias:
        model.final_logits_bias.normal_()
    return int8_linears(model) if int8 else model


@pytest.mark.parametrize("int8", [False, True], ids=["fp32", "int8"])
@pytest.mark.parametrize("changes", VARIANTS)
def test_the_flat_step_equals_the_modules_step_exactly(changes, int8):
    model = model_of(changes, int8)
    src, tgt = batch()  # two of the three sources padded: the source mask is applied
    modules, flat = model.start_decoding(src, output_steps=10), model.start_decoding(src, output_steps=10)
    step = decoder_step(model)
    assert isinstance(step, FlatDecoderStep)
    for t in range(tgt.size(1)):
        if t == 3:  # beams reorder and duplicate rows
            order = torch.tensor([2, 2, 0])
            modules.select(order)
            flat.select(order)
            tgt = tgt[order]
        assert torch.equal(step(tgt[:, t], flat), model.decode_step(tgt[:, t], modules))
    assert flat.length == modules.length == tgt.size(1)


def test_at_batch_1_without_a_source_mask():
    model = model_of({}, int8=True)
    src, tgt = batch()
    src, tgt = src[2:], tgt[2:]  # the unpadded source
    modules, flat = model.start_decoding(src, output_steps=10), model.start_decoding(src, output_steps=10)
    assert flat.src_mask is None
    step = decoder_step(model)
    for t in range(tgt.size(1)):
        assert torch.equal(step(tgt[:, t], flat), model.decode_step(tgt[:, t], modules))


def test_hooks_and_training_keep_the_modules_path():
    model = model_of({}, int8=False)
    handle = model.decoder[1].ff.up.register_forward_hook(lambda module, inputs, output: output)
    assert decoder_step(model) == model.decode_step  # the flat step would skip the hook
    handle.remove()
    assert isinstance(decoder_step(model), FlatDecoderStep)
    assert decoder_step(model.train()) == model.decode_step  # dropout is on
