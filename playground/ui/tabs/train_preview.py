"""What the Train tab shows of a configuration before it runs: its preset, its parameter count, its learning rate
over the steps it plans (fitted as the run will fit it), and how long it will take."""

from __future__ import annotations

import math

from playground.insight import plots
from playground.ui.state import Session


def preset_line(name: str) -> str:
    from playground.training.presets import PRESETS

    return f"**{name}**: {PRESETS[name].description}"


def parameter_line(cfg) -> str:
    from playground.training.estimate import count_parameters

    n = count_parameters(cfg)
    vocabulary = "a joint vocabulary" if cfg.joint_vocab else "a vocabulary on each side"
    return (f"**{n:,} parameters** ({n / 1e6:.2f} M) with {vocabulary} of {cfg.vocab_size:,} "
            f"(a tokenizer trained for the run can come out smaller).")


def format_duration(seconds: float | None, clock: bool = False) -> str:
    """A duration for people: "1 min 05 s", or as a running clock shows it ("1:05", "2:01:05") with `clock`."""
    if seconds is None or not math.isfinite(seconds):
        return "?"
    seconds = max(0, round(seconds))
    if clock:
        hours, minutes = divmod(seconds // 60, 60)
        return f"{hours}:{minutes:02d}:{seconds % 60:02d}" if hours else f"{minutes}:{seconds % 60:02d}"
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    if seconds < 3 * 86400:
        return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
    return f"{seconds / 86400:,.0f} days"


def estimate_line(est) -> str:
    """training.estimate's Estimate in words: the duration, the steps and their speed, the budget that limits."""
    steps = f"{est.steps:,} steps" if est.steps else "an unknown number of steps"
    return (f"≈ {format_duration(est.seconds)} on {est.device} ({est.precision}): {steps} at "
            f"≈ {est.seconds_per_step * 1000:,.0f} ms/step ({est.tokens_per_s:,.0f} tokens/s), "
            f"limited by the {est.limited_by} budget")


def too_short_warning(est, max_minutes: float | None) -> str:
    """A warning, with what to change, when the minutes budget holds too few steps to learn anything visible;
    "" otherwise."""
    needed = est.minutes_for_useful_steps(max_minutes)
    if needed is None:
        return ""
    return (f"⚠️ Only about {est.steps or 0:,} steps fit in {max_minutes:g} minutes on this machine now: "
            f"too few to learn much (the samples would stay like \"un un un\"). Raise **Max minutes** to about "
            f"{needed:g}, or train a smaller model (fewer layers, a smaller d_model) or lower **Batch tokens**.")


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


def lr_preview_figure(session: Session, cfg, estimated_steps: int | None = None):
    from playground.training.schedule import learning_rate, schedule_preview

    _, epoch_steps = data_shape(session, cfg.tokenizer, cfg.batch_tokens)
    preview = schedule_preview(cfg, epoch_steps, estimated_steps)
    total, warmup = preview.steps, preview.warmup
    stride = max(1, total // 400)
    steps = list(range(1, total + 1, stride)) + ([total] if (total - 1) % stride else [])
    return plots.lr_figure(steps, [learning_rate(cfg, s, total, warmup) for s in steps],
                           f"Learning rate: {cfg.schedule} over {total:,} steps ({preview.caption})",
                           mark_step=warmup if 0 < warmup < total else None)
