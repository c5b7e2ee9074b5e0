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
