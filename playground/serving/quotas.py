"""How much of a shared models folder each visitor may hold, and freeing it: per-visitor and per-address quotas,
the order eviction deletes anonymous visitors' packages in, and the deleting.

The limits are the Space owner's (Quotas, by environment variable: README, "Run it as a Space"); sizes in MB are
mebibytes (playground.settings.MB). What a visitor holds is read from the owners registry the Library keeps
(playground.serving.library), passed in by the caller that holds its lock.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from playground.errors import PackageError
from playground.packages.store import disk_bytes, list_packages, remove_package
from playground.serving.visitors import Visitor
from playground.settings import GB, MB, env_megabytes, env_number


@dataclass(frozen=True)
class Quotas:
    """The limits of a shared app; a Space's owner changes them by environment variable (see README)."""

    models_per_visitor: int = 5  # PLAYGROUND_MAX_MODELS
    # PLAYGROUND_MAX_VISITOR_MB: an imported OPUS-MT model (74 M parameters, 300 MB) and one fine-tune of it (its
    # weights and Adam's two moments, 890 MB) together
    bytes_per_visitor: int = 1500 * MB
    bytes_total: int = 5000 * MB  # PLAYGROUND_MAX_TOTAL_MB: the models folder, freed by evicting old models
    evict_after_s: float = 24 * 3600  # PLAYGROUND_EVICT_AFTER_HOURS: anonymous models unused this long may go
    run_minutes: float | None = 10  # PLAYGROUND_MAX_RUN_MINUTES: the length cap of one training run (0 = none)
    # anonymous visitors behind one client address together (a classroom shares one): 60 models, 1 GB
    models_per_address: int = 60  # PLAYGROUND_MAX_ADDRESS_MODELS
    bytes_per_address: int = 3000 * MB  # PLAYGROUND_MAX_ADDRESS_MB: at least a visitor's, twice over

    @classmethod
    def from_env(cls, shared: bool) -> "Quotas":
        run = env_number("PLAYGROUND_MAX_RUN_MINUTES", 10 if shared else 0)
        return cls(models_per_visitor=int(env_number("PLAYGROUND_MAX_MODELS", 5)),
                   bytes_per_visitor=env_megabytes("PLAYGROUND_MAX_VISITOR_MB", 1500),
                   bytes_total=env_megabytes("PLAYGROUND_MAX_TOTAL_MB", 5000),
                   evict_after_s=env_number("PLAYGROUND_EVICT_AFTER_HOURS", 24) * 3600,
                   run_minutes=run if run > 0 else None,
                   models_per_address=int(env_number("PLAYGROUND_MAX_ADDRESS_MODELS", 60)),
                   bytes_per_address=env_megabytes("PLAYGROUND_MAX_ADDRESS_MB", 3000))


class QuotaKeeper:
    """What visitors hold in one models folder against the Quotas, and room made for a new package by deleting
    anonymous visitors' old ones. Shares the Library's sets of live names (runs in progress, reservations), which
    count as held before their folders exist. Personal mode: no quota, nothing ever deleted."""

    def __init__(self, models_dir: Path, quotas: Quotas, *, shared: bool, running: dict[str, str],
                 pending: set[str]):
        self.models_dir, self.quotas, self.shared = models_dir, quotas, shared
        self.running, self.pending = running, pending  # the Library's own: visitor key -> run's name; reserved names

    def usage(self, visitor: Visitor, registry: dict[str, dict]) -> tuple[int, int]:
        """(packages, bytes) this visitor holds in the models folder (their runs in progress included)."""
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
        first, and only for an asker that holds something already or is signed in. Returns the names deleted;
        PackageError (and nothing deleted) when even that is not enough."""
        if not self.shared:
            return []
        total, chosen = self.total_bytes(), []
        left = total
        for name in self.eviction_order(registry, visitor, new_bytes):
            if left + new_bytes <= self.quotas.bytes_total:
                break
            left -= disk_bytes(self.models_dir / name)
            chosen.append(name)
        if left + new_bytes > self.quotas.bytes_total:
            raise PackageError(f"The models folder of this Space is full ({total / GB:.2f} of "
                               f"{self.quotas.bytes_total / GB:.1f} GB) and nothing in it may be freed for you "
                               "(signed-in visitors' models, runs in progress and visitors who hold less than you "
                               "stay): sign in with Hugging Face (room is made for signed-in visitors), try again "
                               "later, or download your models and run the app on your own machine.")
        for name in chosen:
            remove_package(self.models_dir / name)
            registry.pop(name, None)
        return chosen

    def eviction_order(self, registry: dict[str, dict], visitor: Visitor | None, new_bytes: int = 0) -> Iterator[str]:
        """The packages make_room may delete for this visitor, in the order it deletes them. The heaviest anonymous
        holders give way first, each only while it holds more than the asker would with the new package, so one
        network's many tokens cannot push out anybody lighter than itself; an anonymous asker that holds nothing (a
        fresh address is cheap: an IPv6 network has billions) takes the place of nobody, old models aside."""
        now = time.time()
        asker = visitor.key if visitor else None

        def holder(entry: dict) -> str:
            return entry.get("address") or entry["owner"]

        evictable = {n: e for n, e in registry.items()
                     if not e.get("signed_in") and e["owner"] != asker and n not in self.running.values()
                     and (self.models_dir / n).is_dir()}
        old = sorted((e.get("used", 0), n) for n, e in evictable.items()
                     if now - e.get("used", 0) > self.quotas.evict_after_s)
        yield from (n for _, n in old)
        for _, name in old:
            del evictable[name]
        sizes: dict[str, int] = {}
        for name, entry in registry.items():
            if not entry.get("signed_in") and (self.models_dir / name).is_dir():
                sizes[holder(entry)] = sizes.get(holder(entry), 0) + disk_bytes(self.models_dir / name)
        # a signed-in visitor's room is never taken by anonymous models: they give way to them whatever they hold
        if visitor is None or visitor.signed_in or visitor.admin:
            mine = 0
        else:
            held = sizes.get(visitor.address or visitor.key, 0)
            if held == 0:  # an address that holds nothing (a fresh one is cheap to come by) frees old models only
                return
            mine = held + new_bytes
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
