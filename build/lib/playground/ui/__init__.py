"""The Gradio web UI: `build_app(models_dir)` in playground.ui.app, one module per tab."""
