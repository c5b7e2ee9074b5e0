"""What the Train tab says about a run: its status line while it trains, pauses and ends, and its sample table."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from playground.serving.zerogpu import CPU_RUN_MAX_PARAMS, GPU_TIME
from playground.training.events import StopReason
from playground.ui.tabs.train_preview import format_duration

SAMPLE_COLUMNS = ["step", "source", "reference", "model output"]


def clock(seconds: float | None) -> str:
    return format_duration(seconds, clock=True)


def bar(fraction: float) -> str:
    """An HTML progress bar (Markdown keeps the <progress> element)."""
    return f'<progress value="{max(0.0, min(fraction, 1.0)):.3f}" max="1"></progress>'


STOPPING = ("⏹ **Stopping…** the run ends after this step, validates once more (quickly: 50 sentences) and saves "
            "the package.")
STOPPING_PENDING = ("⏹ **Stopping…** the run you started has not begun training yet (it waits for its slot or is "
                    "being prepared): it ends as soon as it would begin.")
STOPPED_PENDING = "⏹ **Stopped before it began training**: nothing was trained or saved."


@dataclass
class Progress:
    """The status line of a run in progress: what it is doing, and a share done that only grows."""

    name: str
    cfg: object
    budget_steps: int | None = None  # the steps or epochs budget in steps (planned_steps); not a minutes budget's plan
    done: float = 0.0  # the largest share shown so far

    def share(self, e) -> float:
        """The share of the budget that ends the run first: steps (or epochs) done, or minutes spent. A minutes
        budget's planned steps are re-fitted as the machine's speed changes, so they make no total here."""
        shares = [e.step / self.budget_steps] if self.budget_steps else []
        if self.cfg.max_minutes:
            shares.append(e.elapsed / (self.cfg.max_minutes * 60))
        self.done = max(self.done, min(max(shares, default=0.0), 1.0))
        return self.done

    def line(self, e, last_eval: dict | None, stopping: bool = False, doing: str = "training") -> str:
        """The status for the last Step event `e`; `doing`: "training", "validating" or "saving"."""
        if stopping:
            return f"{STOPPING}  \n(`{self.name}` at step {e.step:,}.)"
        share = self.share(e)
        of = f"/{self.budget_steps:,}" if self.budget_steps else ""
        budget = f" of {clock(self.cfg.max_minutes * 60)}" if self.cfg.max_minutes and not of else ""
        done = f"step **{e.step:,}**{of} · {bar(share)} {share:.0%}{budget}"
        if doing == "validating":
            line = (f"🔎 Validating `{self.name}` at step {e.step:,}: the loss on the validation pairs, then greedy "
                    f"translations for BLEU and chrF… · {done} · elapsed {clock(e.elapsed)}")
        elif doing == "saving":
            line = f"💾 Saving `{self.name}` at step {e.step:,}… · {done} · elapsed {clock(e.elapsed)}"
        else:
            line = "⏳ Training `{}`: ".format(self.name) + " · ".join(
                [done, f"epoch {e.epoch:.2f}", f"loss {e.loss:.3f}", f"lr {e.lr:.2e}",
                 f"{e.tokens_per_s:,.0f} tokens/s", f"elapsed {clock(e.elapsed)}", f"ETA {clock(e.eta)}"])
        if last_eval:
            line += (f"  \nLast validation (step {last_eval['step']:,}): loss {last_eval['val_loss']:.3f}, "
                     f"BLEU {last_eval['bleu']:.1f}, chrF {last_eval['chrf']:.1f}")
        return line


def start_line(name: str, e) -> str:
    """The status for the Start event: what is trained, on what, with which data."""
    return (f"⏳ Training `{name}`: {e.params:,} parameters on {e.device} ({e.precision}), "
            f"{e.train_pairs:,} training / {e.val_pairs:,} validation pairs, "
            f"{e.steps_per_epoch:,} steps per epoch, vocabulary {e.vocab_size:,}.")


def averaged_line(e, name: str) -> str:
    """What the Done line adds after an Averaged event of the run shown as `name` (its averaged package is always
    `<name>-avg`: playground.packages.names.average_name)."""
    from playground.packages.names import average_name

    return (f"  \nThe weights of steps {', '.join(map(str, e.steps))} were averaged into "
            f"**`{average_name(name)}`**.")


def estimate_error(estimated: int | None, did: int, reason: str) -> str:
    """How far the run's steps were from the estimate made before it (only a minutes budget leaves room for one)."""
    if not estimated or reason != StopReason.TIME:
        return ""
    ratio = did / max(estimated, 1)
    why = ("the machine was busier than when it was timed (other work, or other visitors' runs)" if ratio < 0.8 else
           "the machine was faster than when it was timed" if ratio > 1.25 else "close to the estimate")
    return f"  \n⏱ Estimated {estimated:,} steps for the minutes budget, did {did:,}: {why}."


def done_line(name: str, e, estimated: int | None = None) -> str:
    """The status line for the Done event; `estimated`: the steps the Train tab's estimate expected."""
    s = e.summary
    final = s.get("final") or {}
    best = s.get("best") or {}
    metrics = (f"final BLEU {final.get('bleu', 0):.1f}, chrF {final.get('chrf', 0):.1f}, val loss "
               f"{final.get('val_loss', float('nan')):.3f}" if final else "no validation")
    if best:
        metrics += f" (best BLEU {best.get('bleu', 0):.1f} at step {best.get('step', '?')})"
    if final and not final.get("bleu") and (final.get("chrf") or final.get("exact_match")):
        metrics += (" — BLEU counts runs of up to four words and reads 0 on shorter references, so chrF and exact "
                    "match judge this data")
    return (f"✅ **Done** ({e.reason}): {s['steps']:,} steps, {s['epochs']:.2f} epochs in {clock(s['wall_s'])}, "
            f"{s['tokens_per_s']:,.0f} tokens/s on {s['device']}; {metrics}.  \nSaved as **`{name}`**: try it "
            "on the Translate and Attention tabs."
            + estimate_error(estimated or s.get("first_plan"), s["steps"], e.reason))


def samples_frame(e) -> pd.DataFrame:
    """The sample translations of an Eval event."""
    rows = [[e.step, s["source"], s["reference"], s["hypothesis"]] for s in e.samples]
    return pd.DataFrame(rows, columns=SAMPLE_COLUMNS)


def paused_line(name: str, e, cfg) -> str:
    """The status of a run that ZeroGPU gave no more GPU time (an Interrupted event): what happened, what is kept,
    and how it goes on."""
    from playground.training.estimate import count_parameters

    if e.step:
        kept = (f"The package **`{name}`** is kept as of step {e.step:,}. Pick it under **Resume from** and press "
                "**▶ Continue on the GPU** when your GPU time is back: the run goes on to the budget you set")
    else:
        kept = "Nothing of this run was saved yet: start it again when your GPU time is back"
    if count_parameters(cfg) <= CPU_RUN_MAX_PARAMS:
        kept += (", or press **▶ Continue on the CPU** to go on now on this Space's processor (slower; one CPU run "
                 "at a time for the whole Space)" if e.step else "")
    else:
        kept += f" (only models up to {CPU_RUN_MAX_PARAMS / 1e6:g} M parameters may go on on this Space's CPU)"
    return (f"⏸ **Paused**: ZeroGPU gave no GPU time for the next part of this run ({e.message}). {GPU_TIME}. "
            f"{kept}.")
