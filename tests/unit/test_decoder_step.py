"""The flat decoding step (core/decoder_step.py) computes what the model's modules compute: bit for bit with the
modules' weights, within float32 rounding with oneDNN's packed copies of them."""

import gc
import threading

import pytest
import torch

from playground.core import decoder_step as decoder_step_module
from playground.core import packed_weights
from playground.core.decoder_step import FlatDecoderStep, decoder_linears, decoder_step
from playground.core.model import Transformer
from playground.core.packed_weights import PackedWeights, packed
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


def steps_of_both(model: Transformer, step, src: torch.Tensor, tgt: torch.Tensor):
    """Each step's logits from `step` and from the model's modules, side by side."""
    modules, flat = model.start_decoding(src, output_steps=10), model.start_decoding(src, output_steps=10)
    for t in range(tgt.size(1)):
        if t == 3:  # beams reorder and duplicate rows
            order = torch.tensor([2, 2, 0])
            modules.select(order)
            flat.select(order)
            tgt = tgt[order]
        yield step(tgt[:, t], flat), model.decode_step(tgt[:, t], modules)
    assert flat.length == modules.length == tgt.size(1)


@pytest.mark.parametrize("int8", [False, True], ids=["fp32", "int8"])
@pytest.mark.parametrize("changes", VARIANTS)
def test_the_flat_step_equals_the_modules_step_exactly(changes, int8):
    model = model_of(changes, int8)
    src, tgt = batch()  # two of the three sources padded: the source mask is applied
    step = decoder_step(model, weight_copies=False)
    assert isinstance(step, FlatDecoderStep)
    for flat, modules in steps_of_both(model, step, src, tgt):
        assert torch.equal(flat, modules)


ONEDNN = pytest.mark.skipif(not packed_weights.AVAILABLE, reason="oneDNN's copies are made on x86 CPUs only")


def copies_measured(monkeypatch, faster: bool) -> list[int]:
    """Whether the copies pay off, as if measured (here: `faster`); returns the row counts measured."""
    measured = []
    monkeypatch.setattr(decoder_step_module, "COPIES_FASTER", {})
    monkeypatch.setattr(FlatDecoderStep, "copies_were_faster", lambda step, rows: measured.append(rows) or faster)
    return measured


@ONEDNN
@pytest.mark.parametrize("changes", VARIANTS)
def test_over_the_copies_the_step_equals_the_modules_step_within_rounding(changes, monkeypatch):
    copies_measured(monkeypatch, faster=True)
    model = model_of(changes, int8=False)
    src, tgt = batch()
    step = decoder_step(model)
    for flat, modules in steps_of_both(model, step, src, tgt):
        torch.testing.assert_close(flat, modules, rtol=1e-5, atol=1e-5)
        assert torch.equal(flat.argmax(-1), modules.argmax(-1))
    assert step.copied[1][0] is packed_weights.linear  # the products went to oneDNN


@ONEDNN
def test_the_copies_are_used_only_where_they_were_measured_faster(monkeypatch):
    measured = copies_measured(monkeypatch, faster=False)
    model = model_of({}, int8=False)
    src, tgt = batch()
    for flat, modules in steps_of_both(model, decoder_step(model), src, tgt):
        assert torch.equal(flat, modules)  # F.linear's products, bit for bit
    step, flat, modules = decoder_step(model), model.start_decoding(src[:1], 3), model.start_decoding(src[:1], 3)
    for t in range(3):
        assert torch.equal(step(tgt[:1, t], flat), model.decode_step(tgt[:1, t], modules))
    assert measured == [5, 1]  # once per row class in a process: 3 rows are measured as a beam's 5, then 1 row


@ONEDNN
@pytest.mark.parametrize("positions", [4, 10])
def test_a_model_of_few_positions_is_measured_within_them(positions, monkeypatch):
    monkeypatch.setattr(decoder_step_module, "COPIES_FASTER", {})
    model = model_of({"max_positions": positions}, int8=False)
    src, tgt = batch()
    src = src[:, :positions]
    step, flat, modules = decoder_step(model), model.start_decoding(src, 2), model.start_decoding(src, 2)
    torch.testing.assert_close(step(tgt[:, 0], flat), model.decode_step(tgt[:, 0], modules), rtol=1e-5, atol=1e-5)
    assert len(decoder_step_module.COPIES_FASTER) == 1  # measured (or, at 4 positions, settled without copies)


@ONEDNN
def test_a_measurement_keeps_the_copies_only_if_they_were_faster():
    model = model_of({}, int8=False)
    step = decoder_step(model)
    faster = step.copies_were_faster(5)  # this machine's answer, either way
    kept = [packed.kept.get(layer.weight) is not None for layer in decoder_linears(model)]
    assert all(kept) if faster else not any(kept)


@ONEDNN
def test_a_weight_is_packed_once_and_again_after_it_changes_in_place(monkeypatch):
    copies_measured(monkeypatch, faster=True)
    model = model_of({}, int8=False)
    weight = model.output.weight
    first = packed(weight)
    assert packed(weight) is first  # the next search reuses it
    src, tgt = batch()
    before = decoder_step(model)(tgt[:, 0], model.start_decoding(src, output_steps=2))
    with torch.no_grad():
        weight.mul_(2)  # what an optimizer step or a load does: in place
    assert packed(weight) is not first
    after = decoder_step(model)(tgt[:, 0], model.start_decoding(src, output_steps=2))
    torch.testing.assert_close(after, model.decode_step(tgt[:, 0], model.start_decoding(src, output_steps=2)),
                               rtol=1e-5, atol=1e-5)
    assert not torch.allclose(after, before)
    with torch.inference_mode():
        assert packed(torch.ones(3, 2)) is None  # an inference tensor has no version to check: left as it is
    assert packed(weight.double()) is None


@ONEDNN
def test_copies_stay_within_their_budget_and_leave_with_their_weights():
    copies = PackedWeights(budget=3 * 4 * 100)  # three 10 x 10 float32 weights
    weights = [torch.nn.Parameter(torch.randn(10, 10)) for _ in range(4)]
    assert all(copies(w) is not None for w in weights[:3])
    assert copies.used == 1200
    assert copies(weights[3]) is None  # past the budget: used as it is
    del weights[0]  # a model let go: its copies with it
    assert copies.used == 800
    copies.release(weights[1])  # found no faster
    assert copies.used == 400 and weights[1] not in copies.kept
    del weights[1]
    assert copies.used == 400  # counted once
    assert copies(weights[1]) is not None  # the fourth fits now


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


@ONEDNN
def test_more_rows_than_a_few_and_autocast_keep_f_linear(monkeypatch):
    copies_measured(monkeypatch, faster=True)
    model = model_of({}, int8=False)
    src, tgt = batch()
    rows = torch.arange(3).repeat(6)  # 18 rows: past FEW_ROWS, where oneDNN would compile a kernel per row count
    assert len(rows) > packed_weights.FEW_ROWS
    compared = list(steps_of_both(model, decoder_step(model), src[rows], tgt[rows]))
    assert all(torch.equal(flat, modules) for flat, modules in compared[:3])  # then a reorder leaves 3 rows
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not decoder_step(model).weight_copies  # oneDNN's products would not follow autocast


def test_a_training_runs_validations_decode_without_copies(monkeypatch):
    from playground.core import decode
    from playground.core.tokenizer import train_tokenizer
    from playground.training.evaluation import translation_scores

    pairs = [("a small dog", "ein kleiner hund"), ("a big cat", "eine grosse katze")] * 4
    tokenizer = train_tokenizer(pairs, vocab_size=50)
    model = Transformer(tiny_config(src_vocab_size=tokenizer.src_vocab_size,
                                    tgt_vocab_size=tokenizer.tgt_vocab_size)).eval()
    asked = []
    monkeypatch.setattr(decode, "decoder_step", lambda m, copies=True: asked.append(copies) or decoder_step(m, copies))
    scores, _ = translation_scores(model, tokenizer, pairs, torch.device("cpu"), "fp32")
    assert asked and not any(asked)  # their kernels would push the training's own out of oneDNN's cache
    assert decode.translate(model, tokenizer, ["a dog"])[0].text is not None and asked[-1]  # elsewhere they may


@ONEDNN
def test_an_int8_model_is_not_measured_and_leaves_its_float32_twin_measured_apart(monkeypatch):
    measured = []
    monkeypatch.setattr(decoder_step_module, "COPIES_FASTER", {})
    real = FlatDecoderStep.copies_were_faster
    monkeypatch.setattr(FlatDecoderStep, "copies_were_faster",
                        lambda step, rows: measured.append(rows) or real(step, rows))
    src, tgt = batch()
    for int8 in (True, False):
        model = model_of({}, int8=int8)
        decoder_step(model)(tgt[:, 0], model.start_decoding(src, 2))
    assert measured == [5, 5]  # the same shapes, two kinds of weights: two answers
    answers = {key[0][-1]: faster for key, faster in decoder_step_module.COPIES_FASTER.items()}
    assert set(answers) == {"int8", "torch.float32"} and answers["int8"] is False  # int8: nothing to copy


@ONEDNN
def test_a_weight_collected_while_a_copy_is_made_does_not_deadlock():
    copies = PackedWeights(budget=10**8)

    class Holder:
        pass

    def copy_while_collecting():
        for _ in range(20):  # weights in reference cycles: only a collection frees them, and their finalizers run
            holder = Holder()
            holder.weight, holder.me = torch.nn.Parameter(torch.randn(8, 8)), holder
            copies(holder.weight)
            del holder
        other, threshold = torch.nn.Parameter(torch.randn(8, 8)), gc.get_threshold()
        gc.set_threshold(1)  # a collection at (almost) every allocation, inside the copies' lock too
        try:
            for _ in range(200):
                with torch.no_grad():
                    other.add_(0)  # a new version: a new copy each time
                copies(other)
        finally:
            gc.set_threshold(*threshold)
        gc.collect()
        assert copies.used == 8 * 8 * 4  # only `other` is left

    worker = threading.Thread(target=copy_while_collecting, daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive()


@ONEDNN
def test_a_weight_whose_storage_is_replaced_gets_a_new_copy():
    copies = PackedWeights(budget=10**8)
    weight = torch.nn.Parameter(torch.randn(6, 4))
    first = copies(weight)
    weight.data = torch.randn(10, 4)  # `.half().float()` does this: the version stays
    second = copies(weight)
    assert second is not first and copies.used == 10 * 4 * 4
    x = torch.randn(3, 4)
    torch.testing.assert_close(packed_weights.linear(x, second, None), x @ weight.detach().T)


@ONEDNN
def test_with_no_copy_possible_the_answer_is_left_for_later(monkeypatch):
    monkeypatch.setattr(decoder_step_module, "COPIES_FASTER", {})
    monkeypatch.setattr(packed, "budget", packed.used)  # spent
    model = model_of({}, int8=False)
    src, tgt = batch()
    step = decoder_step(model)
    step(tgt[:, 0], model.start_decoding(src, 2))
    assert decoder_step_module.COPIES_FASTER == {}  # not "slower" for good: asked again once copies can be made
    monkeypatch.setattr(packed, "budget", packed.used + 10**8)
    decoder_step(model)(tgt[:, 0], model.start_decoding(src, 2))
    assert len(decoder_step_module.COPIES_FASTER) == 1
