"""One training run: its settings, the schedule (§5.3), the loss (§5.4), the loop, evaluation and checkpoints."""
