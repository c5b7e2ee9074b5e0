"""The UI's longer texts: the page's introduction and glossary, and help lines that would hide a tab's layout."""

from __future__ import annotations

INTRO = """# Transformer Playground
Train a small encoder–decoder Transformer ("Attention Is All You Need") on parallel text, watch it learn, translate
with greedy, sampling or beam search, and look inside its attention. **Data** → **Train** → **Translate** /
**Attention**; your packages are listed on **Models**; **Inside** draws the figures of the articles this playground
follows from your model. A demo model (English → German) is ready on **Translate**."""

GLOSSARY = """**The articles** this playground follows: *Grokking Transformers*; *An Introduction to Transformers*; a
post building on *The Annotated Transformer*; *Transformer Networks* (Bits&Brains); *Demystifying Transformer!* — all
explaining Vaswani et al., *Attention Is All You Need* (2017).

- **d_model**: the width of the vector every token is carried as through the model (the paper: 512); the embeddings,
  every attention and feed-forward sublayer read and write vectors of this size.
- **d_ff**: the hidden width of each position-wise feed-forward network, between its two linear maps (the paper:
  2048, four times d_model).
- **Adam β₁, β₂, ε**: Adam keeps a running mean of the gradients (β₁, the paper 0.9: how much of the past it keeps)
  and of their squares (β₂, 0.98); ε (10⁻⁹) is added to the square root of the latter so a tiny one does not divide
  by almost nothing.
- **BPE-dropout**: while training, each merge of the byte-pair tokenizer is skipped with this chance, so a word is
  split differently from epoch to epoch; the model learns its pieces, not one segmentation (Provilkov et al., 2020).
- **Principal components** (the embedding map): the directions along which the token vectors differ most; the map
  draws each token at its coordinates on the first two, so tokens the model treats alike land close together.
- **Post-LN / Pre-LN**: where LayerNorm sits in each layer. Post-LN (the paper) normalises after adding a sublayer's
  output to its input; Pre-LN normalises the input of each sublayer, which trains more steadily at high learning rates.
- **Noam**: the paper's learning-rate schedule (after Noam Shazeer): a linear warmup, then a decay with 1/√step.
- **Warmup**: the first steps, in which the learning rate climbs from 0 to its peak.
- **EMA**: exponential moving average, the smoothed loss curve (each point 0.9 × the previous one + 0.1 × the new loss).
- **Joint vocabulary**: one tokenizer and one embedding table shared by the source and the target language.
- **Teacher-forced**: the decoder is fed a given target (the reference, or yours) as its previous tokens instead of
  its own guesses; training works this way, and so do the next-token and "my target" attention views.
- **Greedy / sampling / beam search**: pick the likeliest next token; draw it at random (temperature, top-k, top-p);
  or keep the best few partial translations (the beam) at every step.
- **n-best**: the best n finished translations of a beam search, listed best first.
- **Length penalty α**: a beam's score is log p / length^α; without it (α = 0) short outputs win, α = 1 scores the
  mean log-probability per token.
- **BLEU / chrF**: how close the translations of validation sentences are to their references, 0–100: BLEU counts
  matching word n-grams (1 to 4 words), chrF matching character n-grams, which is kinder to small models. BLEU
  reads 0 on references shorter than four words (single words, numbers): the early-stopping metric "auto" then
  picks chrF.
- **bf16 / fp16 / fp32**: number formats; 16-bit ones halve memory and are fast on recent GPUs, but on a CPU bf16 is
  often slower than fp32 (precision "auto" measures it). **"(bf16)" after a CPU** means "auto" measured bf16 matrix
  products faster than fp32 on this CPU (it has bf16 units) and trains in it; the weights are still kept in fp32.
- **Validation loss (val_loss)**, **NLL per token**: how surprised the model is by the reference translations of the
  held-out validation pairs: the negative log-likelihood of each reference token, averaged (without label smoothing,
  so runs with different smoothing compare). Lower is better; 0 would be certain and right. **Perplexity (val_ppl)**
  is e^loss: the number of equally likely tokens the model is choosing between, on average.
- **Training loss (label-smoothed)**: the same on the training batches, with label smoothing, so it stays above the
  validation loss of an equally good model.
- **Exact match (exact_match)**: the share of validation sentences whose greedy translation equals the reference.
- **Final / best validation**: the final one is the last validation of a run, the one its saved weights are from
  (the Models table and the Compare scores show it); the best one is the validation with the best early-stopping
  metric (the model card shows both).
- **▁** (in token views): the tokenizer's mark for a token that starts a word: "▁Heute" is "Heute" after a space,
  "udent." continues the word before it ("▁St" + "udent." = "Student.").
- **Settings in Compare**: each is named in words with its config key in brackets (the CLI flag spells it with
  dashes: lr → `--lr`). A resumed run's budgets count the whole run: "max minutes" is the minutes done before the
  resume plus the minutes added.
- **Phase line while training**: ⏳ training, 🔎 validating (the loss, then greedy translations for BLEU and chrF),
  💾 saving the package; the percentage is of the budget that ends the run first.
"""


# ----------------------------------------------------------------------------------------------------------
# Data tab

DATA_INTRO = ("Pick a built-in dataset or upload your own parallel text, then check it below. "
              "The data stays in this browser session only.")
UPLOAD_HELP = ("One **TSV/CSV** (source, target columns; a header like `en<TAB>de` names the languages) or "
               "**JSON Lines** (`{\"src\": …, \"tgt\": …}`) file, or **two aligned text files** with one "
               "sentence per line — select both at once, source first. A **TMX** translation memory or a **Parquet** "
               "file (Hugging Face's `translation` column, or two text columns) works too; for a file with "
               "more than two languages, type the pair below first. gzip is fine. Uploading the second "
               "file after the first adds it: the box keeps both.")


# ----------------------------------------------------------------------------------------------------------
# Train tab

TRAIN_START = "Load data on the Data tab, choose a preset, then press **Start training**."


def train_ready(description: str) -> str:
    """The status line before a run once data is loaded (it starts as TRAIN_START says)."""
    return f"Your data: **{description}**. Choose a preset, then press **Start training**."


BEFORE_RUN = (TRAIN_START, train_ready("")[:10])  # how the status lines before any run start
TRAIN_CHARTS = ("<small>The loss chart's smooth line is an **EMA** (exponential moving average: each point is 0.9 × "
                "the one before + 0.1 × the new loss). **BLEU** and **chrF** score the greedy translations of "
                "validation sentences against their references: matching word n-grams and character n-grams, "
                "0–100, higher is better.</small>")


def continue_note(cpu_max_params: int) -> str:
    """Beside ZeroGPU's Continue buttons: which run they continue, and what the CPU takes."""
    return (f"<small>A run paused when your GPU time ran out goes on to the budget it was started with "
            f"(pick it under **Resume from**). On the CPU: models up to {cpu_max_params / 1e6:g} M "
            "parameters, one CPU run at a time for the whole Space.</small>")


def waiting_line(slots: int, run_minutes: float | None) -> str:
    """The status while a run waits for a training slot (`slots` at once; `run_minutes`: the cap on a run)."""
    waiting = ("⏳ Waiting for the training slot: one run trains at a time on this machine, so if another session "
               "is training, yours starts as soon as it finishes (the queue position shows here)." if slots == 1 else
               f"⏳ Waiting for a training slot: {slots} runs train at once on this Space, each on a GPU ZeroGPU lends "
               "for each part of the run (the queue position shows here).")
    if run_minutes:  # a bound on the wait: every run ahead ends within the cap
        waiting += (f" Runs last at most {run_minutes:g} minutes each: with n runs ahead of yours, "
                    f"yours starts within n × {run_minutes:g} minutes.")
    return waiting
