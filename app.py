"""Transformer Playground web app: `python app.py` serves it on http://0.0.0.0:7860 (the Hugging Face Space entry
point too). GRADIO_SERVER_PORT picks another port. Models are read from and saved to models/; a shared app (on a
Space, or PLAYGROUND_SHARED=1) uses /data/models when /data is writable; PLAYGROUND_MODELS_DIR overrides both."""

from playground.runtime.allocator import restart_with_fast_allocator

if __name__ == "__main__":
    # before PyTorch loads: its CPU tensors' memory stays flat (playground/runtime/allocator.py)
    restart_with_fast_allocator()

from playground.runtime.threads import configure_threads  # noqa: E402
from playground.ui.app import build_app, launch  # noqa: E402

configure_threads()  # the container's CPU quota, not the host's core count (playground/runtime/threads.py)
demo = build_app()  # Spaces and `gradio app.py` (reload mode) look for a module-level `demo`

if __name__ == "__main__":
    launch(demo)
