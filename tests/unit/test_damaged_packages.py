"""Fuzzed packages and zips: whatever the damage, loading and importing raise only PackageError and write nothing
else."""

import tempfile
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from playground.errors import PackageError
from playground.packages.store import load_package, save_package
from playground.packages.zips import export_zip, import_zip


@pytest.fixture(scope="module")
def package_files(tmp_path_factory):
    import torch

    from playground.core.model import Transformer, TransformerConfig
    from playground.core.tokenizer import train_tokenizer

    tokenizer = train_tokenizer([("a b c", "c b a"), ("b c d", "d c b")] * 3, kind="word", vocab_size=20)
    cfg = TransformerConfig(tokenizer.src_vocab_size, tokenizer.tgt_vocab_size, d_model=8, n_heads=2,
                            n_encoder_layers=1, n_decoder_layers=1, d_ff=16, max_positions=12)
    torch.manual_seed(0)
    folder = save_package(tmp_path_factory.mktemp("pkg") / "fuzz", Transformer(cfg), tokenizer)
    return {p.name: p.read_bytes() for p in folder.iterdir()}


FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def mutate(data: bytes, choice: int, position: float, payload: bytes) -> bytes:
    at = int(position * len(data))
    if choice == 0:
        return data[:at]  # truncated
    if choice == 1:
        return data[:at] + payload + data[at + len(payload):]  # overwritten
    return data[:at] + payload + data[at:]  # inserted


@FUZZ
@given(name=st.sampled_from(["model.safetensors", "config.json", "tokenizer.json"]), choice=st.integers(0, 2),
       position=st.floats(0, 1), payload=st.binary(min_size=1, max_size=16))
def test_damaged_packages_raise_only_package_error(tmp_path, package_files, name, choice, position, payload):
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    for file, data in package_files.items():
        (folder / file).write_bytes(mutate(data, choice, position, payload) if file == name else data)
    try:
        load_package(folder)
    except PackageError:
        pass


@FUZZ
@given(choice=st.integers(0, 2), position=st.floats(0, 1), payload=st.binary(min_size=1, max_size=32))
def test_damaged_zips_raise_only_package_error_and_write_nothing_else(tmp_path, package_files, choice, position,
                                                                      payload):
    source = Path(tempfile.mkdtemp(dir=tmp_path)) / "fuzz"
    source.mkdir()
    for file, data in package_files.items():
        (source / file).write_bytes(data)
    archive = mutate(export_zip(source, source.parent).read_bytes(), choice, position, payload)
    zip_path = source.parent / "damaged.zip"
    zip_path.write_bytes(archive)
    models = source.parent / "models"
    try:
        imported = import_zip(zip_path, models)
        load_package(imported)  # anything imported must load
    except PackageError:
        assert [p for p in models.iterdir()] == []  # a refused zip leaves nothing behind


@FUZZ
@given(data=st.binary(max_size=2048))
def test_random_bytes_as_a_zip_raise_only_package_error(tmp_path, data):
    path = Path(tempfile.mkdtemp(dir=tmp_path)) / "random.zip"
    path.write_bytes(data)
    with pytest.raises(PackageError):
        import_zip(path, path.parent / "models")


def test_zip_member_lying_about_its_size_is_refused(tmp_path, package_files):
    source = tmp_path / "src"
    source.mkdir()
    for file, data in package_files.items():
        (source / file).write_bytes(data)
    archive = export_zip(source, tmp_path)
    with zipfile.ZipFile(archive) as zf:  # shrink the declared size of the weights in the central directory
        infos = zf.infolist()
    raw = bytearray(archive.read_bytes())
    weights = next(i for i in infos if i.filename.endswith("model.safetensors"))
    declared = weights.file_size.to_bytes(4, "little")
    smaller = (weights.file_size // 2).to_bytes(4, "little")
    raw = raw.replace(declared, smaller)
    archive.write_bytes(bytes(raw))
    with pytest.raises(PackageError):
        import_zip(archive, tmp_path / "models")
