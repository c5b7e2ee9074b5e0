"""Keeps unit tests unit tests: while one is collected or runs (its fixtures included, module-scoped ones too, since
the hooks wrap setup, call and teardown rather than being one fixture among the others), importing Gradio,
gradio_client, spaces or the UI raises ImportError and starting a process raises RuntimeError: such a test belongs in
tests/app/ or tests/system/. The guard itself is tests/unit/unit_guard.py."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from unit_guard import unit_guard

UNIT = Path(__file__).resolve().parent


def in_unit(path) -> bool:
    return UNIT in Path(path).resolve().parents


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    """Importing a unit test module is guarded too: a top-level `import gradio` fails its collection."""
    if isinstance(collector, pytest.Module) and in_unit(collector.path):
        with unit_guard():
            return (yield)
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    with unit_guard() if in_unit(item.path) else contextlib.nullcontext():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    with unit_guard() if in_unit(item.path) else contextlib.nullcontext():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item):
    with unit_guard() if in_unit(item.path) else contextlib.nullcontext():
        return (yield)
