"""Export a package to other runtimes: 🤗 transformers (export.transformers) and CTranslate2 (export.ctranslate2).

Those libraries are optional (requirements-export.txt): each exporter imports them only when it runs, through
`playground.export.optional.require`, so the rest of the playground works without them."""

from __future__ import annotations

from pathlib import Path

from playground.errors import PlaygroundError
from playground.export.optional import FORMATS


def export_package(package_folder: str, fmt: str, out: str, quantization: str = "float32") -> Path:
    """Write the package in `fmt` (one of FORMATS) to the folder `out`."""
    if fmt == "transformers":
        from playground.export.transformers import export_transformers

        return export_transformers(package_folder, out)
    if fmt == "ctranslate2":
        from playground.export.ctranslate2 import export_ctranslate2

        return export_ctranslate2(package_folder, out, quantization)
    raise PlaygroundError(f"Unknown export format {fmt!r}: choose one of {', '.join(FORMATS)}.")
