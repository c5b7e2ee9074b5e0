"""The core of a shared app (playground/serving/library.py): who sees which package, quotas, and the order
eviction frees space in; the shipped packages read-only in both modes; no visitor identity inside an exported zip."""

from __future__ import annotations

import os
import time
import zipfile
from pathlib import Path

import pytest
from helpers import ALICE, BOB

from playground.errors import PackageError, TrainingError
from playground.packages.names import SHIPPED_MODELS_DIR, is_shipped, snapshots_folder
from playground.packages.store import save_package
from playground.packages.zips import export_zip
from playground.serving.library import Library
from playground.serving.mode import models_location, shared_mode
from playground.serving.quotas import Quotas
from playground.serving.visitors import PERSONAL, Visitor
from playground.settings import MB

CAROL = Visitor.signed("carol")
DEMO = "demo-en-de"


def make(library: Library, tiny, name: str, visitor: Visitor) -> Path:
    folder = library.add(name, visitor, 10_000)
    return save_package(folder, *tiny)


def shared(tmp_path, **quotas) -> Library:
    return Library(tmp_path / "models", shared=True, quotas=Quotas(**quotas))


def own_name(library: Library, visitor: Visitor, label: str) -> str:
    """The package name a visitor's `label` gets in a shared library: their code, a dash, the label."""
    return f"{library.name_tag(visitor)}-{label}"


def test_each_visitor_sees_their_own_and_the_shipped_ones(tmp_path, tiny):
    library = shared(tmp_path)
    mine = make(library, tiny, "mine", ALICE).name
    bobs = make(library, tiny, "mine", BOB).name  # the same name: each visitor's own package
    assert bobs == own_name(library, BOB, "mine") != mine == own_name(library, ALICE, "mine")
    assert set(library.names(ALICE)) == {mine, DEMO} and set(library.names(BOB)) == {bobs, DEMO}
    with pytest.raises(PackageError) as theirs:
        library.folder(mine, BOB)
    with pytest.raises(PackageError) as ghost:
        library.folder("ghost", BOB)
    assert str(theirs.value).replace(f"'{mine}'", "'ghost'") == str(ghost.value)  # the same message as a missing one
    with pytest.raises(PackageError, match=f"no model package named '{mine}'"):
        library.delete(mine, BOB)
    assert (library.models_dir / mine).is_dir()
    owner = Visitor("hf:someone", signed_in=True, admin=True)  # the Space's owner sees and deletes everything
    assert {mine, bobs} <= set(library.names(owner))
    library.delete(bobs, owner)
    assert not (library.models_dir / bobs).exists()
    assert Library(tmp_path / "personal").add(DEMO, PERSONAL, 0).name == f"{DEMO}-2"  # one person: counted


def test_a_name_another_visitor_holds_answers_as_if_they_never_existed(tmp_path, tiny):
    """Issue 34: Bob asking for Alice's name gets what a library without Alice gives him (the same server secret:
    the same Space), so the answer tells him nothing; only his own names make a -2."""
    library = shared(tmp_path)
    alices = make(library, tiny, "alice-enfr", ALICE).name
    bobs = make(library, tiny, "alice-enfr", BOB).name
    (tmp_path / "fresh").mkdir()
    (tmp_path / "fresh" / ".browser-secret").write_bytes((library.models_dir / ".browser-secret").read_bytes())
    fresh = Library(tmp_path / "fresh", shared=True, quotas=Quotas())
    assert bobs == make(fresh, tiny, "alice-enfr", BOB).name != alices
    assert make(library, tiny, "alice-enfr", BOB).name == f"{bobs}-2"  # his own name taken: counted
    assert library.label(bobs, BOB) == "alice-enfr" and library.label(alices, BOB) == alices
    for name in (alices, "alice-enfr"):
        with pytest.raises(PackageError, match=f"no model package named '{name}'"):
            library.folder(name, BOB)
    assert library.folder(alices, ALICE) == library.models_dir / alices
    # a zip of his own package, imported again, keeps one code
    assert library.add(bobs, BOB, 0).name == f"{bobs}-3"
    personal = Library(tmp_path / "personal")
    assert make(personal, tiny, "alice-enfr", PERSONAL).name == "alice-enfr"  # one person: the name as typed


def test_the_shipped_models_are_read_only_in_both_modes(tmp_path):
    assert is_shipped(SHIPPED_MODELS_DIR / DEMO) and not is_shipped(tmp_path / DEMO)
    for library in (shared(tmp_path / "s"), Library(tmp_path / "p", shared=False)):
        for visitor in (ALICE, PERSONAL, Visitor("hf:owner", True, admin=True)):
            assert library.folder(DEMO, visitor) == SHIPPED_MODELS_DIR / DEMO
            with pytest.raises(PackageError, match="ships with the app and is read-only"):
                library.delete(DEMO, visitor)
            with pytest.raises(PackageError, match="read-only"):
                library.writable(DEMO, visitor)
    assert (SHIPPED_MODELS_DIR / DEMO / "config.json").is_file()
    # a new package never takes a shipped name
    library = shared(tmp_path / "s")
    assert library.add(DEMO, ALICE, 0).name == own_name(library, ALICE, DEMO)


def test_quotas_refuse_with_a_message_that_says_what_to_delete(tmp_path, tiny):
    library = shared(tmp_path, models_per_visitor=3, bytes_per_visitor=50 * MB)
    m0, m1, m2 = (make(library, tiny, f"m{n}", ALICE).name for n in range(3))
    with pytest.raises(PackageError,
                       match=rf"You have 3 models.*delete one on the Models tab first \(yours: {m0}, {m1}, {m2}\)"):
        library.add("m3", ALICE, 0)
    make(library, tiny, "other", BOB)  # Bob has his own quota
    library.delete(m1, ALICE)
    make(library, tiny, "m3", ALICE)
    with pytest.raises(PackageError, match="at most 50 MB per visitor"):
        library.add("huge", BOB, 60 * MB)
    personal = Library(tmp_path / "personal", shared=False, quotas=Quotas(models_per_visitor=1))
    for n in range(3):  # one person on their own machine: no quota
        make(personal, tiny, f"p{n}", PERSONAL)


def test_eviction_frees_the_least_recently_used_old_anonymous_models_first(tmp_path, tiny):
    library = shared(tmp_path, bytes_total=10 * MB, evict_after_s=24 * 3600)
    day = 24 * 3600
    now = time.time()
    ages = {"alice-old": (ALICE, 3 * day), "bob-older": (BOB, 5 * day), "alice-new": (ALICE, 3600),
            "carol-oldest": (CAROL, 9 * day), "bob-running": (BOB, 8 * day)}
    named = {label: make(library, tiny, label, visitor).name for label, (visitor, _) in ages.items()}
    registry = library.owners.read()
    for label, (_, age) in ages.items():
        registry[named[label]]["used"] = now - age
    library.owners.write(registry)
    library.running["bob-key"] = named["bob-running"]
    size = library.keeper.total_bytes() // 5
    # room for one more package beyond the limit: the least recently used anonymous model older than a day goes
    library.keeper.quotas = Quotas(bytes_total=5 * size + size // 2)
    registry = library.owners.read()
    assert library.keeper.make_room(size, registry) == [named["bob-older"]]
    # a tighter limit: then the next in line; never a signed-in visitor's, a model in training or a recent one
    library.keeper.quotas = Quotas(bytes_total=4 * size + size // 2)
    assert library.keeper.make_room(size, registry) == [named["alice-old"]]
    with pytest.raises(PackageError, match="models folder of this Space is full"):
        library.keeper.make_room(10 * size, registry)
    assert {p.name for p in library.all_packages()} >= {named[n] for n in ("carol-oldest", "bob-running", "alice-new")}


def test_one_run_per_visitor_and_the_run_length_cap(tmp_path):
    library = shared(tmp_path, run_minutes=10)
    with library.run_slot(ALICE, "first"):
        with pytest.raises(TrainingError, match=r"You already have a run training \(first\)"):
            with library.run_slot(ALICE, "second"):
                pass
        with library.run_slot(BOB, "his"):  # another visitor's run is not held up by Alice's
            pass
    with library.run_slot(ALICE, "second"):
        pass
    assert library.run_minutes(None) == 10 and library.run_minutes(30) == 10 and library.run_minutes(5) == 5
    assert library.run_minutes(None, already=4) == 14  # a resumed run: the cap counts from where it is
    assert Library(tmp_path / "p", shared=False).run_minutes(None) is None  # personal: no cap by default


def test_signing_in_keeps_the_browsers_models_and_zips_carry_no_owner(tmp_path, tiny):
    library = shared(tmp_path)
    folder = make(library, tiny, "before-sign-in", ALICE)
    library.adopt(ALICE, CAROL)
    assert folder.name in library.names(CAROL) and folder.name not in library.names(ALICE)
    assert library.owners.read()[folder.name]["signed_in"] is True
    with zipfile.ZipFile(export_zip(folder, tmp_path)) as zf:
        text = b"".join(zf.read(n) for n in zf.namelist())
    assert b"a" * 32 not in text and b"carol" not in text and not any("owner" in n for n in zf.namelist())


def test_a_run_never_averages_into_another_visitors_package(tmp_path, tiny):
    """Alice holds victim-avg; Bob's run "victim" with averaging must neither overwrite nor take it."""
    library = shared(tmp_path)
    victim = make(library, tiny, "victim-avg", ALICE).name
    run = library.add("victim", BOB, 0, average=True)
    assert run.name == own_name(library, BOB, "victim") and library.owners.read()[f"{run.name}-avg"]["owner"] == BOB.key
    assert library.owners.read()[victim]["owner"] == ALICE.key
    # names that meet only when a visitor's code is another's (about once in 16 million pairs): stood in for by
    # registering one by hand
    theirs = make(library, tiny, "theirs", ALICE)
    registry = library.owners.read()
    library.register([f"{theirs.name}-avg"], BOB, registry)  # Bob holds the name beside Alice's package
    with pytest.raises(PackageError, match=f"{theirs.name}-avg, a name that is taken"):  # Alice resumes averaging
        library.add_average(theirs, ALICE, 0)
    assert library.owners.read()[f"{theirs.name}-avg"]["owner"] == BOB.key
    own = library.add_average(run, BOB, 0)  # his own -avg: replaced by his resume
    assert own.name == f"{run.name}-avg"
    with library.writing(run, own):  # the run failed before it saved anything: both names are let go
        pass
    assert run.name not in library.owners.read() and own.name not in library.owners.read()


def test_pending_reservations_count_toward_the_model_quota(tmp_path):
    """Parallel imports: each reserved a name, none has written its folder yet; the quota still counts them."""
    library = shared(tmp_path, models_per_visitor=3)
    reserved = [library.add("upload", ALICE, 0) for _ in range(3)]
    with pytest.raises(PackageError, match="You have 3 models"):
        library.add("upload", ALICE, 0)
    library.forget(reserved[0].name)  # one import failed: its reservation is freed
    library.add("upload", ALICE, 0)


def test_snapshots_count_toward_the_quotas_and_go_with_their_package(tmp_path, tiny):
    library = shared(tmp_path, bytes_per_visitor=1 * MB)
    folder = make(library, tiny, "run", ALICE)
    snapshots = snapshots_folder(folder) / "step-00000010"
    snapshots.mkdir(parents=True)
    (snapshots / "model.safetensors").write_bytes(b"\0" * MB)
    assert library.keeper.usage(ALICE, library.owners.read())[1] > MB and library.keeper.total_bytes() > MB
    with pytest.raises(PackageError, match="at most 1 MB per visitor"):
        library.add("more", ALICE, 0)
    library.delete(folder.name, ALICE)
    assert not snapshots_folder(folder).exists()


def test_average_last_is_capped():
    from playground.packages.settings import MAX_AVERAGE_LAST
    from playground.training.config import TrainConfig

    with pytest.raises(TrainingError, match=f"must be from 0 to {MAX_AVERAGE_LAST}, not 1,000"):
        TrainConfig(max_steps=1, average_last=1000)


def test_mode_and_models_folder_from_the_environment(monkeypatch, tmp_path):
    for var in ("SPACE_ID", "PLAYGROUND_SHARED", "PLAYGROUND_MODELS_DIR"):
        monkeypatch.delenv(var, raising=False)
    assert not shared_mode()
    monkeypatch.setenv("SPACE_ID", "someone/playground")
    assert shared_mode()
    monkeypatch.setenv("PLAYGROUND_SHARED", "0")
    assert not shared_mode()
    monkeypatch.setenv("PLAYGROUND_SHARED", "1")
    data_writable = Path("/data").is_dir() and os.access("/data", os.W_OK)
    assert models_location(True) == ((Path("/data/models"), True) if data_writable else (Path("models"), False))
    assert models_location(False) == (Path("models"), True)
    monkeypatch.setenv("PLAYGROUND_MODELS_DIR", str(tmp_path))
    assert models_location(True) == (tmp_path, True) and models_location(False) == (tmp_path, True)
    monkeypatch.setenv("PLAYGROUND_MAX_MODELS", "7")
    monkeypatch.setenv("PLAYGROUND_MAX_RUN_MINUTES", "2.5")
    quotas = Quotas.from_env(shared=True)
    assert quotas.models_per_visitor == 7 and quotas.run_minutes == 2.5 and quotas.bytes_per_visitor == 1500 * MB


# ----------------------------------------------------------------------------------------------------------
# Issue 25: a visitor is a person, not a session


def test_visitor_tokens_are_issued_and_signed_by_the_server(tmp_path):
    from playground.serving.visitors import issue_token, server_secret, verify_token

    secret = server_secret(tmp_path)
    assert server_secret(tmp_path) == secret and (tmp_path / ".browser-secret").stat().st_mode & 0o077 == 0
    token = issue_token(secret)
    visitor = Visitor.browser(token, secret, "10.0.0.1")
    assert visitor.key == f"anon:{verify_token(token, secret)}" and visitor.address == "10.0.0.1"
    visitor_id, signature = token.split(".")
    # a self-chosen token, another visitor's id with a made-up signature, another server's token: nobody
    for forged in ("a" * 32, f"{visitor_id}.{'A' * 22}", f"{'b' * 24}.{signature}", issue_token(b"another secret" * 3),
                   token + "x", None, 12):
        assert Visitor.browser(forged, secret) is None, forged


def test_anonymous_visitors_are_bounded_per_address_and_signed_in_ones_are_not(tmp_path, tiny):
    library = shared(tmp_path, models_per_visitor=5, models_per_address=3)
    classroom = [Visitor(f"anon:pupil{i}", address="192.0.2.7") for i in range(4)]
    for pupil in classroom[:3]:
        make(library, tiny, "m", pupil)
    with pytest.raises(PackageError, match=r"visitors from your network hold 3 models .* sign in with Hugging Face"):
        make(library, tiny, "m", classroom[3])  # a fresh token does not buy more room
    make(library, tiny, "m", Visitor("anon:elsewhere", address="198.51.100.1"))
    make(library, tiny, "m", Visitor("hf:teacher", signed_in=True))  # same network, signed in: counts as their own
    library.adopt(classroom[0], Visitor("hf:pupil0", signed_in=True))  # signing in takes the model out of the pool
    make(library, tiny, "m", classroom[3])


def test_a_full_folder_frees_the_heaviest_anonymous_holder_first_and_never_a_signed_in_one(tmp_path, tiny):
    library = shared(tmp_path, models_per_visitor=10, bytes_total=10 * MB)
    crowd = [Visitor(f"anon:bot{i}", address="203.0.113.9") for i in range(4)]  # one address, many tokens
    bots = [make(library, tiny, f"bot{i}", bot).name for i, bot in enumerate(crowd)]
    light = make(library, tiny, "light", Visitor("anon:light", address="198.51.100.2")).name
    carols = make(library, tiny, "carols", CAROL).name
    size = library.keeper.total_bytes() // 6
    library.keeper.quotas = Quotas(models_per_visitor=10, bytes_total=6 * size + size // 2)
    # fresh models, none old enough to free: an address that holds nothing takes nobody's place (fresh addresses
    # are cheap), one that holds a model makes the heaviest holder (the crowd's address) give way, least recent first
    with pytest.raises(PackageError, match="models folder of this Space is full"):
        library.keeper.make_room(size, library.owners.read(), Visitor("anon:new", address="198.51.100.3"))
    registry = library.owners.read()
    assert library.keeper.make_room(size, registry, Visitor("anon:light2", address="198.51.100.2")) == bots[:1]
    # a member of the crowd cannot push out the lighter visitor, nor the signed-in one: refused, nothing deleted
    with pytest.raises(PackageError, match="models folder of this Space is full"):
        library.keeper.make_room(2 * size, library.owners.read(), crowd[1])
    assert {*bots[1:], light, carols} <= set(library.names(Visitor("hf:x", True, admin=True)))
    # a signed-in visitor frees anonymous models whatever they hold, and never another signed-in one's
    dave = Visitor("hf:dave", signed_in=True)
    assert library.keeper.make_room(3 * size, library.owners.read(), dave) == bots[1:3]
    with pytest.raises(PackageError, match="models folder of this Space is full"):
        library.keeper.make_room(6 * size, library.owners.read(), dave)
    assert (library.models_dir / carols).is_dir() and (library.models_dir / light).is_dir()


def test_a_name_whose_operation_died_is_given_back(tmp_path, tiny):
    library = shared(tmp_path)
    killed = library.add("killed", ALICE, 10_000).name  # an import registered its name, then its process was killed
    library.pending.clear()  # (a new process: nothing is pending)
    registry = library.owners.read()
    assert killed in registry and library.repair_registry() == []  # within the grace a name is just being made
    registry[killed]["created"] -= 120
    library.owners.write(registry)
    kept = make(library, tiny, "kept", ALICE).name
    assert library.repair_registry() == [killed] and set(library.owners.read()) == {kept}
    assert library.keeper.usage(ALICE, library.owners.read())[0] == 1


def test_a_missing_name_longer_than_any_package_name_is_not_echoed_whole():
    from playground.packages.names import check_name
    from playground.serving.library import no_such_model

    message = str(no_such_model("x" * 5000))
    assert "x" * 80 + "…" in message and "x" * 81 not in message and len(message) < 200
    assert "'my-model'" in str(no_such_model("my-model"))  # a real name is said as it was asked
    with pytest.raises(PackageError, match="Invalid model name 'x{80}…':"):
        check_name("x" * 5000 + "/")
