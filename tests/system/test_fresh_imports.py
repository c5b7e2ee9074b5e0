"""What importing loads, in a fresh interpreter: the web app's dataset list pulls in no generator, and the core
(everything but playground/ui) runs without Gradio, as the layer test (tests/unit/test_layers.py) says it must."""

from __future__ import annotations

import ast
import subprocess
import sys

from helpers import REPO


def loaded_after(imports: str, prefix: str) -> list[str]:
    code = f"import sys, {imports}; print(sorted(m for m in sys.modules if m.startswith({prefix!r})))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    return ast.literal_eval(out.stdout)  # the module names the child printed


def test_the_app_registry_imports_no_generator() -> None:
    assert loaded_after("playground.data.builtin", "playground.datasets.") == ["playground.datasets.catalog",
                                                                              "playground.datasets.split"]


def test_the_core_and_the_command_line_load_no_gradio() -> None:
    core = ("playground.cli.main, playground.training.trainer, playground.training.chunked, "
            "playground.serving.library, playground.serving.zerogpu, playground.insight.inspection, "
            "playground.package, playground.decode")
    assert loaded_after(core, "gradio") == []
