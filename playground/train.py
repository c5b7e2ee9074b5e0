"""The training engine: token-budget batches, Adam with the paper's schedule, label smoothing, validation with
sacreBLEU, packages saved on every validation and on stop, and one stream of events for the UI and the CLI.
Gradient accumulation, and data-parallel training across the processes torchrun starts (see Trainer)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import random
import threading
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Iterator

import torch
import torch.nn.functional as F

from playground.averaging import SnapshotStore, average_packages
from playground.decode import DecodeOptions, attention_maps, translate
from playground.device import autocast, describe, resolve_device, resolve_precision
from playground.distributed import (SINGLE, Ranks, agree, check_same_on_all_ranks, rank_device, seed_rank,
                                    sum_over_ranks, wrap_model)
from playground.errors import PlaygroundError, TrainingError
from playground.memory import check_training_fits
from playground.metrics import score
from playground.model import Transformer, TransformerConfig
from playground.package import check_name, load_package, load_resume_state, save_package
from playground.tokenizer import BOS_ID, EOS_ID, PAD_ID, PairTokenizer, train_tokenizer

SCHEDULES = ("noam", "inverse_sqrt", "cosine", "constant")
OPTIMIZERS = ("adam", "adamw")
EARLY_STOP_METRICS = ("bleu", "chrf", "val_loss", "exact_match")
PAUSED = "paused"  # the reason of a run that ended its call (pause_after_s) to go on in the next one


@dataclass
class TrainConfig:
    # model
    d_model: int = 256
    n_heads: int = 8
    n_encoder_layers: int = 3
    n_decoder_layers: int = 3
    d_ff: int = 1024
    activation: str = "relu"
    dropout: float = 0.1
    attention_dropout: float = 0.0
    positional_encoding: str = "sinusoidal"
    norm_placement: str = "post"
    tie_embeddings: bool = True
    max_len: int = 128  # tokens per sentence; longer pairs are dropped when reading the data
    # tokenizer
    tokenizer: str = "bpe"
    vocab_size: int = 8000
    joint_vocab: bool = True
    # optimisation
    optimizer: str = "adam"
    lr: float = 1.0  # noam: a scale on d_model^-0.5 * min(...); otherwise the peak learning rate
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-9
    weight_decay: float = 0.0
    schedule: str = "noam"
    warmup_steps: int = 4000
    label_smoothing: float = 0.1
    clip_norm: float = 1.0  # 0 = no clipping
    batch_tokens: int = 4096  # source + target tokens per batch, padding included
    accumulate: int = 1  # batches per optimizer step (on each process under torchrun)
    # budgets and validation
    max_steps: int | None = None
    max_epochs: float | None = None
    max_minutes: float | None = None
    eval_every: int = 500
    eval_sentences: int = 200  # validation sentences decoded greedily for BLEU/chrF
    early_stop_metric: str = "bleu"
    patience: int | None = None  # validations without improvement before stopping; None = never
    average_last: int = 0  # at the end, average the weights of the last K validations into <out>-avg; 0 = off
    # machine
    device: str = "auto"
    precision: str = "auto"
    seed: int = 0

    def __post_init__(self) -> None:
        self.betas = tuple(self.betas)
        problems = []
        if self.schedule not in SCHEDULES:
            problems.append(f"schedule must be one of {', '.join(SCHEDULES)}")
        if self.optimizer not in OPTIMIZERS:
            problems.append(f"optimizer must be one of {', '.join(OPTIMIZERS)}")
        if self.early_stop_metric not in EARLY_STOP_METRICS:
            problems.append(f"early-stop metric must be one of {', '.join(EARLY_STOP_METRICS)}")
        if self.max_steps is None and self.max_epochs is None and self.max_minutes is None:
            problems.append("set a budget: max steps, max epochs or max minutes")
        if self.batch_tokens < 2 * self.max_len:
            problems.append(f"batch tokens ({self.batch_tokens}) must hold at least one pair of the maximum "
                            f"length (2 x {self.max_len}); raise batch tokens or lower the maximum length")
        if self.eval_every < 1 or self.warmup_steps < 0 or not 0 <= self.label_smoothing < 1:
            problems.append("eval-every must be ≥ 1, warmup ≥ 0 and label smoothing in [0, 1)")
        if self.accumulate < 1 or self.average_last < 0:
            problems.append("accumulate must be ≥ 1 and average-last ≥ 0")
        if problems:
            raise TrainingError("Invalid training settings: " + "; ".join(problems) + ".")

    def model_config(self, src_vocab: int, tgt_vocab: int, joint: bool) -> TransformerConfig:
        try:
            return TransformerConfig(
                src_vocab_size=src_vocab, tgt_vocab_size=tgt_vocab, d_model=self.d_model, n_heads=self.n_heads,
                n_encoder_layers=self.n_encoder_layers, n_decoder_layers=self.n_decoder_layers, d_ff=self.d_ff,
                activation=self.activation, dropout=self.dropout, attention_dropout=self.attention_dropout,
                positional_encoding=self.positional_encoding, norm_placement=self.norm_placement,
                joint_vocab=joint, tie_embeddings=self.tie_embeddings, max_len=self.max_len + 2,
                pad_id=PAD_ID, bos_id=BOS_ID, eos_id=EOS_ID)
        except ValueError as err:
            raise TrainingError(f"Invalid model settings: {err}.") from err

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "TrainConfig":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})


def planned_steps(cfg: TrainConfig, epoch_steps: int | None) -> tuple[int | None, str]:
    """(steps, "steps" or "epochs"): the budget that ends the run first, the one the trainer and the
    estimate both count by (the steps budget on a tie); (None, "minutes") when only the minutes budget, or epochs of unknown size, limit it."""
    planned, limited_by = (cfg.max_steps, "steps") if cfg.max_steps else (None, "minutes")
    if cfg.max_epochs and epoch_steps:
        by_epochs = math.ceil(cfg.max_epochs * epoch_steps)
        if planned is None or by_epochs < planned:
            planned, limited_by = by_epochs, "epochs"
    return planned, limited_by


# ----------------------------------------------------------------------------------------------------------
# Learning rate and loss


def learning_rate(cfg: TrainConfig, step: int, total_steps: int | None = None) -> float:
    """Learning rate at optimizer step `step` (1-based)."""
    step = max(step, 1)
    warmup = max(cfg.warmup_steps, 1)
    if cfg.schedule == "noam":  # the paper: d^-0.5 * min(step^-0.5, step * warmup^-1.5)
        return cfg.lr * cfg.d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
    if cfg.schedule == "inverse_sqrt":
        return cfg.lr * min(step / warmup, math.sqrt(warmup / step))
    if cfg.schedule == "cosine":
        if step < warmup:
            return cfg.lr * step / warmup
        total = max(total_steps or step, warmup + 1)
        progress = min((step - warmup) / (total - warmup), 1.0)
        return cfg.lr * 0.5 * (1 + math.cos(math.pi * progress))
    return cfg.lr  # constant


def smoothed_loss_sum(logits: torch.Tensor, target: torch.Tensor, smoothing: float, pad_id: int) -> torch.Tensor:
    """Sum over non-pad tokens of (1-eps)*NLL + eps*mean_v(-log p_v).
    logits [B,T,V] (any dtype; computed in float32), target [B,T]."""
    return F.cross_entropy(logits.flatten(0, 1).float(), target.flatten(), ignore_index=pad_id,
                           label_smoothing=smoothing, reduction="sum")


def label_smoothed_loss(logits: torch.Tensor, target: torch.Tensor, smoothing: float, pad_id: int) -> tuple[torch.Tensor, int]:
    """smoothed_loss_sum and the token count it sums over (counting waits for the device: not for the hot loop)."""
    return smoothed_loss_sum(logits, target, smoothing, pad_id), int((target != pad_id).sum())


# ----------------------------------------------------------------------------------------------------------
# Batches


@dataclass
class Batch:
    src: torch.Tensor  # [B,S] source tokens + <eos>, padded
    tgt_in: torch.Tensor  # [B,T] <bos> + target tokens
    tgt_out: torch.Tensor  # [B,T] target tokens + <eos>
    n_tokens: int  # real target tokens (what the loss is averaged over)
    n_src_tokens: int


@dataclass
class GlobalBatch:
    """What one optimizer step consumes, on all ranks together (see Trainer.next_global_batch)."""

    mine: list[Batch]  # this rank's micro-batches
    n_tokens: int  # real target tokens of every rank's micro-batches: what the step's loss is averaged over
    n_all_tokens: int  # source + target tokens of every rank's micro-batches


def round_up(n: int, multiple: int) -> int:
    return (n + multiple - 1) // multiple * multiple


def pad_multiple(device: torch.device) -> int:
    """Padded lengths: multiples of 8 suit GPU tensor cores; on a CPU every pad token is pure waste (measured:
    rounding to 8 turned 5% padding into 22% on Multi30k)."""
    return 8 if device.type == "cuda" else 1


def encode_pairs(tokenizer: PairTokenizer, pairs: list[tuple[str, str]], max_len: int) -> list[tuple[list[int], list[int]]]:
    """Tokenise once, up front: source + <eos>, target without specials; pairs too long for the model are cut."""
    src = tokenizer.encode_src_batch([s for s, _ in pairs])
    tgt = tokenizer.encode_tgt_batch([t for _, t in pairs])
    return [(s[:max_len] + [EOS_ID], t[:max_len]) for s, t in zip(src, tgt)]


def make_batches(encoded: list[tuple[list[int], list[int]]], batch_tokens: int, seed: int, multiple: int = 1) -> list[list[int]]:
    """Indices of pairs grouped by length into batches of at most `batch_tokens` padded tokens (fairseq's
    max-tokens): sort with a little seeded noise, cut greedily, shuffle the batch order."""
    rng = random.Random(seed)
    order = sorted(range(len(encoded)), key=lambda i: (len(encoded[i][0]), len(encoded[i][1]), rng.random()))
    batches, current, longest = [], [], 0
    for i in order:
        s, t = encoded[i]
        pair_len = round_up(len(s), multiple) + round_up(len(t) + 1, multiple)
        if current and (len(current) + 1) * max(longest, pair_len) > batch_tokens:
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, pair_len)
    if current:
        batches.append(current)
    rng.shuffle(batches)
    return batches


def token_counts(encoded: list[tuple[list[int], list[int]]], indices: list[int]) -> tuple[int, int]:
    """(real target tokens, source tokens) of a batch, without building it."""
    pairs = [encoded[i] for i in indices]
    return sum(len(t) + 1 for _, t in pairs), sum(len(s) for s, _ in pairs)


def collate(encoded: list[tuple[list[int], list[int]]], indices: list[int], device: torch.device) -> Batch:
    """Pad (to a multiple of 8 on a GPU) and move to the device in one copy. Padded as lists, so each tensor is made
    in one call (a tensor per row took 2.4x as long)."""
    pairs = [encoded[i] for i in indices]
    multiple = pad_multiple(device)
    S = round_up(max(len(s) for s, _ in pairs), multiple)
    T = round_up(max(len(t) for _, t in pairs) + 1, multiple)
    src = torch.tensor([s + [PAD_ID] * (S - len(s)) for s, _ in pairs])
    tgt_in = torch.tensor([[BOS_ID] + t + [PAD_ID] * (T - 1 - len(t)) for _, t in pairs])
    tgt_out = torch.tensor([t + [EOS_ID] + [PAD_ID] * (T - 1 - len(t)) for _, t in pairs])
    n_tokens, n_src = token_counts(encoded, indices)
    non_blocking = device.type == "cuda"
    return Batch(src.to(device, non_blocking=non_blocking), tgt_in.to(device, non_blocking=non_blocking),
                 tgt_out.to(device, non_blocking=non_blocking), n_tokens, n_src)


# ----------------------------------------------------------------------------------------------------------
# Optimizer state as safetensors + JSON (no pickle)


def optimizer_to_safetensors(optimizer: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict]:
    state = optimizer.state_dict()
    tensors, scalars = {}, {}
    for index, values in state["state"].items():
        for key, value in values.items():
            if torch.is_tensor(value):
                tensors[f"{index}.{key}"] = value
            else:
                scalars[f"{index}.{key}"] = value
    return tensors, {"param_groups": state["param_groups"], "scalars": scalars}


def optimizer_from_safetensors(optimizer: torch.optim.Optimizer, tensors: dict[str, torch.Tensor], meta: dict) -> None:
    state: dict[int, dict] = {}
    for name, value in list(tensors.items()) + list(meta["scalars"].items()):
        index, key = name.split(".", 1)
        state.setdefault(int(index), {})[key] = value
    optimizer.load_state_dict({"state": state, "param_groups": meta["param_groups"]})


# ----------------------------------------------------------------------------------------------------------
# The run


@dataclass
class TrainData:
    train: list[tuple[str, str]]
    val: list[tuple[str, str]]
    src_lang: str = "src"
    tgt_lang: str = "tgt"
    description: str = "user data"


@dataclass
class History:
    """What the charts draw and training.json keeps."""

    steps: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    evals: list[dict] = field(default_factory=list)  # step, val_loss, bleu, chrf, exact_match
    probe: list[dict] = field(default_factory=list)  # attention of a fixed validation pair at each validation

    def as_dict(self) -> dict:
        return asdict(self)


def run_fingerprint(cfg: TrainConfig, data: TrainData) -> str:
    """A hash of the settings and the sentence pairs, to check that every rank trains on the same ones."""
    digest = hashlib.sha256(json.dumps(cfg.to_dict(), sort_keys=True).encode())
    for part in (data.train, data.val):
        digest.update(f"\0{len(part)}\0".encode())
        for source, target in part:
            digest.update(f"{source}\t{target}\n".encode())
    return digest.hexdigest()


class Trainer:
    """Owns one training run. Iterate `run()` for events; call `stop()` from any thread to end it cleanly.

    Events are dicts with a "type": "start", "step", "eval", "saved", "averaged", "done" or "error".

    Under torchrun (`ranks` from playground.distributed) every rank runs its own Trainer inside the process group:
    each trains on its share of every global batch, and rank 0 alone validates and writes packages (the other
    ranks yield no "eval", "saved" or "averaged" events)."""

    def __init__(self, cfg: TrainConfig, data: TrainData, out_dir: str | Path, resume_from: str | Path | None = None,
                 ranks: Ranks = SINGLE):
        self.cfg, self.data, self.out_dir, self.ranks = cfg, data, Path(out_dir), ranks
        self.stop_requested = threading.Event()
        self.pause_after_s: float | None = None  # end this call after so long, saved to resume (ZeroGPU chunks)
        if len(data.train) == 0 or len(data.val) == 0:
            raise TrainingError("Training needs at least one training pair and one validation pair.")
        if ranks.distributed:  # hashing millions of pairs is only worth it when there are ranks to compare
            check_same_on_all_ranks(run_fingerprint(cfg, data), "data or settings", ranks)
        self.device = rank_device(resolve_device(cfg.device), ranks)
        self.precision = resolve_precision(cfg.precision, self.device)
        # The run's own random stream for dropout (and, seeded alike, for the initial weights): nothing the rest of
        # the process draws (the web app's other sessions) changes this run, and a resumed run continues the stream.
        self.dropout_rng = torch.Generator(self.device).manual_seed(cfg.seed)
        self.step, self.epoch, self.batch_in_epoch, self.tokens_seen, self.elapsed_before = 0, 0, 0, 0, 0.0
        self.history, self.best, self.bad_evals = History(), None, 0
        if resume_from is not None:
            self.resume(Path(resume_from))  # every rank loads the weights and the optimizer state
        else:
            self.tokenizer = self.shared_tokenizer()
            model_cfg = cfg.model_config(self.tokenizer.src_vocab_size, self.tokenizer.tgt_vocab_size, self.tokenizer.joint)
            check_training_fits(model_cfg, cfg.batch_tokens, self.device, self.precision)
            self.model = Transformer(model_cfg, torch.Generator().manual_seed(cfg.seed))  # the same on every rank
            self.model.to(self.device)
            self.optimizer = self.make_optimizer()
        self.model.draw_dropout_from(self.dropout_rng)
        seed_rank(self.dropout_rng, cfg.seed, ranks, self.step)
        self.train_model = wrap_model(self.model, self.device, ranks)
        self.train_set = encode_pairs(self.tokenizer, data.train, cfg.max_len)
        self.val_set = encode_pairs(self.tokenizer, data.val, cfg.max_len)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.precision == "fp16")
        self.batches = self.epoch_batches(self.epoch)
        self.average_dir = self.out_dir.with_name(self.out_dir.name + "-avg")
        self.snapshots = None
        if cfg.average_last and ranks.is_main:
            check_name(self.average_dir.name)  # now, not after hours of training
            self.snapshots = SnapshotStore(self.out_dir.with_name(self.out_dir.name + "-snapshots"), cfg.average_last)
            self.snapshots.discard_after(self.step)

    def shared_tokenizer(self) -> PairTokenizer:
        """Rank 0 trains the tokenizer and sends it to the others as JSON: every rank must map text to the very
        same ids, whatever the library versions on other machines do."""
        cfg = self.cfg
        trained = (train_tokenizer(self.data.train, kind=cfg.tokenizer, vocab_size=cfg.vocab_size, joint=cfg.joint_vocab)
                   if self.ranks.is_main else None)
        if not self.ranks.distributed:
            return trained
        return PairTokenizer.from_json_strings(*agree(trained.to_json_strings() if trained else None, self.ranks))

    @property
    def epochs_done(self) -> float:
        return self.epoch + self.batch_in_epoch / max(len(self.batches), 1)

    @property
    def batches_per_step(self) -> int:
        """The size of a global batch: batches one optimizer step consumes over all ranks and micro-batches."""
        return self.ranks.world_size * self.cfg.accumulate

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        """The epoch's batch list, the same on every rank (seeded by the run's seed and the epoch)."""
        batches = make_batches(self.train_set, self.cfg.batch_tokens, self.cfg.seed + epoch, pad_multiple(self.device))
        if len(batches) < self.batches_per_step:
            raise TrainingError(
                f"One optimizer step takes {self.batches_per_step} batches ({self.ranks.world_size} processes x "
                f"accumulate {self.cfg.accumulate}) but the training data makes only {len(batches)} batches of "
                f"{self.cfg.batch_tokens} tokens; lower batch tokens, accumulate or the number of processes.")
        return batches

    def make_optimizer(self) -> torch.optim.Optimizer:
        kind = torch.optim.AdamW if self.cfg.optimizer == "adamw" else torch.optim.Adam
        fused = {"fused": True} if self.device.type in ("cuda", "cpu") else {}  # one kernel, not a loop per tensor
        return kind(self.model.parameters(), lr=0.0, betas=self.cfg.betas, eps=self.cfg.eps,
                    weight_decay=self.cfg.weight_decay, **fused)

    def resume(self, folder: Path) -> None:
        package = load_package(folder, self.device)
        tensors, state = load_resume_state(folder)
        self.model, self.tokenizer = package.model, package.tokenizer
        self.optimizer = self.make_optimizer()
        optimizer_from_safetensors(self.optimizer, tensors, state["optimizer"])
        self.step, self.epoch, self.batch_in_epoch = state["step"], state["epoch"], state["batch_in_epoch"]
        self.tokens_seen, self.elapsed_before = state["tokens_seen"], state["elapsed_s"]
        self.history = History(**package.training["history"])  # training.json: save() writes it with the state
        self.best, self.bad_evals = state["best"], state["bad_evals"]
        try:
            self.dropout_rng.set_state(torch.tensor(state["rng_state"], dtype=torch.uint8))
        except RuntimeError:  # saved on another kind of device, whose stream has another state: start a seeded one
            self.dropout_rng.manual_seed(hash((self.cfg.seed, self.step)) % 2**63)

    def stop(self) -> None:
        self.stop_requested.set()

    # -- budgets ------------------------------------------------------------------------------------------

    def budget_reached(self, planned: int | None, elapsed: float) -> str | None:
        if planned is not None and self.step >= planned:
            return "step budget reached" if self.cfg.max_steps == planned else "epoch budget reached"
        if self.cfg.max_minutes and elapsed >= self.cfg.max_minutes * 60:
            return "time budget reached"
        return None

    def eta(self, planned: int | None, elapsed: float, steps_done_here: int, run_time: float) -> float | None:
        estimates = []
        if planned is not None and steps_done_here:
            estimates.append((planned - self.step) * run_time / steps_done_here)
        if self.cfg.max_minutes:
            estimates.append(self.cfg.max_minutes * 60 - elapsed)
        return max(min(estimates), 0.0) if estimates else None

    # -- one step -----------------------------------------------------------------------------------------

    def next_global_batch(self) -> GlobalBatch:
        """This rank's share of the next optimizer step.

        Every rank holds the same seeded batch list for the epoch. One optimizer step consumes the next
        G = world size x accumulate batches of it, the *global batch*; rank r trains on its positions r, r+W, r+2W,
        ..., one micro-batch at a time. train_step sums the loss over all G batches and divides by their total
        target tokens, so the gradient is that of one batch of the combined size however the G batches are split:
        2 ranks with accumulate 1 compute what 1 process with accumulate 2 computes on the same global batches (up
        to the order of floating-point sums). The token counts come from the shared batch list, so no rank has to
        ask the others for them."""
        start, world_size = self.batch_in_epoch, self.ranks.world_size
        global_batch = self.batches[start : start + self.batches_per_step]
        counts = [token_counts(self.train_set, indices) for indices in global_batch]
        mine = [collate(self.train_set, indices, self.device) for indices in global_batch[self.ranks.rank :: world_size]]
        return GlobalBatch(mine, n_tokens=sum(tgt for tgt, _ in counts), n_all_tokens=sum(tgt + src for tgt, src in counts))

    def gradient_sync(self, last: bool):
        """DDP all-reduces the gradients in every backward: accumulate them locally, all-reduce after the last."""
        if last or self.train_model is self.model:
            return contextlib.nullcontext()
        return self.train_model.no_sync()

    def train_step(self, batch: GlobalBatch, planned: int | None) -> tuple[float, float, float]:
        """One optimizer step: (the global batch's loss per target token, the learning rate, the gradient norm)."""
        self.train_model.train()
        lr = learning_rate(self.cfg, self.step + 1, planned)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.zero_grad(set_to_none=True)
        loss_sum = torch.zeros((), device=self.device)
        for index, micro in enumerate(batch.mine):
            with self.gradient_sync(last=index == len(batch.mine) - 1):
                with autocast(self.device, self.precision):
                    logits = self.train_model(micro.src, micro.tgt_in)
                micro_loss = smoothed_loss_sum(logits, micro.tgt_out, self.cfg.label_smoothing, PAD_ID)
                # DDP averages the gradients over the ranks; the world size undoes that average, so the gradient is
                # that of (sum of every micro-batch's loss) / (the global batch's target tokens)
                self.scaler.scale(micro_loss * self.ranks.world_size / batch.n_tokens).backward()
            loss_sum += micro_loss.detach()
        self.scaler.unscale_(self.optimizer)
        max_norm = self.cfg.clip_norm if self.cfg.clip_norm > 0 else float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm)
        # summed over the ranks, the loss is the same number everywhere: all ranks skip a non-finite step together
        loss = sum_over_ranks(loss_sum, self.ranks) / batch.n_tokens
        loss_value, norm_value = torch.stack([loss, grad_norm.float()]).tolist()  # one wait for the device, not two
        if math.isfinite(loss_value):
            self.scaler.step(self.optimizer)
            self.scaler.update()
        return loss_value, lr, norm_value

    # -- validation ---------------------------------------------------------------------------------------

    @torch.inference_mode()
    def validation_loss(self) -> float:
        self.model.eval()
        total, count = torch.zeros((), device=self.device), 0
        for indices in make_batches(self.val_set, self.cfg.batch_tokens, 0, pad_multiple(self.device)):
            batch = collate(self.val_set, indices, self.device)
            with autocast(self.device, self.precision):
                logits = self.model(batch.src, batch.tgt_in)
            total += smoothed_loss_sum(logits, batch.tgt_out, 0.0, PAD_ID)  # plain NLL: comparable across runs
            count += batch.n_tokens
        return total.item() / max(count, 1)

    def validate(self) -> dict:
        val_loss = self.validation_loss()
        sample = self.data.val[: self.cfg.eval_sentences]
        with autocast(self.device, self.precision):
            hyps = [t.text for t in translate(self.model, self.tokenizer, [s for s, _ in sample], DecodeOptions("greedy"))]
        scores = score(hyps, [r for _, r in sample])
        record = {"step": self.step, "val_loss": val_loss, "val_ppl": math.exp(min(val_loss, 50)),
                  "bleu": scores.bleu, "chrf": scores.chrf, "exact_match": scores.exact_match}
        self.history.evals.append(record)
        self.history.probe.append({"step": self.step, **self.probe_attention()})
        return {**record, "samples": [{"source": s, "reference": r, "hypothesis": h}
                                      for (s, r), h in list(zip(sample, hyps))[:5]]}

    def probe_attention(self) -> dict:
        """Cross-attention of the first validation pair, teacher-forced, to watch alignment form: "cross" is
        [layers, target-input positions, source positions], the mean over heads of every layer."""
        src_ids, tgt_ids = self.val_set[0]  # encoded as training encodes it
        maps = attention_maps(self.model, self.tokenizer, src_ids, [BOS_ID] + tgt_ids)
        return {"cross": maps["cross"].mean(axis=1).round(4).tolist(), "src_tokens": maps["src_tokens"],
                "tgt_tokens": maps["tgt_tokens"]}

    def improved(self, record: dict) -> bool:
        def rank(r: dict) -> tuple[float, float]:
            """Higher is better; ties go to the lower validation loss (BLEU is 0 on one-word targets, for one)."""
            metric = self.cfg.early_stop_metric
            return (-r[metric] if metric == "val_loss" else r[metric], -r["val_loss"])

        better = self.best is None or rank(record) > rank(self.best)
        if better:
            self.best = {k: record[k] for k in ("step", "val_loss", "bleu", "chrf", "exact_match")}
            self.bad_evals = 0
        else:
            self.bad_evals += 1
        return better

    # -- saving -------------------------------------------------------------------------------------------

    def run_facts(self, elapsed: float) -> dict:
        """What both the package's training record (summary) and the "done" event (result) report."""
        return {"steps": self.step, "epochs": self.epochs_done, "params": self.model.num_parameters(),
                "wall_s": elapsed, "device": describe(self.device), "precision": self.precision,
                "world_size": self.ranks.world_size, "best": self.best}

    def summary(self, elapsed: float) -> dict:
        """The training record saved in the package (training.json), history included."""
        return {
            "config": self.cfg.to_dict(),
            "data": {"description": self.data.description, "train_pairs": len(self.data.train),
                     "val_pairs": len(self.data.val), "src_lang": self.data.src_lang, "tgt_lang": self.data.tgt_lang},
            **self.run_facts(elapsed), "tokens_seen": self.tokens_seen,
            "last": self.history.evals[-1] if self.history.evals else None, "history": self.history.as_dict(),
        }

    def save(self, elapsed: float, training: dict | None = None) -> Path:
        """The package, with the state to resume from; the history is in the training record only."""
        tensors, optimizer_meta = optimizer_to_safetensors(self.optimizer)
        state = {"step": self.step, "epoch": self.epoch, "batch_in_epoch": self.batch_in_epoch,
                 "tokens_seen": self.tokens_seen, "elapsed_s": elapsed, "best": self.best, "bad_evals": self.bad_evals,
                 "optimizer": optimizer_meta, "rng_state": self.dropout_rng.get_state().tolist()}
        return save_package(self.out_dir, self.model, self.tokenizer, src_lang=self.data.src_lang,
                            tgt_lang=self.data.tgt_lang, training=training or self.summary(elapsed),
                            resume=(tensors, state))

    def validate_and_save(self, elapsed: float, final: bool) -> Iterator[dict]:
        """Rank 0's part of a validation: the "eval" event, then the package (and a snapshot to average later)."""
        record = self.validate()
        better = self.improved(record)
        yield {"type": "eval", **record, "best": self.best, "improved": better and not final}
        training = self.summary(elapsed)
        path = self.save(elapsed, training)
        if self.snapshots:
            self.snapshots.save(self.step, self.model, self.tokenizer, src_lang=self.data.src_lang,
                                tgt_lang=self.data.tgt_lang, training=training)
        yield {"type": "saved", "path": str(path), "step": self.step}

    def average_snapshots(self) -> dict | None:
        """With average_last, write <out>-avg, the mean of the kept validation snapshots: the "averaged" event."""
        snapshots = self.snapshots.snapshots() if self.snapshots else []
        if not snapshots:
            return None
        path = average_packages(snapshots, self.average_dir)
        return {"type": "averaged", "path": str(path), "steps": [SnapshotStore.step_of(s) for s in snapshots]}

    # -- the loop -----------------------------------------------------------------------------------------

    def run(self) -> Iterator[dict]:
        cfg = self.cfg
        steps_per_epoch = len(self.batches) // self.batches_per_step
        planned, _ = planned_steps(self.cfg, steps_per_epoch)
        start_time = time.perf_counter()
        elapsed = self.elapsed_before
        steps_here, tokens_window, window_start = 0, 0, start_time
        last_good_loss, saved_step, reason = None, None, "finished"
        yield {"type": "start", "params": self.model.num_parameters(), "device": describe(self.device),
               "precision": self.precision, "planned_steps": planned, "steps_per_epoch": steps_per_epoch,
               "train_pairs": len(self.train_set), "val_pairs": len(self.val_set), "step": self.step,
               "vocab_size": self.tokenizer.tgt_vocab_size, "world_size": self.ranks.world_size,
               "accumulate": cfg.accumulate}
        try:
            while True:
                elapsed = self.elapsed_before + time.perf_counter() - start_time
                # rank 0's clock and stop button decide for every rank
                reason = agree(self.budget_reached(planned, elapsed)
                               or ("stopped by the user" if self.stop_requested.is_set() else None), self.ranks)
                if reason:
                    break
                if (self.pause_after_s is not None and steps_here
                        and time.perf_counter() - start_time >= self.pause_after_s):
                    reason = PAUSED
                    return  # the finally saves the state to resume from: no final validation, no "done"
                # the last batches of an epoch that cannot fill a global batch are left out (a different few each epoch)
                if self.batch_in_epoch + self.batches_per_step > len(self.batches):
                    self.epoch, self.batch_in_epoch = self.epoch + 1, 0
                    self.batches = self.epoch_batches(self.epoch)
                batch = self.next_global_batch()
                try:
                    loss, lr, grad_norm = self.train_step(batch, planned)
                except torch.OutOfMemoryError:
                    reason = "out of memory"
                    yield {"type": "error", "step": self.step + 1, "message":
                           f"The {self.device.type} ran out of memory at step {self.step + 1}; the last saved "
                           "package was kept. Lower batch tokens, the maximum length or the model size."}
                    return
                if not math.isfinite(loss):
                    yield {"type": "error", "step": self.step + 1, "message":
                           f"The loss became {loss} at step {self.step + 1}; training stopped and the last good "
                           f"package (step {saved_step if saved_step is not None else 'none yet'}) was kept. "
                           "Lower the learning rate, raise the warmup, or use fp32 precision."}
                    reason = "loss not finite"
                    return
                self.step, self.batch_in_epoch = self.step + 1, self.batch_in_epoch + self.batches_per_step
                self.tokens_seen += batch.n_all_tokens
                tokens_window += batch.n_all_tokens
                steps_here += 1
                last_good_loss = loss
                self.history.steps.append(self.step)
                self.history.loss.append(round(loss, 5))
                self.history.lr.append(lr)
                now = time.perf_counter()
                elapsed = self.elapsed_before + now - start_time
                tokens_per_s = tokens_window / max(now - window_start, 1e-9)
                if now - window_start > 2.0:  # a sliding window keeps tokens/s current
                    tokens_window, window_start = 0, now
                yield {"type": "step", "step": self.step, "epoch": self.epochs_done,
                       "loss": loss, "lr": lr, "grad_norm": grad_norm, "tokens_per_s": tokens_per_s,
                       "elapsed": elapsed, "eta": self.eta(planned, elapsed, steps_here, now - start_time),
                       "planned_steps": planned}
                if self.step % cfg.eval_every == 0:
                    if self.ranks.is_main:  # the other ranks wait for it in the next collective
                        yield from self.validate_and_save(elapsed, final=False)
                    saved_step = self.step
                    if agree(cfg.patience is not None and self.bad_evals >= cfg.patience, self.ranks):
                        reason = f"early stopping: no {cfg.early_stop_metric} improvement in {cfg.patience} validations"
                        break
            if self.step != saved_step and self.step > 0:
                if self.ranks.is_main:
                    yield from self.validate_and_save(elapsed, final=True)
                saved_step = self.step
            averaged = self.average_snapshots()
            if averaged:
                yield averaged
            yield {"type": "done", "reason": reason,
                   "summary": self.result(elapsed, last_good_loss, averaged["path"] if averaged else None)}
        finally:
            # the consumer went away (closed tab, Ctrl-C, cancelled job): keep the work done so far
            if (self.ranks.is_main and reason not in ("loss not finite", "out of memory") and self.step > 0
                    and self.step != saved_step):
                self.save(self.elapsed_before + time.perf_counter() - start_time)

    def result(self, elapsed: float, last_loss: float | None, averaged: str | None = None) -> dict:
        """The "done" event's summary: the run's facts without the history, for the CLI's --json and the UI."""
        return {**self.run_facts(elapsed), "tokens_per_s": self.tokens_seen / max(elapsed, 1e-9),
                "batches_per_step": self.batches_per_step, "train_loss": last_loss,
                "final": self.history.evals[-1] if self.history.evals else {}, "package": str(self.out_dir),
                "averaged": averaged}


def run_training(cfg: TrainConfig, data: TrainData, out_dir: str | Path, resume_from: str | Path | None = None,
                 ranks: Ranks = SINGLE) -> Iterator[dict]:
    """Convenience: build a Trainer and iterate its events; setup errors come out as one "error" event."""
    try:
        trainer = Trainer(cfg, data, out_dir, resume_from, ranks)
    except PlaygroundError as err:
        yield {"type": "error", "message": str(err)}
        return
    yield from trainer.run()
