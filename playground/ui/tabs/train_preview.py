"""What the Train tab shows of a configuration before it runs: its preset, its parameter count, and its learning rate
over the steps it plans (fitted as the run will fit it)."""

from __future__ import annotations

from playground.insight import plots
from playground.ui.state import Session


def preset_line(name: str) -> str:
    from playground.training.presets import PRESETS

    return f"**{name}**: {PRESETS[name].description}"


def parameter_line(cfg) -> str:
    from playground.training.estimate import count_parameters

    n = count_parameters(cfg)
    return (f"**{n:,} parameters** ({n / 1e6:.2f} M) with a joint vocabulary of {cfg.vocab_size:,} "
            f"(the trained tokenizer's vocabulary can come out smaller).")


def data_shape(session: Session, tokenizer: str, batch_tokens: int) -> tuple[int | None, int | None]:
    """(mean tokens per sentence, batches per epoch) of the session's data, roughly; (None, None) without data."""
    from playground.training.estimate import data_tokens, steps_per_epoch

    if not session.pairs:
        return None, None
    stats = session.stats()
    src = data_tokens(stats.src.tokens, stats.src.chars, tokenizer)
    tgt = data_tokens(stats.tgt.tokens, stats.tgt.chars, tokenizer)
    mean = max(2, round((src + tgt) / (2 * max(stats.num_pairs, 1))) + 1)
    return mean, steps_per_epoch(src, tgt, stats.num_pairs, batch_tokens)


FITS_IN_MINUTES = "what fits in the minutes"  # the estimate's steps: the run fits its warmup to them too


def preview_steps(cfg, epoch_steps: int | None, estimated: int | None = None) -> tuple[int, str]:
    """Steps for the LR preview and where the number comes from: the steps budget, epochs x batches per epoch,
    the steps the estimate expects to fit in the minutes budget, or else a few warmups' worth."""
    from playground.training.schedule import planned_steps

    planned, limited_by = planned_steps(cfg, epoch_steps)
    if planned:
        return planned, f"{limited_by} budget"
    if cfg.max_minutes and estimated:
        return estimated, FITS_IN_MINUTES
    return max(10 * cfg.warmup_steps, 1000), "no step budget: the first steps"


def lr_preview_figure(session: Session, cfg, estimated_steps: int | None = None):
    from playground.training.schedule import fit_warmup, learning_rate

    _, epoch_steps = data_shape(session, cfg.tokenizer, cfg.batch_tokens)
    total, source = preview_steps(cfg, epoch_steps, estimated_steps)
    total = max(int(total), 2)
    # the minutes budget binds: the run fits its warmup to the steps it gets (Trainer.replan), so does the preview
    warmup = fit_warmup(cfg, total) if source == FITS_IN_MINUTES else cfg.warmup_steps
    stride = max(1, total // 400)
    steps = list(range(1, total + 1, stride)) + ([total] if (total - 1) % stride else [])
    return plots.lr_figure(steps, [learning_rate(cfg, s, total, warmup) for s in steps],
                           f"Learning rate: {cfg.schedule} over {total:,} steps ({source})",
                           mark_step=warmup if 0 < warmup < total else None)
