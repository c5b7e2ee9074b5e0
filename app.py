"""Transformer Playground web app: `python app.py` serves it on http://0.0.0.0:7860 (the Hugging Face Space entry
point too). GRADIO_SERVER_PORT picks another port; models are read from and saved to models/."""

from playground.ui.app import build_app, launch

demo = build_app("models")  # Spaces and `gradio app.py` (reload mode) look for a module-level `demo`

if __name__ == "__main__":
    launch(demo)
