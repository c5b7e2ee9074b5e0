"""Fixtures of the system tests: the app served for the browser tests (test_browser.py, test_browser_newcomer.py)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from helpers import DEMO, launched


def copy_demo(dest: Path) -> None:
    """Copy the shipped demo package (not its resume state). A training run may be re-saving it right now (an atomic
    folder swap), so a copy that catches the swap half-way is retried."""
    if not (DEMO / "config.json").is_file():
        pytest.fail(f"the shipped demo model {DEMO} is missing")
    for _ in range(10):
        shutil.rmtree(dest, ignore_errors=True)
        try:
            shutil.copytree(DEMO, dest, ignore=shutil.ignore_patterns("resume.*", ".*"))
        except (FileNotFoundError, shutil.Error):
            time.sleep(0.5)
            continue
        if all((dest / f).is_file() for f in ("config.json", "model.safetensors", "tokenizer.json")):
            return
        time.sleep(0.5)
    pytest.fail(f"could not copy {DEMO}")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The app served in-process on a free loopback port, on a temporary models/ holding a copy of the demo."""
    import torch

    from playground.ui.app import build_app, launch_options

    models_dir = tmp_path_factory.mktemp("browser-models")
    copy_demo(models_dir / "demo-en-de")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models; a second OpenMP thread only fights the browser for the two cores
    with launched(build_app(models_dir), **launch_options()) as url:
        yield url, models_dir
    torch.set_num_threads(threads)
