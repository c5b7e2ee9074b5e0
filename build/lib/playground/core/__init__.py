"""The paper: the Transformer (model.py, attention.py, positional.py), its tokenizer, search and metrics."""
