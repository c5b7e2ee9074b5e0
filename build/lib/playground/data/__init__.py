"""Parallel text: reading uploads (every format), statistics and the split, and the batches the model trains on."""
