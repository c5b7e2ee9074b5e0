"""What the tabs' wiring shares: module-level handlers bound to the app's Library for an event listener."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any


def bound(fn: Callable, *values: Any) -> Callable:
    """fn with its first parameters fixed to `values` (the app's Library, …), as functools.partial does, but with
    its name, docstring, annotations and the signature of the parameters left: Gradio reads them for the API page
    (parameter names, defaults, description) and for its injected parameters (gr.SelectData, gr.OAuthToken)."""
    signature = inspect.signature(fn)
    fixed = list(signature.parameters)[:len(values)]

    @functools.wraps(fn)
    def handler(*args, **kwargs):
        return fn(*values, *args, **kwargs)

    handler.__signature__ = signature.replace(parameters=list(signature.parameters.values())[len(values):])
    handler.__annotations__ = {k: v for k, v in fn.__annotations__.items() if k not in fixed}
    return handler

