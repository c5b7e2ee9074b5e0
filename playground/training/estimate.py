"""How long will training take here? Build the model on the device, time a few real training steps on a
synthetic batch of `batch_tokens` tokens, and multiply by the planned steps (or stop at the minutes budget).

Used by the web UI before a run starts; nothing here touches data or writes files.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import torch

from playground.core.model import Transformer
from playground.data.batching import Batch, GlobalBatch
from playground.errors import TrainingError
from playground.runtime.device import (
    autocast,
    decoding_precision,
    describe,
    median_seconds,
    one_thread_on_cpu,
    resolve_device,
    resolve_precision,
)
from playground.runtime.memory import check_training_fits
from playground.training.config import TrainConfig
from playground.training.schedule import MIN_USEFUL_STEPS, VALIDATIONS_PER_RUN, planned_steps, steps_that_fit
from playground.training.step import Optimization, time_one_step

SUBWORDS_PER_WORD = {"bpe": 1.4, "wordpiece": 1.4, "unigram": 1.4, "word": 1.0}  # "char" counts characters
PADDING_OVERHEAD = 1.15  # length-bucketed batches still pad a little; rounding to multiples of 8 adds some
MAX_PROBE_SECONDS = 0.8  # a full step slower than this is timed on a smaller batch and scaled up
PROBE_TOKENS = 512  # the warm-up step's batch


@dataclass
class Estimate:
    params: int
    device: str
    precision: str
    seconds_per_step: float  # one optimizer step on a full batch of batch_tokens tokens
    tokens_per_s: float
    planned_steps: int | None  # from max_steps / max_epochs; None when only the minutes budget limits
    eval_seconds: float  # one validation (loss + greedy decoding of eval_sentences)
    seconds: float  # the whole run, validations included
    limited_by: str  # "steps", "epochs" or "minutes"
    steps: int | None  # the steps expected to run (planned_steps, or what fits in the minutes budget)
    scaled: bool  # True when the timed batch was smaller than batch_tokens and the time was scaled up

    def minutes_for_useful_steps(self, max_minutes: float | None) -> float | None:
        """When the minutes budget holds too few steps to learn anything visible (schedule.MIN_USEFUL_STEPS): the
        minutes that would hold them, in half minutes; None otherwise."""
        if self.limited_by != "minutes" or not max_minutes or (self.steps or 0) >= MIN_USEFUL_STEPS:
            return None
        return math.ceil(2 * max_minutes * MIN_USEFUL_STEPS / max(self.steps or 1, 1)) / 2


def build_model(cfg: TrainConfig, vocab_size: int, device: torch.device) -> Transformer:
    """The model a run with this config would train, with vocabularies of `vocab_size` (joint or not, as cfg says), on
    `device`."""
    with device:
        return Transformer(cfg.model_config(vocab_size, vocab_size, cfg.joint_vocab))


def count_parameters(cfg: TrainConfig, vocab_size: int | None = None) -> int:
    """Parameters of the model a run with this config would train (vocabularies of `vocab_size`, default
    cfg.vocab_size, joint or not as cfg says), counted without building it (TransformerConfig.num_parameters)."""
    vocab = vocab_size or cfg.vocab_size
    return cfg.model_config(vocab, vocab, cfg.joint_vocab).num_parameters()


def data_tokens(words: int, chars: int, tokenizer: str) -> int:
    """Rough token count of a text side after tokenization, from its whitespace words and characters."""
    if tokenizer == "char":
        return chars
    return round(words * SUBWORDS_PER_WORD.get(tokenizer, 1.4))


def steps_per_epoch(src_tokens: int, tgt_tokens: int, pairs: int, batch_tokens: int) -> int:
    """Batches in one pass over data with these token counts (+<eos>/<bos> per sentence, some padding)."""
    total = (src_tokens + tgt_tokens + 2 * pairs) * PADDING_OVERHEAD
    return max(1, math.ceil(total / max(batch_tokens, 1)))


def estimate_training(
    cfg: TrainConfig,
    *,
    seq_len: int | None = None,
    vocab_size: int | None = None,
    epoch_steps: int | None = None,
    timed_steps: int = 3,
) -> Estimate:
    """Time `timed_steps` training steps (after one warm-up step) on the device of `cfg` and extrapolate.

    seq_len: tokens per sentence of the synthetic batch (default min(cfg.max_sentence_tokens, 24)); vocab_size:
    the vocabulary the tokenizer will have (default cfg.vocab_size); epoch_steps: batches per epoch of the real data,
    needed to turn a max_epochs budget into steps. Raises TrainingError for settings that cannot run.
    """
    device = resolve_device(cfg.device)
    precision = resolve_precision(cfg.precision, device)
    vocab = vocab_size or cfg.vocab_size
    length = max(2, min(seq_len or 24, cfg.max_sentence_tokens))
    check_training_fits(cfg.model_config(vocab, vocab, True), cfg.batch_tokens, device, precision)  # before building
    rows = max(1, cfg.batch_tokens // (2 * length))
    try:
        params, per_step, probe_rows, eval_seconds = _measure(cfg, device, precision, vocab, length, rows, timed_steps)
    except torch.OutOfMemoryError as err:
        raise TrainingError(f"A batch of {cfg.batch_tokens} tokens of this model does not fit in the memory of "
                            f"{describe(device)}: lower batch tokens or the model size.") from err
    finally:
        if device.type == "cuda":
            torch.cuda.empty_cache()

    tokens_per_step = rows * 2 * length
    planned, limited_by = planned_steps(cfg, epoch_steps)
    # validations every eval_every steps, or (auto) VALIDATIONS_PER_RUN of them whatever the length of the run
    per_step_with_eval = per_step + (eval_seconds / cfg.eval_every if cfg.eval_every else 0.0)
    fixed = eval_seconds if cfg.eval_every else VALIDATIONS_PER_RUN * eval_seconds
    total = planned * per_step_with_eval + fixed if planned else math.inf
    steps = planned
    if cfg.max_minutes and cfg.max_minutes * 60 < total:
        total, limited_by = cfg.max_minutes * 60 + eval_seconds, "minutes"
        # the last validation runs in a grace past the cap (budget.last_eval_deadline): the others count in it
        steps = steps_that_fit(cfg.max_minutes * 60, per_step_with_eval, fixed - eval_seconds)
    if planned is None and not math.isfinite(total):
        limited_by = "epochs"  # max_epochs without knowing the data size
    return Estimate(params, describe(device), precision, per_step, tokens_per_step / per_step, planned, eval_seconds,
                    total, limited_by, steps, probe_rows < rows)


def _measure(cfg: TrainConfig, device: torch.device, precision: str, vocab: int, length: int, rows: int,
             timed_steps: int) -> tuple[int, float, int, float]:
    """(parameters, seconds per full-batch step, rows actually timed, seconds per validation) on the device."""
    model = build_model(cfg, vocab, device)
    optimization = Optimization(cfg, model, device, precision)  # the Trainer's own step, optimizer and all
    generator = torch.Generator().manual_seed(0)

    def make_batch(n_rows: int) -> GlobalBatch:
        src = torch.randint(4, vocab, (n_rows, length), generator=generator)
        tgt = torch.randint(4, vocab, (n_rows, length + 1), generator=generator)
        batch = Batch(src.to(device), tgt[:, :-1].to(device), tgt[:, 1:].to(device), n_rows * length, n_rows * length)
        return GlobalBatch([batch], batch.n_tokens, batch.n_tokens + batch.n_src_tokens)

    # warm up on a small batch (kernel selection, allocator) and time it to learn how big a batch can be timed
    # within MAX_PROBE_SECONDS; full batches slower than that are timed smaller and scaled up
    probe_rows = max(1, min(rows, PROBE_TOKENS // (2 * length)))
    small = make_batch(probe_rows)
    with one_thread_on_cpu(device):
        optimization.step(small, 1, None)  # the optimizer's state made, kernels chosen: not part of any step's time
    # timed on the threads the run will train on, chosen as the Trainer chooses them (Trainer.time_step)
    first, one_thread = time_one_step(optimization, small, device)
    with one_thread_on_cpu(device) if one_thread else contextlib.nullcontext():
        batch = small
        if probe_rows < rows:
            probe_rows = min(rows, max(probe_rows, int(probe_rows * MAX_PROBE_SECONDS / max(first, 1e-6))))
            batch = make_batch(probe_rows)
            optimization.step(batch, 1, None)  # kernels are chosen per shape: warm this one up too
        step_seconds = median_seconds(lambda: optimization.step(batch, 1, None), max(1, timed_steps), device)
        per_step = step_seconds * rows / probe_rows
    with one_thread_on_cpu(device):  # as Trainer.validate decodes
        eval_seconds = _time_validation(model, cfg, device, precision, length, vocab)
    return model.num_parameters(), per_step, probe_rows, eval_seconds


@torch.inference_mode()
def _time_validation(model: Transformer, cfg: TrainConfig, device: torch.device, precision: str, length: int,
                     vocab: int) -> float:
    """Greedy decoding of eval_sentences (batches of 64, ~length+2 steps each), timed on one decoding step."""
    model.eval()
    batch = min(64, max(1, cfg.eval_sentences))
    src = torch.randint(4, vocab, (batch, length), device=device)
    with autocast(device, decoding_precision(device, precision)):  # as translation_scores decodes
        state = model.start_decoding(src, length + 8)
        tokens = torch.full((batch,), model.cfg.bos_id, dtype=torch.long, device=device)
        for _ in range(2):  # warm-up
            model.decode_step(tokens, state)
        per_token = median_seconds(lambda: model.decode_step(tokens, state), 3, device)
    n_batches = math.ceil(cfg.eval_sentences / batch)
    return n_batches * (length + 2) * per_token * 1.2  # + the validation loss pass
