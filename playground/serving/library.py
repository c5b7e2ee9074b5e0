"""The packages a visitor sees and owns: one models folder plus the shipped packages, filtered by owner in shared
mode (playground.serving.mode), with names reserved while an operation writes them.

In shared mode each visitor sees and uses only their own packages plus the shipped ones; another visitor's package
is "no such model", exactly like a missing one; quotas (playground.serving.quotas) keep one visitor from filling the
disk. The shipped packages (playground.packages.names.SHIPPED_MODELS, from the repo's models/) are read-only for
everyone in both modes.

Who owns what is kept in one registry file in the models folder (`.owners.json`), never inside a package: an exported
zip carries no visitor's identity. Everything here is plain Python (no Gradio): the web UI says who the visitor is
(playground.serving.visitors), this module decides what they may do.

On a Storage Bucket mount (playground.serving.mode.lagging_mount) there is no lock across processes and a rename is
a copy and a delete. So the registry is held in memory by the one server process, its only writer, read from the
file once at start and written whole after each change; a training run's package, written by another process on
ZeroGPU, is given VISIBLE_WITHIN_S to show before its name is let go (`forget`) when the models folder is on such a
mount.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import tempfile
import threading
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Iterator

from playground.errors import PackageError, TrainingError
from playground.packages.format import is_package
from playground.packages.names import (
    SHIPPED_MODELS,
    SHIPPED_MODELS_DIR,
    average_name,
    check_name,
    is_shipped,
    package_path,
    reserve_name,
    reserved,
    shown_name,
)
from playground.packages.store import list_packages, remove_package
from playground.serving.mode import lagging_mount
from playground.serving.quotas import QuotaKeeper, Quotas
from playground.serving.visitors import Visitor, server_secret

REGISTRY = ".owners.json"
REGISTRY_COPIES = ".owners-*.tmp"  # the whole new registry, written before it is renamed over the old one
NAME_TAG_CHARS = 6  # hex characters of the code in front of a visitor's package names (shared mode)
VISIBLE_WITHIN_S = 30.0  # a bucket mount shows another process's new files within ~10 s (hf-mount's metadata TTL)


class OwnerRegistry:
    """{package name: {"owner", "signed_in", "created", "used", "address"?}}: who owns which package of a models
    folder, held in memory and written whole to `.owners.json` after each change."""

    def __init__(self, models_dir: Path, lock: threading.RLock):
        self.models_dir, self.lock = models_dir, lock
        self.entries = self.load()

    def load(self) -> dict[str, dict]:
        """{package name: {"owner", "signed_in", "created", "used"}} from the file; where it is missing or damaged (a
        crash between the two halves of a rename that is a copy and a delete), the newest whole copy beside it. What
        cannot be read counts as empty."""
        copies = sorted(self.models_dir.glob(REGISTRY_COPIES), key=lambda p: p.stat().st_mtime, reverse=True)
        for path in [self.models_dir / REGISTRY, *copies]:
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(data, dict):
                registry = {k: v for k, v in data.items() if isinstance(v, dict) and isinstance(v.get("owner"), str)}
                if path.name != REGISTRY:
                    self.write(registry)
                for copy in copies:  # leftovers of earlier writes: the registry above is the newest whole one
                    copy.unlink(missing_ok=True)
                return registry
        return {}

    def read(self) -> dict[str, dict]:
        """A copy of the registry, to change and hand to write (`self.entries` itself is only ever
        replaced, never changed in place: reading it needs no copy)."""
        with self.lock:
            return {name: dict(entry) for name, entry in self.entries.items()}

    def write(self, registry: dict[str, dict]) -> None:
        """Keep `registry` as the registry and write it whole: to a sibling file, closed (a bucket mount uploads a
        file when it is closed), then renamed over the old one; a crash in between leaves a whole copy that
        load finds."""
        with self.lock:
            self.entries = {name: dict(entry) for name, entry in registry.items()}
            fd, tmp = tempfile.mkstemp(prefix=".owners-", suffix=".tmp", dir=self.models_dir)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(self.entries, f, indent=1, sort_keys=True)
            os.replace(tmp, self.models_dir / REGISTRY)



def no_such_model(name: str) -> PackageError:
    """The one message for a package that is missing and for one that belongs to somebody else."""
    return PackageError(f"There is no model package named {shown_name(name)} (any more); press ↻ to refresh the list.")


class Library:
    """The packages an app serves: its models folder plus the shipped ones, filtered by owner in shared mode.

    Every method takes the Visitor asking. In personal mode everybody sees everything (only the shipped packages are
    read-only). Thread-safe within one process (the web app's handlers run in threads)."""

    def __init__(self, models_dir: str | os.PathLike, *, shared: bool = False, quotas: Quotas | None = None,
                 shipped_dir: str | os.PathLike = SHIPPED_MODELS_DIR, persistent: bool = True):
        self.models_dir = Path(models_dir)
        self.models_dir.mkdir(parents=True, exist_ok=True)
        self.shared, self.persistent = shared, persistent
        self.shipped = [Path(shipped_dir) / n for n in SHIPPED_MODELS
                        if is_shipped(Path(shipped_dir) / n) and is_package(Path(shipped_dir) / n)]
        self.lock = threading.RLock()
        self.running: dict[str, str] = {}  # visitor key -> package name of their run in progress
        self.pending: set[str] = set()  # names add() reserved whose operation has not ended yet (no folder yet)
        self.owners = OwnerRegistry(self.models_dir, self.lock)
        self.keeper = QuotaKeeper(self.models_dir, quotas or Quotas.from_env(shared), shared=shared,
                                  running=self.running, pending=self.pending)
        self.visible_within_s = VISIBLE_WITHIN_S if lagging_mount(self.models_dir) else 0.0
        self.secret = server_secret(self.models_dir) if shared else b""

    @property
    def quotas(self) -> Quotas:
        """The limits of this app: what a visitor may hold, a run's length (playground.serving.quotas)."""
        return self.keeper.quotas

    # -- what a visitor sees -------------------------------------------------------------------------------

    def all_packages(self) -> list[Path]:
        """Every package, newest first: the models folder's, then the shipped ones it does not already hold."""
        own = [p for p in list_packages(self.models_dir) if not (p.name in SHIPPED_MODELS and not is_shipped(p))]
        names = {p.name for p in own}
        return own + [p for p in self.shipped if p.name not in names]

    def may_see(self, folder: Path, visitor: Visitor, registry: dict[str, dict]) -> bool:
        if not self.shared or visitor.admin or is_shipped(folder):
            return True
        entry = registry.get(folder.name)
        return entry is not None and entry["owner"] == visitor.key

    def packages(self, visitor: Visitor) -> list[Path]:
        """The packages this visitor may see and use, newest first."""
        registry = self.owners.entries if self.shared else {}
        return [p for p in self.all_packages() if self.may_see(p, visitor, registry)]

    def names(self, visitor: Visitor) -> list[str]:
        return [p.name for p in self.packages(visitor)]

    def folder(self, name: str | None, visitor: Visitor) -> Path:
        """The folder of a package this visitor may use; a missing one and another visitor's read the same."""
        if not name:
            raise PackageError("Choose a model first (train one on the Train tab, or upload a package on the "
                               "Models tab).")
        try:
            check_name(name)
        except PackageError:
            raise no_such_model(name) from None
        # the one folder the name can be (as all_packages picks it), not a listing of them all: this runs on every
        # translate, attention and probe-slider move
        own = self.models_dir / name
        if is_package(own) and not (name in SHIPPED_MODELS and not is_shipped(own)):
            folder = own
        else:
            folder = next((p for p in self.shipped if p.name == name), None)
        if folder is None or not self.may_see(folder, visitor, self.owners.entries if self.shared else {}):
            raise no_such_model(name)
        self.touch(folder)
        return folder

    def writable(self, name: str | None, visitor: Visitor) -> Path:
        """As folder(), for changing a package (delete, resume into): the shipped ones are refused."""
        folder = self.folder(name, visitor)
        if is_shipped(folder):
            raise PackageError(f"{name} ships with the app and is read-only: nobody can delete it or train it "
                               "further. To continue from it, download it and upload the zip as your own copy.")
        return folder

    # -- changing the set of packages ----------------------------------------------------------------------

    def name_tag(self, visitor: Visitor) -> str:
        """Shared mode: the short code in front of every package name this visitor makes, a keyed hash of who they
        are (no visitor can work out another's), so two visitors' names never meet."""
        digest = hmac.new(self.secret, b"package-names:" + visitor.key.encode(), hashlib.sha256).hexdigest()
        return digest[:NAME_TAG_CHARS]

    def label(self, name: str, visitor: Visitor) -> str:
        """How the page shows a package to this visitor: their own names without their code (shared mode), except
        one that would then read as a shipped model's (each label names one package)."""
        if not self.shared:
            return name
        own = name.removeprefix(f"{self.name_tag(visitor)}-")
        return name if own in SHIPPED_MODELS and own != name else own

    def add(self, base: str, visitor: Visitor, new_bytes: int, *, average: bool = False) -> Path:
        """Reserve a new package folder for this visitor: quotas checked, space made, the name recorded as theirs.
        `base`, or `base-2`, `base-3`… so no package (shipped or reserved) is ever overwritten: what the Train tab's
        name field promises. In shared mode the name starts with the visitor's code (name_tag), so the suffix
        counts only their own names: what they get never depends on, nor tells of, anybody else's (two visitors
        share a code about once in 16 million pairs; the name is then suffixed rather than overwritten).
        `average`: a run that also writes `<name>-avg` at the end; both names are free and both are reserved."""
        check_name(average_name(base) if average else base)
        if self.shared:
            tag = self.name_tag(visitor)
            base = f"{tag}-{base.removeprefix(f'{tag}-')}"[:64 - (4 if average else 0)]  # a re-imported zip's too
        with self.lock:
            registry = self.owners.read()
            self.keeper.check_quota(visitor, new_bytes, registry)
            self.keeper.make_room(new_bytes, registry, visitor)
            taken = set(registry) | set(SHIPPED_MODELS) | {p.name for p in self.models_dir.iterdir()} | self.pending
            stem = base[:64 - 7 - (4 if average else 0)] if self.shared else base  # room for the suffixes
            name, n = base, 1
            while name in taken or (average and average_name(name) in taken):
                n += 1
                name = f"{stem}-{n}"
            self.register([name, average_name(name)] if average else [name], visitor, registry)
            return package_path(self.models_dir, name)

    def add_average(self, folder: Path, visitor: Visitor, new_bytes: int) -> Path:
        """Reserve `<name>-avg` for a resumed run of `folder` that averages: this visitor's own averaged package is
        replaced; a name held by anything else is refused (nothing is overwritten, no ownership changes hands)."""
        name = check_name(average_name(folder.name))
        with self.lock:
            registry = self.owners.read()
            entry = registry.get(name)
            if self.shared and entry is not None and entry["owner"] == visitor.key or \
                    not self.shared and name not in SHIPPED_MODELS:
                return package_path(self.models_dir, name)
            if entry is not None or name in SHIPPED_MODELS or name in self.pending or \
                    (self.models_dir / name).exists():
                raise PackageError(f"This run would write its averaged weights to {name}, a name that is taken: "
                                   "set 'Average last' to 0, or start a new run under another name.")
            self.keeper.check_quota(visitor, new_bytes, registry)
            self.keeper.make_room(new_bytes, registry, visitor)
            self.register([name], visitor, registry)
            return package_path(self.models_dir, name)

    def register(self, names: list[str], visitor: Visitor, registry: dict[str, dict]) -> None:
        """Record names as this visitor's (shared mode) and as pending until their operation ends (forget)."""
        self.pending.update(names)
        if self.shared:
            now = time.time()
            for name in names:
                registry[name] = {"owner": visitor.key, "signed_in": visitor.signed_in, "created": now, "used": now,
                                  **({"address": visitor.address} if visitor.address and not visitor.signed_in else {})}
            self.owners.write(registry)

    @contextmanager
    def writing(self, *folders: Path) -> Iterator[None]:
        """Hold the names add() reserved while an operation writes them (playground.packages.names.reserve_name: nothing
        else writes them meanwhile); at the end, forget those it never wrote, even when taking a lock failed."""
        try:
            with ExitStack() as locks:
                for folder in folders:
                    locks.enter_context(reserve_name(self.models_dir, folder.name, exact=True))
                yield
        finally:
            for folder in folders:
                self.forget(folder.name)

    def adopt(self, old: Visitor, new: Visitor) -> None:
        """Give `old`'s packages to `new` (a browser's anonymous models to the account it signed in with)."""
        with self.lock:
            registry = self.owners.read()
            mine = [e for e in registry.values() if e["owner"] == old.key]
            for entry in mine:
                entry.update(owner=new.key, signed_in=new.signed_in)
                entry.pop("address", None)
            if mine:
                self.owners.write(registry)

    def forget(self, name: str) -> None:
        """End the reservation of a name add() gave; its registry entry goes when its package never came to be (the
        run failed before its first save). A package another process wrote (ZeroGPU's worker) may show on a bucket
        mount seconds late: there a name whose folder is not there yet stays reserved for `visible_within_s`, then is
        looked at again."""
        if not self.visible_within_s or (self.models_dir / name).is_dir():
            self.let_go(name)
            return
        later = threading.Timer(self.visible_within_s, self.let_go, args=(name,))
        later.daemon = True
        later.start()

    def let_go(self, name: str) -> None:
        with self.lock:
            self.pending.discard(name)
            registry = self.owners.read()
            if name in registry and not (self.models_dir / name).is_dir():
                del registry[name]
                self.owners.write(registry)

    def repair_registry(self, grace_s: float = 60) -> list[str]:
        """Drop the entries of names whose operation died before writing its package (an import or run killed
        mid-way): no folder, no live reservation, not pending in this process, older than grace_s (add() registers a
        name a moment before its operation reserves it). Run at start-up and with every sweep. Returns the names."""
        if not self.shared:
            return []
        with self.lock:
            registry, now = self.owners.read(), time.time()
            dead = [n for n, e in registry.items() if now - e.get("created", 0) > grace_s
                    and n not in self.pending and n not in self.running.values()
                    and not (self.models_dir / n).exists() and not reserved(self.models_dir / n)]
            for name in dead:
                del registry[name]
            if dead:
                self.owners.write(registry)
            return dead

    def touch(self, folder: Path) -> None:
        """Note that a package was used (for eviction: least recently used first); at most once a minute."""
        if not self.shared or is_shipped(folder):
            return
        now = time.time()
        with self.lock:
            registry = self.owners.read()
            entry = registry.get(folder.name)
            if entry is not None and now - entry.get("used", 0) > 60:
                entry["used"] = now
                self.owners.write(registry)

    def delete(self, name: str | None, visitor: Visitor) -> None:
        folder = self.writable(name, visitor)
        with self.lock:
            if name in self.running.values():
                raise PackageError(f"{name} is training right now: stop the run first, then delete it.")
            remove_package(folder)
            registry = self.owners.read()
            if registry.pop(folder.name, None) is not None:
                self.owners.write(registry)
    # -- training runs -------------------------------------------------------------------------------------

    @contextmanager
    def run_slot(self, visitor: Visitor, name: str) -> Iterator[None]:
        """One training run per visitor at a time (personal mode: the training queue already runs one at a time)."""
        if not self.shared:
            yield
            return
        with self.lock:
            if visitor.key in self.running:
                raise TrainingError(f"You already have a run training ({self.running[visitor.key]}): stop it or "
                                    "wait for it to finish, then start the next one.")
            self.running[visitor.key] = name
        try:
            yield
        finally:
            with self.lock:
                self.running.pop(visitor.key, None)

    def run_minutes(self, requested: float | None, already: float = 0.0) -> float | None:
        """The minutes budget a run gets: the form's, capped at the Space's run length on top of `already`."""
        cap = self.quotas.run_minutes
        if cap is None:
            return requested
        return min(requested, already + cap) if requested else already + cap
