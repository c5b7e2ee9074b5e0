"""Many people, one models folder: who owns which package, per-visitor quotas, and freeing space.

Two modes. **Personal** (the default, `python app.py` on your own machine): one person, every package visible and
usable. **Shared** (on a Hugging Face Space, where `SPACE_ID` is set, or with `PLAYGROUND_SHARED=1`): each visitor
sees and uses only their own packages plus the shipped ones; another visitor's package is "no such model", exactly
like a missing one; quotas keep one visitor from filling the disk. The shipped packages (playground.packages.names
.SHIPPED_MODELS, from the repo's models/) are read-only for everyone in both modes.

Who owns what is kept in one registry file in the models folder (`.owners.json`), never inside a package: an exported
zip carries no visitor's identity. Everything here is plain Python (no Gradio): the web UI says who the visitor is,
this module decides what they may do.

The models folder may be a Storage Bucket mounted into the Space (README, "Run it as a Space"): object storage, where
another reader sees a file seconds late, a file is uploaded whole when it is closed, a rename is a copy and a delete,
and there is no lock across processes. So the registry is held in memory by the one server process, its only writer,
read from the file once at start and written whole after each change; a training run's package, written by another
process on ZeroGPU, is given VISIBLE_WITHIN_S to show before its name is let go (`forget`) when the models folder
is on such a mount (FUSE or NFS: `lagging_mount`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
import tempfile
import threading
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from playground.errors import PackageError, TrainingError
from playground.packages.format import is_package
from playground.packages.names import (SHIPPED_MODELS, SHIPPED_MODELS_DIR, average_name, check_name, is_shipped,
                                       package_path, reserve_name, reserved, snapshots_folder)
from playground.packages.store import disk_bytes, list_packages

REGISTRY = ".owners.json"
REGISTRY_COPIES = ".owners-*.tmp"  # the whole new registry, written before it is renamed over the old one
VISIBLE_WITHIN_S = 30.0  # a bucket mount shows another process's new files within ~10 s (hf-mount's metadata TTL)
MB = 1_000_000
TOKEN_PATTERN = re.compile(r"^([A-Za-z0-9_-]{16,64})\.([A-Za-z0-9_-]{22})$")  # a visitor id, its signature


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def shared_mode() -> bool:
    """On a Hugging Face Space (SPACE_ID is set) or when PLAYGROUND_SHARED=1; PLAYGROUND_SHARED=0 forces personal."""
    if os.environ.get("PLAYGROUND_SHARED", "").strip() in ("0", "false", "no", "off"):
        return False
    return bool(os.environ.get("SPACE_ID")) or env_flag("PLAYGROUND_SHARED")


def lagging_mount(folder: str | os.PathLike, mounts: str | os.PathLike = "/proc/self/mounts") -> bool:
    """Is `folder` on a FUSE or NFS mount (how a Storage Bucket is mounted), where another process's new files show
    late? Judged by the mount that holds it: the longest mount point above it in /proc/self/mounts."""
    path, best, fstype = os.path.realpath(folder), "", ""
    try:
        lines = Path(mounts).read_text().splitlines()
    except OSError:
        return False
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, fstype = point, fields[2]
    return fstype.startswith(("fuse", "nfs"))


def models_location(shared: bool, default: str | os.PathLike = "models") -> tuple[Path, bool]:
    """(where new packages go, whether they survive a restart of the Space).

    PLAYGROUND_MODELS_DIR wins in both modes; a shared app uses /data/models when /data (a Space's persistent
    storage) is writable; otherwise `default`, which a Space wipes on restart."""
    if os.environ.get("PLAYGROUND_MODELS_DIR"):
        return Path(os.environ["PLAYGROUND_MODELS_DIR"]), True
    data = Path("/data")
    if shared and data.is_dir() and os.access(data, os.W_OK):
        return data / "models", True
    return Path(default), not shared


@dataclass(frozen=True)
class Visitor:
    """Who is asking: "hf:<username>" when signed in, "anon:<token>" for a browser, "session:<id>" for an API client."""

    key: str
    signed_in: bool = False
    admin: bool = False  # the Space's owner: sees and deletes every package (never the shipped ones)
    address: str = ""  # address_key of the client address it came from: anonymous visitors are bounded per address

    @classmethod
    def signed(cls, username: str) -> "Visitor":
        owner = os.environ.get("SPACE_AUTHOR_NAME", "")
        return cls(f"hf:{username}", signed_in=True, admin=bool(owner) and username.lower() == owner.lower())

    @classmethod
    def browser(cls, token: str, secret: bytes, address: str = "") -> "Visitor | None":
        """The anonymous visitor a token the server issued (issue_token) names; None for any other string."""
        visitor_id = verify_token(token, secret)
        return cls(f"anon:{visitor_id}", address=address) if visitor_id else None

    @classmethod
    def session(cls, session_id: str, address: str = "") -> "Visitor":
        return cls(f"session:{session_id}", address=address)

    def with_address(self, address: str) -> "Visitor":
        return Visitor(self.key, self.signed_in, self.admin, address)


def _signature(visitor_id: str, secret: bytes) -> str:
    digest = hmac.new(secret, b"visitor:" + visitor_id.encode(), hashlib.sha256).digest()[:16]
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def issue_token(secret: bytes) -> str:
    """A new anonymous visitor's token: a random id and its HMAC under the server's secret. Only the server can make
    one, so a client cannot name itself somebody else, nor pick a fresh identity without asking the server (which
    bounds what one address may hold: Quotas.models_per_address)."""
    visitor_id = secrets.token_urlsafe(18)
    return f"{visitor_id}.{_signature(visitor_id, secret)}"


def verify_token(token, secret: bytes) -> str | None:
    """The visitor id of a token issue_token made with this secret; None for anything else."""
    match = TOKEN_PATTERN.match(token) if isinstance(token, str) else None
    if match is None or not hmac.compare_digest(match.group(2), _signature(match.group(1), secret)):
        return None
    return match.group(1)


def address_key(address: str, secret: bytes) -> str:
    """What the registry keeps of a client address (Visitor.address): a keyed hash, so that the models folder holds
    no visitor's IP address while one address's visitors still count together."""
    if not address:
        return ""
    return "addr:" + hmac.new(secret, b"address:" + address.encode(), hashlib.sha256).hexdigest()[:20]


def server_secret(folder: Path) -> bytes:
    """The key that signs visitor tokens: kept beside the models (mode 600, never sent to a browser) so that it, and
    with it every browser's identity, outlives a restart when the models do."""
    path = folder / ".browser-secret"
    try:
        secret = path.read_text(encoding="utf-8").strip()
    except OSError:
        secret = ""
    if len(secret) < 32:
        fd, tmp = tempfile.mkstemp(prefix=".secret-", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as f:  # mkstemp: mode 600 from the start
            f.write(secrets.token_urlsafe(32))
        try:
            if secret:  # damaged: replaced
                os.replace(tmp, path)
            else:  # none yet: made only where none is, so two processes starting at once share one
                os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            Path(tmp).unlink(missing_ok=True)
        secret = path.read_text(encoding="utf-8").strip()
    return secret.encode()


PERSONAL = Visitor("personal", admin=True)  # the one person of a personal app


def env_number(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    try:
        return float(raw) if raw else default
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number") from None


@dataclass(frozen=True)
class Quotas:
    """The limits of a shared app; a Space's owner changes them by environment variable (see README)."""

    models_per_visitor: int = 5  # PLAYGROUND_MAX_MODELS
    bytes_per_visitor: int = 200 * MB  # PLAYGROUND_MAX_VISITOR_MB
    bytes_total: int = 5000 * MB  # PLAYGROUND_MAX_TOTAL_MB: the models folder, freed by evicting old models
    evict_after_s: float = 24 * 3600  # PLAYGROUND_EVICT_AFTER_HOURS: anonymous models unused this long may go
    run_minutes: float | None = 10  # PLAYGROUND_MAX_RUN_MINUTES: the length cap of one training run (0 = none)
    # anonymous visitors behind one client address together (a classroom shares one): 60 models, 1 GB
    models_per_address: int = 60  # PLAYGROUND_MAX_ADDRESS_MODELS
    bytes_per_address: int = 1000 * MB  # PLAYGROUND_MAX_ADDRESS_MB

    @classmethod
    def from_env(cls, shared: bool) -> "Quotas":
        run = env_number("PLAYGROUND_MAX_RUN_MINUTES", 10 if shared else 0)
        return cls(models_per_visitor=int(env_number("PLAYGROUND_MAX_MODELS", 5)),
                   bytes_per_visitor=int(env_number("PLAYGROUND_MAX_VISITOR_MB", 200) * MB),
                   bytes_total=int(env_number("PLAYGROUND_MAX_TOTAL_MB", 5000) * MB),
                   evict_after_s=env_number("PLAYGROUND_EVICT_AFTER_HOURS", 24) * 3600,
                   run_minutes=run if run > 0 else None,
                   models_per_address=int(env_number("PLAYGROUND_MAX_ADDRESS_MODELS", 60)),
                   bytes_per_address=int(env_number("PLAYGROUND_MAX_ADDRESS_MB", 1000) * MB))


def no_such_model(name: str) -> PackageError:
    """The one message for a package that is missing and for one that belongs to somebody else."""
    return PackageError(f"There is no model package named {name!r} (any more); press ↻ to refresh the list.")


class Library:
    """The packages an app serves: its models folder plus the shipped ones, filtered by owner in shared mode.

    Every method takes the Visitor asking. In personal mode everybody sees everything (only the shipped packages are
    read-only). Thread-safe within one process (the web app's handlers run in threads)."""

    def __init__(self, models_dir: str | os.PathLike, *, shared: bool = False, quotas: Quotas | None = None,
                 shipped_dir: str | os.PathLike = SHIPPED_MODELS_DIR, persistent: bool = True):
        self.models_dir = Path(models_dir)
        self.models_dir.mkdir(parents=True, exist_ok=True)
        self.shared, self.persistent = shared, persistent
        self.quotas = quotas or Quotas.from_env(shared)
        self.shipped = [Path(shipped_dir) / n for n in SHIPPED_MODELS
                        if is_shipped(Path(shipped_dir) / n) and is_package(Path(shipped_dir) / n)]
        self.lock = threading.RLock()
        self.running: dict[str, str] = {}  # visitor key -> package name of their run in progress
        self.pending: set[str] = set()  # names add() reserved whose operation has not ended yet (no folder yet)
        self.registry = self.load_registry()
        self.visible_within_s = VISIBLE_WITHIN_S if lagging_mount(self.models_dir) else 0.0

    # -- the registry ---------------------------------------------------------------------------------------

    def load_registry(self) -> dict[str, dict]:
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
                    self.write_registry(registry)
                for copy in copies:  # leftovers of earlier writes: the registry above is the newest whole one
                    copy.unlink(missing_ok=True)
                return registry
        return {}

    def read_registry(self) -> dict[str, dict]:
        """A copy of the registry, to change and hand to write_registry (`self.registry` itself is only ever
        replaced, never changed in place: reading it needs no copy)."""
        with self.lock:
            return {name: dict(entry) for name, entry in self.registry.items()}

    def write_registry(self, registry: dict[str, dict]) -> None:
        """Keep `registry` as the registry and write it whole: to a sibling file, closed (a bucket mount uploads a
        file when it is closed), then renamed over the old one; a crash in between leaves a whole copy that
        load_registry finds."""
        with self.lock:
            self.registry = {name: dict(entry) for name, entry in registry.items()}
            fd, tmp = tempfile.mkstemp(prefix=".owners-", suffix=".tmp", dir=self.models_dir)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(self.registry, f, indent=1, sort_keys=True)
            os.replace(tmp, self.models_dir / REGISTRY)

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
        registry = self.registry if self.shared else {}
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
        if folder is None or not self.may_see(folder, visitor, self.registry if self.shared else {}):
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

    def usage(self, visitor: Visitor, registry: dict[str, dict] | None = None) -> tuple[int, int]:
        """(packages, bytes) this visitor holds in the models folder (their runs in progress included)."""
        registry = self.read_registry() if registry is None else registry
        names = [n for n, e in registry.items() if e["owner"] == visitor.key
                 and ((self.models_dir / n).is_dir() or n in self.running.values() or n in self.pending)]
        return len(names), sum(disk_bytes(self.models_dir / n) for n in names)

    def check_quota(self, visitor: Visitor, new_bytes: int, registry: dict[str, dict]) -> None:
        if not self.shared or visitor.admin:
            return
        count, used = self.usage(visitor, registry)
        if count >= self.quotas.models_per_visitor:
            mine = [n for n, e in registry.items() if e["owner"] == visitor.key and (self.models_dir / n).is_dir()]
            raise PackageError(f"You have {count} models, the most this Space keeps per visitor "
                               f"({self.quotas.models_per_visitor}): delete one on the Models tab first "
                               f"(yours: {', '.join(sorted(mine))}).")
        if used + new_bytes > self.quotas.bytes_per_visitor:
            raise PackageError(f"This would bring your models to {(used + new_bytes) / MB:.0f} MB; this Space keeps "
                               f"at most {self.quotas.bytes_per_visitor / MB:.0f} MB per visitor: delete a model on "
                               "the Models tab, or choose a smaller model.")
        self.check_address_quota(visitor, new_bytes, registry)

    def address_usage(self, address: str, registry: dict[str, dict]) -> tuple[int, int]:
        """(packages, bytes) the anonymous visitors from this client address hold together."""
        names = [n for n, e in registry.items() if not e.get("signed_in") and e.get("address") == address
                 and ((self.models_dir / n).is_dir() or n in self.running.values() or n in self.pending)]
        return len(names), sum(disk_bytes(self.models_dir / n) for n in names)

    def check_address_quota(self, visitor: Visitor, new_bytes: int, registry: dict[str, dict]) -> None:
        """Anonymous visitors are whoever asks the server for a token: what one client address holds is bounded too
        (generously: a classroom shares one address), so fresh tokens do not buy more room."""
        if visitor.signed_in or not visitor.address:
            return
        count, used = self.address_usage(visitor.address, registry)
        if count >= self.quotas.models_per_address or used + new_bytes > self.quotas.bytes_per_address:
            raise PackageError(f"The visitors from your network hold {count} models ({used / MB:,.0f} MB) without "
                               f"signing in, the most this Space keeps for one network "
                               f"({self.quotas.models_per_address} models, {self.quotas.bytes_per_address / MB:,.0f} "
                               "MB): sign in with Hugging Face (your models then count as yours alone), or delete a "
                               "model on the Models tab.")

    def check_size(self, visitor: Visitor, new_bytes: int) -> None:
        """Refuse, before any work is spent on it (timing, training), a package larger than a visitor's whole quota."""
        if self.shared and not visitor.admin and new_bytes > self.quotas.bytes_per_visitor:
            raise PackageError(f"A model of this size takes about {new_bytes / MB:,.0f} MB on disk; this Space keeps "
                               f"at most {self.quotas.bytes_per_visitor / MB:.0f} MB per visitor: make it smaller "
                               "(d_model, d_ff, layers, the vocabulary or 'Average last').")

    def total_bytes(self) -> int:
        return sum(disk_bytes(p) for p in list_packages(self.models_dir))

    def make_room(self, new_bytes: int, registry: dict[str, dict], visitor: Visitor | None = None) -> list[str]:
        """Free space for new_bytes, deleting anonymous visitors' packages only (never a signed-in visitor's, a shipped
        one, a run in progress or the asker's own): first those unused for longer than the quota's age, least
        recently used first; then, while the folder is still full, those of the heaviest anonymous holder (a client
        address, else a visitor) that holds more than the asker would with the new package, least recently used
        first. Returns the names deleted; PackageError (and nothing deleted) when even that is not enough."""
        if not self.shared:
            return []
        total, chosen = self.total_bytes(), []
        left = total
        for name in self.eviction_order(registry, visitor):
            if left + new_bytes <= self.quotas.bytes_total:
                break
            left -= disk_bytes(self.models_dir / name)
            chosen.append(name)
        if left + new_bytes > self.quotas.bytes_total:
            raise PackageError(f"The models folder of this Space is full ({total / 1e9:.2f} of "
                               f"{self.quotas.bytes_total / 1e9:.1f} GB) and nothing in it may be freed for you (signed-in "
                               "visitors' models, runs in progress and visitors who hold less than you stay): try "
                               "again later, or download your models and run the app on your own machine.")
        for name in chosen:
            self.remove(self.models_dir / name)
            registry.pop(name, None)
        return chosen

    def eviction_order(self, registry: dict[str, dict], visitor: Visitor | None) -> Iterator[str]:
        """The packages make_room may delete for this visitor, in the order it deletes them. The heaviest anonymous
        holders give way first, each only down to what the asker would hold, so a newcomer can always make a first
        model while one network's many tokens cannot push out anybody lighter than itself."""
        now = time.time()
        asker = visitor.key if visitor else None

        def holder(entry: dict) -> str:
            return entry.get("address") or entry["owner"]

        evictable = {n: e for n, e in registry.items()
                     if not e.get("signed_in") and e["owner"] != asker and n not in self.running.values()
                     and (self.models_dir / n).is_dir()}
        old = sorted((e.get("used", 0), n) for n, e in evictable.items() if now - e.get("used", 0) > self.quotas.evict_after_s)
        yield from (n for _, n in old)
        for _, name in old:
            del evictable[name]
        sizes: dict[str, int] = {}
        for name, entry in registry.items():
            if not entry.get("signed_in") and (self.models_dir / name).is_dir():
                sizes[holder(entry)] = sizes.get(holder(entry), 0) + disk_bytes(self.models_dir / name)
        # a signed-in visitor's room is never taken by anonymous models: they give way to them whatever they hold
        mine = 0 if visitor is None or visitor.signed_in or visitor.admin else \
            sizes.get(visitor.address or visitor.key, 0)
        while evictable:
            heaviest = max((h for h in sizes if sizes[h] > mine), key=sizes.get, default=None)
            candidates = sorted((e.get("used", 0), n) for n, e in evictable.items() if holder(e) == heaviest)
            if heaviest is None:
                return
            if not candidates:  # all of it in use right now: the next heaviest
                del sizes[heaviest]
                continue
            name = candidates[0][1]
            sizes[heaviest] -= disk_bytes(self.models_dir / name)
            del evictable[name]
            yield name

    def add(self, base: str, visitor: Visitor, new_bytes: int, *, average: bool = False) -> Path:
        """Reserve a new package folder for this visitor: quotas checked, space made, the name recorded as theirs.
        `base`, or `base-2`, `base-3`… so no package (shipped or reserved) is ever overwritten: what the Train tab's
        name field promises, in both modes (any suffix tells a visitor that the name is taken). `average`: a run that
        also writes `<name>-avg` at the end; both names are free and both are reserved."""
        check_name(average_name(base) if average else base)
        with self.lock:
            registry = self.read_registry()
            self.check_quota(visitor, new_bytes, registry)
            self.make_room(new_bytes, registry, visitor)
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
            registry = self.read_registry()
            entry = registry.get(name)
            if self.shared and entry is not None and entry["owner"] == visitor.key or \
                    not self.shared and name not in SHIPPED_MODELS:
                return package_path(self.models_dir, name)
            if entry is not None or name in SHIPPED_MODELS or name in self.pending or \
                    (self.models_dir / name).exists():
                raise PackageError(f"This run would write its averaged weights to {name}, a name that is taken: "
                                   "set 'Average last' to 0, or start a new run under another name.")
            self.check_quota(visitor, new_bytes, registry)
            self.make_room(new_bytes, registry, visitor)
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
            self.write_registry(registry)

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
            registry = self.read_registry()
            mine = [e for e in registry.values() if e["owner"] == old.key]
            for entry in mine:
                entry.update(owner=new.key, signed_in=new.signed_in)
                entry.pop("address", None)
            if mine:
                self.write_registry(registry)

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
            registry = self.read_registry()
            if name in registry and not (self.models_dir / name).is_dir():
                del registry[name]
                self.write_registry(registry)

    def repair_registry(self, grace_s: float = 60) -> list[str]:
        """Drop the entries of names whose operation died before writing its package (an import or run killed
        mid-way): no folder, no live reservation, not pending in this process, older than grace_s (add() registers a
        name a moment before its operation reserves it). Run at start-up and with every sweep. Returns the names."""
        if not self.shared:
            return []
        with self.lock:
            registry, now = self.read_registry(), time.time()
            dead = [n for n, e in registry.items() if now - e.get("created", 0) > grace_s
                    and n not in self.pending and n not in self.running.values()
                    and not (self.models_dir / n).exists() and not reserved(self.models_dir / n)]
            for name in dead:
                del registry[name]
            if dead:
                self.write_registry(registry)
            return dead

    def touch(self, folder: Path) -> None:
        """Note that a package was used (for eviction: least recently used first); at most once a minute."""
        if not self.shared or is_shipped(folder):
            return
        now = time.time()
        with self.lock:
            registry = self.read_registry()
            entry = registry.get(folder.name)
            if entry is not None and now - entry.get("used", 0) > 60:
                entry["used"] = now
                self.write_registry(registry)

    def delete(self, name: str | None, visitor: Visitor) -> None:
        folder = self.writable(name, visitor)
        with self.lock:
            if name in self.running.values():
                raise PackageError(f"{name} is training right now: stop the run first, then delete it.")
            self.remove(folder)
            registry = self.read_registry()
            if registry.pop(folder.name, None) is not None:
                self.write_registry(registry)

    @staticmethod
    def remove(folder: Path) -> None:
        """Delete a package and the snapshots its run kept for averaging."""
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(snapshots_folder(folder), ignore_errors=True)

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
