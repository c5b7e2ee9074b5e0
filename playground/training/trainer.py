"""The training loop: a Trainer owns one run, from the tokenizer to the last saved package, and reports it as a
stream of typed events (playground.training.events) for the UI and the CLI. Its pieces live in their own modules:
step (one optimisation step: loss, backward, clipping, the learning rate, the update), budget (the steps planned
and when a budget ends the run), stopping (the budgets, Stop and a GPU call's length as one rule), machine (device,
precision, threads), inputs (the tokenizer, an epoch's batches, a step's global batch), evaluation (validation and
early stopping), checkpoint (saving and the resume policy), averaging (snapshots and their mean). Data-parallel
training across the processes torchrun starts: see Trainer."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Generator, Iterator

import torch

from playground.core.model import Transformer
from playground.core.tokenizer import PairBpeDropout, PairTokenizer
from playground.data.batching import GlobalBatch, encode_pairs, pad_multiple
from playground.errors import PlaygroundError, TrainingError
from playground.packages.format import read_config, saved_config
from playground.packages.store import load_package, model_config
from playground.runtime.device import one_thread_on_cpu
from playground.runtime.memory import check_training_fits, keep_allocator_compact
from playground.training import events
from playground.training.averaging import average_snapshots, run_snapshots
from playground.training.budget import MinutesPlan, last_eval_deadline
from playground.training.checkpoint import (
    History,
    RunState,
    load_run,
    optimizer_from_safetensors,
    refuse_fixed_changes,
    save_run,
)
from playground.training.config import TrainConfig
from playground.training.cost import check_run_cost
from playground.training.distributed import SINGLE, Ranks, agree, check_same_on_all_ranks, seed_rank
from playground.training.evaluation import (
    EarlyStopping,
    judging_metric,
    perplexity,
    probe_attention,
    time_cut_note,
    translation_scores,
    validation_loss,
)
from playground.training.events import StopReason
from playground.training.finetune import base_record, finetune_config
from playground.training.inputs import (
    TrainData,
    encode_epoch,
    epoch_batch_list,
    global_batch,
    run_fingerprint,
    shared_tokenizer,
)
from playground.training.machine import RunMachine, kept_state
from playground.training.schedule import planned_steps
from playground.training.step import Optimization
from playground.training.stopping import StopRules, last_eval_sentences

if TYPE_CHECKING:
    from playground.training.prepared import Prepared


@dataclass
class Loop:
    """The counters of one call of Trainer.run; what a resumed run goes on with lives on the Trainer."""

    start: float  # time.perf_counter() when the call began
    budget_steps: int | None  # the steps or epochs budget in steps (schedule.planned_steps)
    steps_per_epoch: int
    cap_end: float | None  # the time cap as a time.perf_counter() deadline
    elapsed: float = 0.0  # seconds of the run, its earlier calls included
    steps_here: int = 0
    train_time: float = 0.0  # seconds of this call's steps, validations left out
    tokens_window: int = 0
    window_start: float = 0.0
    planned_at: float = 0.0  # seconds into the call of the last re-plan
    last_loss: float | None = None
    saved_step: int | None = None
    last_eval: int = 0
    last_eval_end: float = 0.0  # seconds of the run when the last validation ended (or this call began)
    reason: StopReason | None = None

    def tokens_per_s(self, tokens: int, now: float) -> float:
        """Tokens a second over a sliding window that keeps the number current."""
        self.tokens_window += tokens
        rate = self.tokens_window / max(now - self.window_start, 1e-9)
        if now - self.window_start > 2.0:
            self.tokens_window, self.window_start = 0, now
        return rate


def no_wait(device_type: str) -> None:
    """The default between-steps hook: nothing to wait for."""


class Trainer:
    """Owns one training run. Iterate `run()` for events (playground.training.events); call `stop()` from any thread
    to end it cleanly. `between_steps(device_type)` is called before each step (the web app passes
    runtime.foreground.yield_to_quick_calls, so that a visitor's translate goes first on a shared CPU).

    Under torchrun (`ranks` from playground.training.distributed) every rank runs its own Trainer inside the process
    group: each trains on its share of every global batch, and rank 0 alone validates and writes packages (the other
    ranks yield no Eval, Saved or Averaged events)."""

    def __init__(self, cfg: TrainConfig, data: TrainData, out_dir: str | Path, resume_from: str | Path | None = None,
                 ranks: Ranks = SINGLE, prepared: Prepared | None = None,
                 between_steps: Callable[[str], object] = no_wait, init_from: str | Path | None = None):
        import torch._dynamo  # noqa: F401 - the first optimizer imports it (~3 s once per process): the process's
        # start-up, not this run's work, so before the clock starts
        self.setup_started = time.perf_counter()  # the time cap counts the tokenizer, the encoding and the loading
        if cfg.early_stop_metric == "auto":  # settled on the data: BLEU cannot judge references under four words
            cfg = replace(cfg, early_stop_metric=judging_metric(cfg.early_stop_metric, data.val))
        if init_from is not None and resume_from is None:  # the model and tokenizer settings are the base's
            cfg = finetune_config(cfg, Path(init_from))
        self.cfg, self.data, self.out_dir, self.ranks = cfg, data, Path(out_dir), ranks
        self.between_steps = between_steps
        self.stop_rules = StopRules(cfg, ranks)  # budgets, Stop and the call's length
        self.stop_requested = self.stop_rules.requested
        self.cut = ""  # what the time cap cut from a validation, for the summary
        self.check_data()
        self.machine = RunMachine(cfg.device, cfg.precision, ranks)  # its device, precision and threads
        # The run's own random stream for dropout (and, seeded alike, for the initial weights): nothing the rest of
        # the process draws (the web app's other sessions) changes this run, and a resumed run continues the stream.
        self.dropout_rng = torch.Generator(self.device).manual_seed(cfg.seed)
        self.step, self.epoch, self.batch_in_epoch, self.tokens_seen, self.elapsed_before = 0, 0, 0, 0, 0.0
        self.history, self.early_stopping = History(), EarlyStopping(cfg.early_stop_metric, cfg.patience)
        self.budget = MinutesPlan(cfg)  # the steps the run plans to take and the schedule fitted to them
        self.eval_limit: int | None = None  # sentences the last validation of a fitted run had time to decode
        self.base: dict | None = None  # a fine-tuned run's base (training.json's "base": finetune.base_record)
        if resume_from is not None:
            self.resume(Path(resume_from))  # every rank loads the weights and the optimizer state
        elif init_from is not None:
            self.start_from(Path(init_from))  # its model and tokenizer: no tokenizer trained, no new weights
        else:
            check_run_cost(cfg, self.device, self.precision)  # before the tokenizer's trainer reserves its tables
            self.start_model(prepared.tokenizer if prepared else shared_tokenizer(data, cfg, ranks))
        self.model.draw_dropout_from(self.dropout_rng)
        seed_rank(self.dropout_rng, cfg.seed, ranks, self.step)
        self.encode_data(prepared)
        self.choose_precision()
        # with average_last, rank 0 keeps a snapshot at each validation, to average at the end
        self.snapshots = run_snapshots(self.out_dir, cfg.average_last, self.step) if ranks.is_main else None

    # -- setting up ---------------------------------------------------------------------------------------

    def check_data(self) -> None:
        keep_allocator_compact()  # before the first matmul (playground.runtime.memory)
        if len(self.data.train) == 0 or len(self.data.val) == 0:
            raise TrainingError("Training needs at least one training pair and one validation pair.")
        if self.ranks.distributed:  # hashing millions of pairs is only worth it when there are ranks to compare
            check_same_on_all_ranks(run_fingerprint(self.cfg, self.data), "data or settings", self.ranks)

    def start_model(self, tokenizer: PairTokenizer) -> None:
        """A new model for this tokenizer, checked to fit before it is built, the same on every rank."""
        self.tokenizer = tokenizer
        model_cfg = self.cfg.model_config(tokenizer.src_vocab_size, tokenizer.tgt_vocab_size, tokenizer.joint)
        check_training_fits(model_cfg, self.cfg.batch_tokens, self.device, self.precision)
        self.model = Transformer(model_cfg, torch.Generator().manual_seed(self.cfg.seed)).to(self.device)
        self.optimization = Optimization(self.cfg, self.model, self.device, self.precision, self.ranks)

    def start_from(self, base: Path) -> None:
        """Fine-tuning: the base package's weights and tokenizer (every rank loads them), checked to fit before they
        are loaded."""
        check_training_fits(model_config(read_config(base)["model"]), self.cfg.batch_tokens, self.device,
                            self.precision)
        package = load_package(base, self.device)
        self.model, self.tokenizer, self.base = package.model.train(), package.tokenizer, base_record(base)
        self.optimization = Optimization(self.cfg, self.model, self.device, self.precision, self.ranks)

    def resume(self, folder: Path) -> None:
        package, state, optimizer_tensors = load_run(folder, self.device)
        refuse_fixed_changes(saved_config(package.training), self.cfg.to_dict(), folder.name)
        self.model, self.tokenizer = package.model, package.tokenizer
        self.optimization = Optimization(self.cfg, self.model, self.device, self.precision, self.ranks)
        optimizer_from_safetensors(self.optimization.optimizer, optimizer_tensors, state.optimizer)
        self.step, self.epoch, self.batch_in_epoch = state.step, state.epoch, state.batch_in_epoch
        self.tokens_seen, self.elapsed_before = state.tokens_seen, state.elapsed_s
        self.history = History(**package.training["history"])  # training.json: save() writes it with the state
        self.base = package.training.get("base")
        self.early_stopping.best, self.early_stopping.bad_evals = state.best, state.bad_evals
        self.budget.resume(package.training, state)
        try:
            self.dropout_rng.set_state(torch.tensor(state.rng_state, dtype=torch.uint8))
        except RuntimeError:  # saved on another kind of device, whose stream has another state: start a seeded one
            self.dropout_rng.manual_seed(hash((self.cfg.seed, self.step)) % 2**63)

    def encode_data(self, prepared: Prepared | None) -> None:
        """The pairs as ids and this epoch's batches; `prepared` (a chunked run's calls, training/prepared.py) holds
        them encoded once, except training pairs that BPE-dropout segments anew each epoch."""
        self.segmenter = PairBpeDropout(self.tokenizer, self.cfg.bpe_dropout) if self.cfg.bpe_dropout else None
        self.train_set = prepared.train_set if prepared and not self.segmenter else self.encode_train(self.epoch)
        self.val_set = (prepared.val_set if prepared  # never segmented
                        else encode_pairs(self.tokenizer, self.data.val, self.cfg.max_sentence_tokens))
        self.pad_multiple = pad_multiple(self.device, self.precision, self.train_set, self.cfg.batch_tokens)
        self.batches = self.epoch_batches(self.epoch)

    @property
    def device(self) -> torch.device:
        return self.machine.device

    @property
    def precision(self) -> str:
        return self.machine.precision

    def stop(self) -> None:
        self.stop_requested.set()

    # -- the loop -----------------------------------------------------------------------------------------

    def run(self) -> Iterator[events.Event]:
        """The loop: a global batch, one step, its events, a validation when one is due; until a stop rule (a
        budget, Stop, the end of a GPU call, early stopping) ends it. Then a last validation, the save and Done."""
        loop = self.begin()
        yield self.start_event(loop)
        try:
            while not self.stops(loop):
                self.roll_epoch()
                self.between_steps(self.device.type)
                step = yield from self.train_step(loop)
                if step is None:
                    return  # said in an Error event; the last good package is kept
                yield step
                yield from self.validate_if_due(loop)
            if loop.reason == StopReason.PAUSED:
                yield from self.pause(loop)
            if loop.reason != StopReason.PAUSED:  # a paused call only saves, to resume from
                yield from self.finish(loop)
        finally:
            self.keep_work(loop)

    def begin(self) -> Loop:
        """This call's counters, and its plan: under a minutes budget, fitted from a step timed now."""
        steps_per_epoch = len(self.batches) // self.batches_per_step
        budget_steps, _ = planned_steps(self.cfg, steps_per_epoch)
        start = time.perf_counter()
        self.elapsed_before += start - self.setup_started
        if self.budget.needs_timing(budget_steps):
            elapsed = self.elapsed_before + time.perf_counter() - start
            seconds = agree(self.time_step(), self.ranks)  # every rank times (and picks its threads), rank 0 plans
            self.budget.fit(self.step, budget_steps, elapsed, seconds)
        # the time cap as a clock time: validations stop there too (their decoding can outlast many steps)
        cap_end = start + self.cfg.max_minutes * 60 - self.elapsed_before if self.cfg.max_minutes else None
        last_eval = self.history.evals[-1]["step"] if self.history.evals else 0  # every rank has the history
        return Loop(start, budget_steps, steps_per_epoch, cap_end, elapsed=self.elapsed_before, window_start=start,
                    last_eval=last_eval, last_eval_end=self.elapsed_before)

    def start_event(self, loop: Loop) -> events.Start:
        return events.Start(self.model.num_parameters(), self.machine.describe(), self.precision, self.budget.planned,
                            loop.steps_per_epoch, len(self.train_set), len(self.val_set), self.step,
                            self.tokenizer.tgt_vocab_size, self.ranks.world_size, self.cfg.accumulate)

    def train_step(self, loop: Loop) -> Generator[events.Event, None, events.Step | None]:
        """One optimizer step and its bookkeeping; returns its Step event, or None after yielding the Error that
        ends the run (out of memory, or a loss that is not finite)."""
        batch = self.global_batch(self.batch_in_epoch)
        position, began = self.budget.next_position(self.step), time.perf_counter()
        try:
            with self.machine.threads():
                loss, lr, grad_norm = self.optimization.step(batch, position, self.budget.length, self.budget.warmup)
        except torch.OutOfMemoryError:
            loop.reason = StopReason.OUT_OF_MEMORY
            yield events.Error(f"The {self.device.type} ran out of memory at step {self.step + 1}; the last "
                               "saved package was kept. Lower batch tokens, the maximum length or the model "
                               "size.", self.step + 1)
            return None
        if not math.isfinite(loss):
            loop.reason = StopReason.LOSS_NOT_FINITE
            saved = loop.saved_step if loop.saved_step is not None else "none yet"
            yield events.Error(f"The loss became {loss} at step {self.step + 1}; training stopped and the last "
                               f"good package (step {saved}) was kept. Lower the learning rate, raise the warmup, "
                               "or use fp32 precision.", self.step + 1)
            return None
        now = self.count_step(loop, batch, position, loss, lr, began)
        self.replan_if_due(loop, now)
        return events.Step(self.step, self.epochs_done, loss, lr, grad_norm, loop.tokens_per_s(batch.n_all_tokens, now),
                           loop.elapsed, self.budget.eta(self.step, loop.elapsed, loop.steps_here, now - loop.start),
                           self.budget.planned)

    def count_step(self, loop: Loop, batch: GlobalBatch, position: float, loss: float, lr: float,
                   began: float) -> float:
        """The step taken: where the run and its schedule stand, its time and its curves; returns the time now."""
        self.step, self.batch_in_epoch = self.step + 1, self.batch_in_epoch + self.batches_per_step
        self.budget.position = position
        self.tokens_seen += batch.n_all_tokens
        now = time.perf_counter()
        loop.steps_here, loop.last_loss, loop.train_time = loop.steps_here + 1, loss, loop.train_time + now - began
        loop.elapsed = self.elapsed_before + now - loop.start
        self.history.record_step(self.step, loss, lr, loop.elapsed)
        return now

    def validate_if_due(self, loop: Loop) -> Iterator[events.Event]:
        """The validation due after this step, if one is (MinutesPlan.validation_due: rank 0's clock decides); early
        stopping ends the run after it (loop.reason)."""
        due = self.budget.validation_due(self.step, loop.last_eval, loop.elapsed, loop.last_eval_end)
        if not agree(due, self.ranks):
            return
        if self.ranks.is_main:  # the other ranks wait for it in the next collective
            yield from self.validate_and_save(loop.elapsed, final=False, until=loop.cap_end)
        loop.saved_step = loop.last_eval = self.step
        loop.last_eval_end = self.elapsed_before + time.perf_counter() - loop.start
        if agree(self.early_stopping.out_of_patience, self.ranks):
            loop.reason = StopReason.EARLY

    def pause(self, loop: Loop) -> Iterator[events.Event]:
        """The end of a call's time (ZeroGPU): the state saved to resume from, even a step just validated (the next
        call then counts the time that validation took). A Stop pressed during that save, which the consumer passes
        on between events, ends the run in this call, never in one more."""
        if self.ranks.is_main:
            yield events.Phase("saving", self.step)
            path = self.save(self.elapsed_before + time.perf_counter() - loop.start)
            yield events.Saved(str(path), self.step)
        loop.saved_step = self.step
        loop.reason = self.stop_rules.after_pause()

    def finish(self, loop: Loop) -> Iterator[events.Event]:
        """The end of the run: a last validation and save (or, when this step was just validated, the save again:
        the package keeps the time that validation took, so a run that stopped on its minutes is saved as used up),
        the average of the snapshots, and Done."""
        if self.step > 0 and self.ranks.is_main:
            if self.step != loop.saved_step:
                yield from self.validate_and_save(loop.elapsed, final=True, sentences=last_eval_sentences(loop.reason),
                                                  until=last_eval_deadline(self.cfg, loop.cap_end))
            else:
                yield events.Phase("saving", self.step)
                self.save(loop.elapsed)
        loop.saved_step = self.step
        averaged = average_snapshots(self.snapshots, self.out_dir)
        if averaged:
            yield averaged
        yield events.Done(loop.reason.said(self.cfg.early_stop_metric, self.cfg.patience),
                          self.result(loop.elapsed, loop.last_loss, averaged.path if averaged else None))

    def stops(self, loop: Loop) -> bool:
        """Whether the run ends before its next step (StopRules); loop.reason says why (early stopping may have said
        already)."""
        call_seconds = time.perf_counter() - loop.start
        loop.elapsed = self.elapsed_before + call_seconds
        if loop.reason is None:
            loop.reason = self.stop_rules.reason(self.step, loop.budget_steps, loop.elapsed, loop.steps_here,
                                                 call_seconds)
        return loop.reason is not None

    # -- the hooks: re-planning, saving -------------------------------------------------------------------

    def replan_if_due(self, loop: Loop, now: float) -> None:
        """Under a minutes budget, the plan fitted again to the speed measured so far; rank 0's clock decides, so
        that every rank follows the same schedule."""
        if not (self.cfg.max_minutes
                and agree(self.budget.replan_due(loop.steps_here, loop.planned_at, now - loop.start), self.ranks)):
            return
        if self.ranks.is_main:
            self.budget.replan(self.step, loop.budget_steps, loop.elapsed, loop.steps_here, loop.train_time)
        self.budget.planned = agree(self.budget.planned, self.ranks)
        loop.planned_at = now - loop.start

    def keep_work(self, loop: Loop) -> None:
        """However the loop ended (the consumer went away: a closed tab, Ctrl-C, a cancelled job), the steps since
        the last save are saved, unless the run failed."""
        if self.ranks.is_main and not (loop.reason and loop.reason.failed) and self.step > 0 \
                and self.step != loop.saved_step:
            self.save(self.elapsed_before + time.perf_counter() - loop.start)

    def validate_and_save(self, elapsed: float, final: bool, sentences: int | None = None,
                          until: float | None = None) -> Iterator[events.Event]:
        """Rank 0's part of a validation: the Eval event, then the package (and a snapshot to average later)."""
        yield events.Phase("validating", self.step)
        evaluation = self.validate(sentences, until)
        better = self.early_stopping.judge(self.history.evals[-1])
        evaluation.best, evaluation.improved = self.early_stopping.best, better and not final
        yield evaluation
        yield events.Phase("saving", self.step)
        training = self.summary(elapsed)
        path = self.save(elapsed, training)
        if self.snapshots:
            self.snapshots.save(self.step, self.model, self.tokenizer, src_lang=self.data.src_lang,
                                tgt_lang=self.data.tgt_lang, training=training)
        yield events.Saved(str(path), self.step)

    def save(self, elapsed: float, training: dict | None = None) -> Path:
        state = RunState(self.dropout_rng.get_state().tolist(), self.step, self.epoch, self.batch_in_epoch,
                         self.tokens_seen, elapsed, self.early_stopping.best, self.early_stopping.bad_evals,
                         **self.budget.saved())
        return save_run(self.out_dir, self.model, self.tokenizer, self.optimization.optimizer, state,
                        src_lang=self.data.src_lang, tgt_lang=self.data.tgt_lang,
                        training=training or self.summary(elapsed))

    # -- batches ------------------------------------------------------------------------------------------

    @property
    def epochs_done(self) -> float:
        return self.epoch + self.batch_in_epoch / max(len(self.batches), 1)

    @property
    def batches_per_step(self) -> int:
        """The size of a global batch: batches one optimizer step consumes over all ranks and micro-batches."""
        return self.ranks.world_size * self.cfg.accumulate

    def encode_train(self, epoch: int) -> list[tuple[list[int], list[int]]]:
        return encode_epoch(self.tokenizer, self.segmenter, self.data.train, self.cfg, epoch)

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        return epoch_batch_list(self.train_set, self.cfg, epoch, self.pad_multiple, self.ranks)

    def global_batch(self, start: int) -> GlobalBatch:
        return global_batch(self.batches, self.train_set, start, self.cfg.accumulate, self.ranks, self.device,
                            self.pad_multiple)

    def roll_epoch(self) -> None:
        """The next epoch, when the last batches of this one cannot fill a global batch (they are left out: a
        different few each epoch)."""
        if self.batch_in_epoch + self.batches_per_step > len(self.batches):
            self.epoch, self.batch_in_epoch = self.epoch + 1, 0
            if self.segmenter:
                self.train_set = self.encode_train(self.epoch)
            self.batches = self.epoch_batches(self.epoch)

    # -- the machine --------------------------------------------------------------------------------------

    def time_step(self) -> float:
        """Seconds of one step here (RunMachine.time_step) on a batch of the run's data."""
        with kept_state(self.dropout_rng):  # timing changes nothing the run draws
            return self.machine.time_step(self.optimization, self.timing_batch())

    def choose_precision(self) -> None:
        """'auto' on a GPU: bf16 or fp32, whichever steps faster on a batch of the run's data (RunMachine)."""
        if self.machine.times_precision(self.model.cfg, self.cfg.batch_tokens):
            with kept_state(self.dropout_rng):
                self.machine.choose_precision(self.optimization, self.timing_batch())

    def timing_batch(self) -> GlobalBatch:
        return self.global_batch(min(self.batch_in_epoch, len(self.batches) - self.batches_per_step))

    # -- validation and what a run reports ----------------------------------------------------------------

    def validate(self, sentences: int | None = None, until: float | None = None) -> events.Eval:
        """Validation loss, and BLEU/chrF of the first eval_sentences (or `sentences`) validation pairs decoded; with
        `until` (the run's time cap, a time.perf_counter() deadline) what is left at that time is cut, and said."""
        began = time.perf_counter()
        with one_thread_on_cpu(self.device):
            val_loss = validation_loss(self.model, self.val_set, self.cfg.batch_tokens, self.device, self.precision,
                                       self.pad_multiple, until)
            sentences = min(self.cfg.eval_sentences, sentences or self.cfg.eval_sentences, self.eval_limit or math.inf,
                            len(self.data.val))
            # a fitted run's validation decodes what fits in its share of the minutes, at most as many sentences as
            # the one before
            allowance = self.budget.validation_allowance()
            scores, samples = translation_scores(self.model, self.tokenizer, self.data.val[:sentences],
                                                 self.device, self.precision, allowance, until)
            if allowance is not None and scores["sentences"]:
                self.eval_limit = scores["sentences"]
        self.budget.eval_seconds.append(time.perf_counter() - began)
        record = {"step": self.step, "val_loss": val_loss, "val_ppl": perplexity(val_loss), **scores}
        self.history.evals.append(record)
        self.history.probe.append({"step": self.step, **probe_attention(self.model, self.tokenizer, self.val_set[0])})
        cut = time_cut_note(self.step, scores["sentences"], sentences, until)
        self.cut = cut or self.cut
        return events.Eval(**record, samples=samples, cut=cut)

    def run_facts(self, elapsed: float) -> dict:
        """What both the package's training record (summary) and the Done event (result) report."""
        return {"steps": self.step, "epochs": self.epochs_done, "params": self.model.num_parameters(),
                "wall_s": elapsed, "device": self.machine.describe(), "precision": self.precision,
                "world_size": self.ranks.world_size, "best": self.early_stopping.best}

    def summary(self, elapsed: float) -> dict:
        """The training record saved in the package (training.json), history included."""
        return {
            "config": self.cfg.to_dict(),
            "data": {"description": self.data.description, "train_pairs": len(self.data.train),
                     "val_pairs": len(self.data.val), "src_lang": self.data.src_lang, "tgt_lang": self.data.tgt_lang},
            **self.run_facts(elapsed), "tokens_seen": self.tokens_seen,
            "last": self.history.evals[-1] if self.history.evals else None, "history": self.history.as_dict(),
            **({"base": self.base} if self.base else {}),
        }

    def result(self, elapsed: float, last_loss: float | None, averaged: str | None = None) -> dict:
        """The Done event's summary: the run's facts without the history, for the CLI's --json and the UI."""
        return {**self.run_facts(elapsed), "tokens_per_s": self.tokens_seen / max(elapsed, 1e-9),
                "batches_per_step": self.batches_per_step, "train_loss": last_loss,
                "final": self.history.evals[-1] if self.history.evals else {}, "package": str(self.out_dir),
                "averaged": averaged, "first_plan": self.budget.first_plan, "cut": self.cut}


def run_training(cfg: TrainConfig, data: TrainData, out_dir: str | Path, resume_from: str | Path | None = None,
                 ranks: Ranks = SINGLE, init_from: str | Path | None = None) -> Iterator[events.Event]:
    """Convenience: build a Trainer and iterate its events; setup errors come out as one Error event."""
    try:
        trainer = Trainer(cfg, data, out_dir, resume_from, ranks, init_from=init_from)
    except PlaygroundError as err:
        yield events.Error(str(err))
        return
    yield from trainer.run()
