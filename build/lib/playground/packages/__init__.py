"""Model packages on disk: config.json + model.safetensors + tokenizer.json, checked at every read."""
