from __future__ import annotations

import math
import pickle

import pytest
import torch
from helpers import DATA, events_of, reverse_pairs, tiny_cfg

from playground.core.model import Transformer, TransformerConfig
from playground.core.tokenizer import EOS_ID, train_tokenizer
from playground.data.batching import batch_shape, collate, encode_pairs, make_batches, pad_multiple, token_counts
from playground.errors import TrainingError
from playground.packages.store import load_package
from playground.runtime import memory
from playground.training import evaluation
from playground.training.config import TrainConfig
from playground.training.evaluation import EarlyStopping
from playground.training.events import Done, Error, Eval, Saved, Start, Step
from playground.training.inputs import TrainData
from playground.training.loss import chunk_rows_for, smoothed_loss_sum
from playground.training.schedule import learning_rate
from playground.training.step import Optimization
from playground.training.trainer import Trainer


def test_noam_schedule_values_match_the_paper():
    cfg = TrainConfig.of(d_model=512, warmup_steps=4000, schedule="noam", lr=1.0, max_steps=1)
    assert learning_rate(cfg, 1) == pytest.approx(512**-0.5 * 4000**-1.5)
    assert learning_rate(cfg, 4000) == pytest.approx(512**-0.5 * 4000**-0.5)  # the peak, ~7.0e-4
    assert learning_rate(cfg, 16000) == pytest.approx(512**-0.5 * 16000**-0.5)
    assert learning_rate(cfg, 4000) > learning_rate(cfg, 3999) and learning_rate(cfg, 4000) > learning_rate(cfg, 4001)


def test_other_schedules_at_known_steps():
    inv = TrainConfig(schedule="inverse_sqrt", lr=1e-3, warmup_steps=100, max_steps=1)
    assert [learning_rate(inv, s) for s in (50, 100, 400)] == pytest.approx([5e-4, 1e-3, 5e-4])
    cos = TrainConfig(schedule="cosine", lr=1e-3, warmup_steps=100, max_steps=1)
    assert learning_rate(cos, 50, 1100) == pytest.approx(5e-4)
    assert learning_rate(cos, 600, 1100) == pytest.approx(5e-4)  # half-way down the cosine
    assert learning_rate(cos, 1100, 1100) == pytest.approx(0.0, abs=1e-12)
    const = TrainConfig(schedule="constant", lr=1e-3, max_steps=1)
    assert learning_rate(const, 1) == learning_rate(const, 10_000) == 1e-3


def test_the_label_smoothed_loss_on_a_hand_computed_case():
    logits = torch.log(torch.tensor([[[0.7, 0.1, 0.1, 0.1], [0.25, 0.25, 0.25, 0.25]]]))
    target = torch.tensor([[0, 2]])
    eps = 0.1
    # (1-eps) * -log p(target) + eps * mean over the 4 classes of -log p; the padded second position counts 0
    expected = (1 - eps) * -math.log(0.7) + eps * -(math.log(0.7) + 3 * math.log(0.1)) / 4
    loss = smoothed_loss_sum(logits, target, eps, pad_id=2)
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    plain = smoothed_loss_sum(logits, torch.tensor([[0, 1]]), 0.0, pad_id=2)
    assert plain.item() == pytest.approx(-math.log(0.7) - math.log(0.25), rel=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_chunked_loss_and_its_gradient_equal_cross_entropy_on_float32_logits(dtype):
    torch.manual_seed(0)
    logits = (3 * torch.randn(2, 7, 11)).to(dtype).requires_grad_()
    target = torch.randint(0, 11, (2, 7))
    target[1, 4:] = 0  # padding
    loss = smoothed_loss_sum(logits, target, 0.1, pad_id=0, chunk_rows=3)  # chunks end mid-sentence
    (grad,) = torch.autograd.grad(2.5 * loss, logits)
    reference = torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), target.flatten(), ignore_index=0,
                                                  label_smoothing=0.1, reduction="sum")
    (expected,) = torch.autograd.grad(2.5 * reference, logits)
    torch.testing.assert_close(loss, reference)
    assert grad.dtype == dtype and grad[1, 4:].abs().sum() == 0
    torch.testing.assert_close(grad, expected)


def test_the_loss_works_in_small_chunks_on_the_cpu_and_in_few_large_ones_on_a_gpu():
    """CPU memory binds on a CPU; on a GPU each chunk's kernel launches do (bench/gpu_check.py on an H200)."""
    assert chunk_rows_for(torch.empty(5000, 8000)) == 256
    gpu_like = torch.empty(5000, 8000, device="meta")  # not a CPU tensor: sized as on a GPU
    assert chunk_rows_for(gpu_like) == 256 * 2**20 // (4 * 8000) > 5000 - 1  # the small preset's batch in one chunk
    assert 256 < chunk_rows_for(torch.empty(25000, 37000, device="meta")) < 25000  # the base preset's in several


def test_batches_respect_the_token_budget_and_cover_every_pair_once():
    pairs = reverse_pairs(200)
    tok = train_tokenizer(pairs, kind="word", vocab_size=50)
    encoded = encode_pairs(tok, pairs, 16)
    batches = make_batches(encoded, batch_tokens=300, seed=3)
    assert sorted(i for b in batches for i in b) == list(range(200))
    for indices in batches:
        batch = collate(encoded, indices, torch.device("cpu"))
        assert batch.src.numel() + batch.tgt_in.numel() <= 300
        assert batch.src.size(1) == max(len(encoded[i][0]) for i in indices)  # no rounding on the CPU
        assert (batch.tgt_in[:, 0] == 2).all() and batch.n_tokens == int((batch.tgt_out != 0).sum())
    assert make_batches(encoded, 300, seed=3) == batches and make_batches(encoded, 300, seed=4) != batches
    for indices in make_batches(encoded, 300, seed=3, multiple=8):  # the GPU budget counts padding to 8
        def rounded(n):
            return (n + 7) // 8 * 8
        longest = max(rounded(len(encoded[i][0])) + rounded(len(encoded[i][1]) + 1) for i in indices)
        assert len(indices) * longest <= 300


def test_a_bf16_run_on_the_cpu_pads_just_enough_that_an_epoch_has_few_batch_shapes(tmp_path, monkeypatch):
    """oneDNN compiles bf16 kernels per matrix shape: on a CPU in bf16 a run pads each side of its batches, training
    and validation, to the smallest multiple that leaves an epoch at most SHAPES_KEPT shapes; in float32, or where
    the exact lengths make few shapes, it pads nothing. Its validations decode in float32, which compiles nothing."""
    pairs = reverse_pairs(300)
    encoded = encode_pairs(train_tokenizer(pairs, kind="word", vocab_size=50), pairs, 24)
    cpu = torch.device("cpu")

    def shapes(multiple):
        return {batch_shape(encoded, b, multiple) for b in make_batches(encoded, 256, 0, multiple)}

    assert len(shapes(1)) > len(shapes(8))
    monkeypatch.setattr("playground.data.batching.SHAPES_KEPT", len(shapes(1)))
    assert pad_multiple(cpu, "bf16", encoded, 256) == 1  # few enough already
    monkeypatch.setattr("playground.data.batching.SHAPES_KEPT", len(shapes(8)))
    expected = next(m for m in (1, 2, 4, 8) if len(shapes(m)) <= len(shapes(8)))
    assert expected > 1 and pad_multiple(cpu, "bf16", encoded, 256) == expected
    assert pad_multiple(cpu, "fp32", encoded, 256) == 1
    assert pad_multiple(torch.device("cuda"), "fp32", encoded, 256) == 8

    data = TrainData(pairs, reverse_pairs(40, seed=1), "seq", "rev", "reverse test")
    trainer = Trainer(tiny_cfg(precision="bf16", max_sentence_tokens=24), data, tmp_path / "bf16")
    batches = [trainer.global_batch(start).mine[0] for start in range(len(trainer.batches))]
    assert trainer.pad_multiple == expected
    assert all(b.src.size(1) % expected == 0 and b.tgt_in.size(1) % expected == 0 for b in batches)
    assert len({(b.src.shape, b.tgt_in.shape) for b in batches}) <= len(shapes(8))
    validated = []
    monkeypatch.setattr("playground.training.evaluation.collate",
                        lambda *args: validated.append(collate(*args)) or validated[-1])
    decoded_in_bf16 = []
    real_translate = evaluation.translate
    monkeypatch.setattr("playground.training.evaluation.translate", lambda *args: decoded_in_bf16.append(
        torch.is_autocast_enabled("cpu")) or real_translate(*args))
    trainer.validate(sentences=1)
    assert validated and all(b.src.size(1) % expected == 0 and b.tgt_in.size(1) % expected == 0 for b in validated)
    # its greedy translations are decoded in float32: bf16 would compile kernels for the search's shapes too
    assert decoded_in_bf16 == [False]


def test_encoded_pairs_hold_what_the_tokenizer_gives_in_chunks(monkeypatch):
    monkeypatch.setattr("playground.data.batching.ENCODE_CHUNK", 7)  # several chunks, the last one short
    pairs = reverse_pairs(30)
    tok = train_tokenizer(pairs, kind="word", vocab_size=50)
    encoded = encode_pairs(tok, pairs, 3)  # cut to 3 tokens: some pairs are longer
    assert len(encoded) == 30 and len(encode_pairs(tok, [], 3)) == 0
    expected = [(tok.encode_src(s)[:3] + [EOS_ID], tok.encode_tgt(t)[:3]) for s, t in pairs]
    assert list(encoded) == expected and encoded[-1] == expected[-1]
    assert encoded.src.lengths.tolist() == [len(s) for s, _ in expected]
    assert token_counts(encoded, [0, 5]) == (len(expected[0][1]) + len(expected[5][1]) + 2,
                                             len(expected[0][0]) + len(expected[5][0]))
    with pytest.raises(IndexError):
        encoded[30]


def test_run_emits_events_saves_and_records_history(tmp_path):
    events = events_of(Trainer(tiny_cfg(), DATA, tmp_path / "run"))
    assert isinstance(events[0], Start) and isinstance(events[-1], Done)
    assert pickle.loads(pickle.dumps(events)) == events  # plain data: they cross process boundaries (ZeroGPU)
    assert sum(isinstance(e, Step) for e in events) == 12
    assert [e.step for e in events if isinstance(e, Saved)] == [6, 12]
    evals = [e for e in events if isinstance(e, Eval)]
    assert evals and all(e.samples and e.val_loss > 0 and 0 <= e.bleu <= 100 for e in evals)
    summary = events[-1].summary
    assert summary["steps"] == 12 and summary["params"] > 0 and summary["tokens_per_s"] > 0
    package = load_package(tmp_path / "run")
    assert package.training["history"]["steps"] == list(range(1, 13))
    assert len(package.training["history"]["probe"]) == 2


def test_closing_the_event_stream_keeps_the_work(tmp_path):
    trainer = Trainer(tiny_cfg(eval_every=100), DATA, tmp_path / "run")
    stream = trainer.run()
    for event in stream:
        if isinstance(event, Step) and event.step == 3:
            break
    stream.close()  # what a closed browser tab or Ctrl-C does to the generator
    assert load_package(tmp_path / "run").training["steps"] == 3


def test_nan_loss_stops_with_a_message_and_keeps_the_last_good_package(tmp_path, monkeypatch):
    trainer = Trainer(tiny_cfg(), DATA, tmp_path / "run")
    real_step = Optimization.step

    def poisoned(self, batch, step, planned, warmup=None):
        loss, lr, norm = real_step(self, batch, step, planned, warmup)
        return (float("nan") if step >= 8 else loss), lr, norm

    monkeypatch.setattr(Optimization, "step", poisoned)
    events = events_of(trainer)
    errors = [e for e in events if isinstance(e, Error)]
    assert len(errors) == 1 and "nan" in errors[0].message.lower() and "step 6" in errors[0].message
    assert load_package(tmp_path / "run").training["steps"] == 6


def test_same_seed_same_loss_curve(tmp_path):
    def losses(name):
        return [e.loss for e in events_of(Trainer(tiny_cfg(max_steps=8), DATA, tmp_path / name))
                               if isinstance(e, Step)]
    assert losses("a") == losses("b")


def test_bf16_loss_is_close_to_fp32(tmp_path):
    torch.manual_seed(0)
    trainer = Trainer(tiny_cfg(), DATA, tmp_path / "run")
    batch = collate(trainer.train_set, trainer.batches[0], trainer.device)
    from playground.runtime.device import autocast

    with torch.no_grad():
        fp32 = smoothed_loss_sum(trainer.model(batch.src, batch.tgt_in), batch.tgt_out, 0.1, 0)
        with autocast(trainer.device, "bf16"):
            bf16 = smoothed_loss_sum(trainer.model(batch.src, batch.tgt_in), batch.tgt_out, 0.1, 0)
    assert bf16.item() == pytest.approx(fp32.item(), rel=2e-2)


def test_settings_errors_are_clear():
    with pytest.raises(TrainingError, match="budget"):
        TrainConfig(max_steps=None, max_epochs=None, max_minutes=None)
    with pytest.raises(TrainingError, match="schedule"):
        tiny_cfg(schedule="warm")
    with pytest.raises(TrainingError, match="divisible"):
        Trainer(tiny_cfg(d_model=30, n_heads=4), DATA, "unused")


def test_the_memory_estimate_counts_the_float32_chunk_the_loss_holds_on_its_device():
    small = TransformerConfig(src_vocab_size=8000, tgt_vocab_size=8000, d_model=256, n_heads=8, n_encoder_layers=3,
                              n_decoder_layers=3, d_ff=1024)
    on_cpu, on_gpu = (memory.training_memory_bytes(small, 4952, "fp32", kind) for kind in ("cpu", "cuda"))
    # on a GPU the loss takes the batch's 2,476 target rows in one chunk, on a CPU 256 at a time (chunk_rows_for)
    assert on_gpu - on_cpu == (2476 - 256) * 8000 * 4
    assert chunk_rows_for(torch.empty(2476, 8000, device="meta")) >= 2476


def test_a_run_that_cannot_fit_in_memory_is_refused_before_it_starts(tmp_path, monkeypatch):

    base = TransformerConfig(src_vocab_size=37000, tgt_vocab_size=37000)  # the paper's base model
    need = memory.training_memory_bytes(base, 25000, "bf16")
    assert 1e9 < need < 14e9  # ~1 GB of weights, gradients and Adam moments, plus activations: fits a 16 GB GPU
    assert memory.training_memory_bytes(base, 50000, "bf16") > need
    assert memory.training_memory_bytes(base, 25000, "fp32") > need
    monkeypatch.setattr(memory, "free_memory_bytes", lambda device: 50_000)  # a device with 50 kB free
    with pytest.raises(TrainingError, match="lower batch tokens"):
        Trainer(tiny_cfg(), DATA, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_best_breaks_metric_ties_on_validation_loss_and_patience_counts_the_rest():
    early_stopping = EarlyStopping("bleu", patience=2)
    def record(step, bleu, loss):
        return {"step": step, "val_loss": loss, "bleu": bleu, "chrf": 0.0, "exact_match": 0.0}
    assert early_stopping.judge(record(1, 0.0, 2.0))
    assert early_stopping.judge(record(2, 0.0, 1.0))  # same BLEU (0 on one-word targets), lower loss
    assert not early_stopping.judge(record(3, 0.0, 1.5)) and not early_stopping.out_of_patience
    assert not early_stopping.judge(record(4, 0.0, 1.2)) and early_stopping.out_of_patience
    assert early_stopping.judge(record(5, 5.0, 3.0)) and early_stopping.best["step"] == 5
    assert not early_stopping.out_of_patience


@pytest.mark.parametrize("changes", [dict(), dict(norm_placement="pre"), dict(positional_encoding="learned"),
                                     dict(tie_embeddings=False), dict(n_encoder_layers=1, n_decoder_layers=3)])
def test_the_parameter_formula_matches_the_model(changes):

    model_cfg = tiny_cfg(**changes).model_config(77, 77, True)
    with torch.device("meta"):
        assert model_cfg.num_parameters() == sum(p.numel() for p in Transformer(model_cfg).parameters())


def test_bpe_dropout_needs_bpe():
    with pytest.raises(TrainingError, match="BPE-dropout"):
        tiny_cfg(tokenizer="word", bpe_dropout=0.1)


def test_the_trainer_makes_the_allocator_compact_before_it_builds_the_model(tmp_path, monkeypatch):
    from playground.training import trainer as trainer_module

    calls = []
    compact, build = trainer_module.keep_allocator_compact, trainer_module.Transformer
    monkeypatch.setattr(trainer_module, "keep_allocator_compact", lambda: calls.append("compact") or compact())
    monkeypatch.setattr(trainer_module, "Transformer", lambda *args, **kwargs: calls.append("model") or build(*args,
                                                                                                          **kwargs))
    Trainer(tiny_cfg(max_steps=1), DATA, tmp_path / "run")
    assert calls == ["compact", "model"]


