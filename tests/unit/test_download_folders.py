"""Download folders (playground.packages.sweep.export_dir; the app's are in Gradio's cache, which serves them): one per
key, emptied by the next download of that key, and named so that nobody can work the name out from the key, which can
be public (a signed-in visitor's is hf:NAME)."""

from __future__ import annotations

import hashlib
import secrets

from playground.packages.sweep import export_dir

KEY = ("hf:alice", "demo-en-de", "package")


def test_the_same_key_gets_its_folder_again_emptied(tmp_path):
    first = export_dir(*KEY, root=tmp_path)
    (first / "demo-en-de.zip").write_bytes(b"zip")
    again = export_dir(*KEY, root=tmp_path)
    assert again == first and not any(again.iterdir())
    assert export_dir("hf:alice", "demo-en-de", "package with state", root=tmp_path) != first


def test_a_folder_name_cannot_be_worked_out_from_its_key(tmp_path, monkeypatch):
    from playground.packages import sweep

    name = export_dir(*KEY, root=tmp_path).name
    assert hashlib.sha256("\0".join(KEY).encode()).hexdigest()[:16] not in name  # the names before were these
    monkeypatch.setattr(sweep, "FOLDER_SECRET", secrets.token_bytes(32))  # another process's secret
    assert export_dir(*KEY, root=tmp_path).name != name
