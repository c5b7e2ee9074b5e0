"""The guard of tests/unit/ (unit_guard.py) can fail a test: inside a unit test Gradio, the UI and processes are out of
reach, even where an earlier test imported Gradio; after the guard, everything it hid is back."""

import importlib
import os
import subprocess
import sys

import pytest
from unit_guard import blocked, unit_guard


@pytest.mark.parametrize("name", ["gradio", "gradio_client", "spaces", "playground.ui.app", "playground.ui.state"])
def test_a_unit_test_cannot_import_gradio_or_the_ui(name):
    with pytest.raises(ImportError, match="move it to tests/app/"):
        importlib.import_module(name)
    assert not [n for n in sys.modules if blocked(n)]  # hidden, even if an app test ran first


def test_a_unit_test_cannot_start_a_process():
    with pytest.raises(RuntimeError, match="move it to tests/system/"):
        subprocess.run([sys.executable, "-c", "pass"])
    with pytest.raises(RuntimeError, match="move it to tests/system/"):
        os.fork()


def test_the_guard_gives_back_what_it_hid():
    marker = type(sys)("gradio_client.marker")
    outer = {n: sys.modules.pop(n) for n in [n for n in sys.modules if blocked(n)]}
    sys.modules["gradio_client.marker"] = marker
    try:
        with unit_guard():
            assert "gradio_client.marker" not in sys.modules
        assert sys.modules["gradio_client.marker"] is marker
    finally:
        del sys.modules["gradio_client.marker"]
        sys.modules.update(outer)
