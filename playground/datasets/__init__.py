"""Built-in datasets the playground can train on without downloading anything, made by code in this package."""
