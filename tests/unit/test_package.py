import json
import os
import shutil
import stat
import zipfile

import pytest
import torch
from safetensors.torch import save_file

from playground.errors import PackageError
from playground.packages.names import check_name, reserve_name
from playground.packages.store import list_packages, load_package, package_info, remove_package, save_package
from playground.packages.sweep import sweep_leftovers
from playground.packages.zips import export_zip, import_zip

SRC = torch.tensor([[5, 6, 7, 3, 0]])
TGT = torch.tensor([[2, 8, 9, 10]])


@pytest.fixture
def saved(tmp_path, model, tokenizer):
    return save_package(tmp_path / "models" / "tiny", model, tokenizer, src_lang="en", tgt_lang="de",
                        training={"steps": 3, "epochs": 0.5, "wall_s": 1.0, "device": "cpu"})


def test_round_trip_gives_identical_outputs_and_keeps_ties(saved, model, tokenizer):
    package = load_package(saved)
    torch.testing.assert_close(package.model(SRC, TGT), model(SRC, TGT), atol=0, rtol=0)
    assert package.model.output.weight is package.model.src_embed.tokens.weight
    assert package.config["src_lang"] == "en" and package.config["tgt_lang"] == "de"
    assert package.tokenizer.encode_src("the cat") == tokenizer.encode_src("the cat")
    assert package.training["steps"] == 3
    assert {"config.json", "model.safetensors", "tokenizer.json", "README.md", "training.json"} <= {
        p.name for p in saved.iterdir()}
    assert "load_package" in (saved / "README.md").read_text()


def test_tied_weights_are_stored_once(saved, model):
    from safetensors import safe_open

    with safe_open(str(saved / "model.safetensors"), "pt") as f:
        keys = set(f.keys())
    tied = {"src_embed.tokens.weight", "tgt_embed.tokens.weight", "output.weight"}
    assert len(keys & tied) == 1
    assert len(keys) < len(model.state_dict())


def test_saving_again_replaces_the_package_atomically(saved, model, tokenizer):
    with torch.no_grad():
        model.output.weight.add_(1.0)
    save_package(saved, model, tokenizer)
    assert torch.equal(load_package(saved).model.output.weight, model.output.weight)
    assert [p.name for p in saved.parent.iterdir()] == ["tiny"]  # no temporary or old folders left


def test_a_crash_mid_save_leaves_the_old_package_loadable(saved, model, tokenizer, monkeypatch):
    import playground.packages.store as package_module

    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(package_module, "model_card", crash)
    with pytest.raises(KeyboardInterrupt):
        save_package(saved, model, tokenizer)
    assert load_package(saved).config["name"] == "tiny"
    assert list_packages(saved.parent) == [saved]


def test_interrupted_swap_is_recovered_by_the_sweep_never_by_a_listing(saved):
    models = saved.parent
    with reserve_name(models, "tiny", exact=True):  # a save in progress, between its two renames
        os.replace(saved, models / ".tiny.old")
        assert list_packages(models) == [] and sweep_leftovers(models) == []
        assert (models / ".tiny.old").is_dir()  # left for the save's second rename
    assert sweep_leftovers(models) == [] and list_packages(models) == [saved]  # a crash: put back


@pytest.mark.parametrize("damage, message", [
    (lambda p: (p / "model.safetensors").unlink(), "missing model.safetensors"),
    (lambda p: (p / "tokenizer.json").unlink(), "missing tokenizer.json"),
    (lambda p: (p / "model.safetensors").write_bytes((p / "model.safetensors").read_bytes()[:500]),
     "corrupt or truncated"),
    (lambda p: (p / "model.safetensors").write_bytes(b"\xff" * 64), "corrupt or truncated"),
    (lambda p: (p / "config.json").write_text("{not json"), "not valid JSON"),
    (lambda p: edit_config(p, format_version=99), "format version 99"),
    (lambda p: edit_config(p, model_changes={"d_model": 64}), "do not fit"),
    (lambda p: edit_config(p, model_changes={"n_layers": 2}), "unknown model settings"),
    (lambda p: save_file({"x": torch.zeros(2)}, str(p / "model.safetensors")), "do not fit"),
    (lambda p: (p / "tokenizer.json").write_text("[]"), "tokenizer"),
])
def test_each_corrupt_package_gives_its_clear_error(saved, damage, message):
    damage(saved)
    with pytest.raises(PackageError, match=message):
        load_package(saved)


def edit_config(folder, format_version=None, model_changes=None):
    config = json.loads((folder / "config.json").read_text())
    if format_version is not None:
        config["format_version"] = format_version
    config["model"].update(model_changes or {})
    (folder / "config.json").write_text(json.dumps(config))


def test_zip_export_import_round_trip(saved, tmp_path, model):
    archive = export_zip(saved, tmp_path)
    imported = import_zip(archive, saved.parent)
    assert imported.name == "tiny-2"  # never overwrites the existing package
    torch.testing.assert_close(load_package(imported).model(SRC, TGT), model(SRC, TGT), atol=0, rtol=0)
    assert package_info(imported)["config"]["name"] == "tiny-2"


def make_zip(path, members):
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            if isinstance(data, zipfile.ZipInfo):
                zf.writestr(data, b"target")
            else:
                zf.writestr(name, data)
    return path


@pytest.mark.parametrize("members, message", [
    ({"../evil/config.json": "{}"}, "unsafe path"),
    ({"/etc/config.json": "{}"}, "unsafe path"),
    ({"pkg/model.pt": "x"}, "pickled"),
    ({"pkg/a/b/config.json": "{}"}, "nested"),
    ({"pkg/config.json": "{}"}, "lacks"),
])
def test_unsafe_or_incomplete_zips_are_refused(tmp_path, members, message):
    models = tmp_path / "models"
    with pytest.raises(PackageError, match=message):
        import_zip(make_zip(tmp_path / "x.zip", members), models)
    assert not any(models.iterdir())
    assert not (tmp_path / "evil").exists()


def test_links_and_zip_bombs_are_refused(tmp_path):
    link = zipfile.ZipInfo("pkg/config.json")
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    with pytest.raises(PackageError, match="link"):
        import_zip(make_zip(tmp_path / "link.zip", {"pkg/config.json": link}), tmp_path / "m")
    bomb = tmp_path / "bomb.zip"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in ("config.json", "tokenizer.json"):
            zf.writestr(f"pkg/{name}", "{}")
        zf.writestr("pkg/model.safetensors", b"\0" * 50_000_000)
    with pytest.raises(PackageError, match="zip bomb"):
        import_zip(bomb, tmp_path / "m")


def test_not_a_zip_and_a_zip_that_does_not_load(tmp_path, saved):
    (tmp_path / "junk.zip").write_bytes(os.urandom(300))
    with pytest.raises(PackageError, match="not a readable zip"):
        import_zip(tmp_path / "junk.zip", tmp_path / "m")
    edit_config(saved, model_changes={"d_ff": 128})
    with pytest.raises(PackageError, match="do not fit"):
        import_zip(export_zip(saved, tmp_path), tmp_path / "m")
    assert list_packages(tmp_path / "m") == []


@pytest.mark.parametrize("name", ["../x", "/abs", ".hidden", "a/b", "", "x" * 65, "a..b"])
def test_names_cannot_escape_models(name):
    with pytest.raises(PackageError, match="Invalid model name"):
        check_name(name)


def test_unique_names_and_delete(saved):
    with reserve_name(saved.parent, "tiny") as taken, reserve_name(saved.parent, "other") as free:
        assert (taken.name, free.name) == ("tiny-2", "other")
    remove_package(saved)
    assert list_packages(saved.parent) == []


def test_a_package_saved_with_the_old_max_len_keys_loads_and_resumes(tmp_path):
    """config.json's model.max_len (positions) and training.json's config.max_len (tokens per sentence) are read as
    max_positions and max_sentence_tokens: the demo package, written back in the old format."""
    from helpers import REPO

    from playground.core.decode import translate
    from playground.packages.format import TRAINING
    from playground.training.checkpoint import resume_config

    old = tmp_path / "old-demo"
    shutil.copytree(REPO / "models" / "demo-en-de", old)
    for name, section, new_key in (("config.json", "model", "max_positions"),
                                   (TRAINING, "config", "max_sentence_tokens")):
        data = json.loads((old / name).read_text(encoding="utf-8"))
        data[section]["max_len"] = data[section].pop(new_key)
        (old / name).write_text(json.dumps(data), encoding="utf-8")
    assert '"max_len"' in (old / "config.json").read_text() and "max_positions" not in (old / "config.json").read_text()

    package, demo = load_package(old), load_package(REPO / "models" / "demo-en-de")
    assert package.model.cfg.max_positions == demo.model.cfg.max_positions == 66
    assert package.training["config"]["max_sentence_tokens"] == 64 and "max_len" not in package.training["config"]
    assert resume_config(old, {"max_steps": 10}).max_sentence_tokens == 64
    sentences = ["a man is riding a bike .", "two dogs play in the snow ."]
    assert [t.best.text for t in translate(package.model, package.tokenizer, sentences)] == \
           [t.best.text for t in translate(demo.model, demo.tokenizer, sentences)]
