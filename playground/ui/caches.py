"""The UI's cache of what is on disk: packages' JSON files, bounded and refreshed when the package's files change (a
retrained package is read afresh). Models are loaded by the worker processes only (playground.serving.work)."""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from playground.settings import env_megabytes


def deep_size(value) -> int:
    """Bytes a JSON-like value takes as Python objects (each container and scalar counted; shared ones as often as
    they are referenced, so an upper bound): what keeping it costs, which its file size does not say (a 16 MB
    training.json of empty dicts is ~390 MB of objects)."""
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        total += sys.getsizeof(item)
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return total


class JsonCache:
    """Values read from a package's JSON files, kept while the files are unchanged, most recently used first, within
    a budget in bytes (deep_size), not a count: a value larger than a quarter of the budget is returned, not kept."""

    def __init__(self, budget_bytes: int):
        self.budget = budget_bytes
        self.items: OrderedDict[tuple[str, str], tuple[tuple, Any, int]] = OrderedDict()  # key -> (stamp, value, size)
        self.held = 0
        self.lock = threading.Lock()

    def get(self, folder: Path, kind: str, read):
        """read(folder)'s value for this folder, read again only when a file of the folder changed."""
        key = (str(folder), kind)
        try:
            stamp = tuple(sorted((p.name, s.st_size, s.st_mtime_ns) for p in folder.iterdir() for s in [p.stat()]))
        except OSError:
            self.drop(lambda k: k[0] == key[0])
            return read(folder)  # no such folder (any more): the reader says so
        with self.lock:
            cached = self.items.get(key)
            if cached is not None and cached[0] == stamp:
                self.items.move_to_end(key)
                return cached[1]
        self.drop(lambda k: k == key or not Path(k[0]).is_dir())  # a broken new version must not leave the old one
        value = read(folder)
        size = deep_size(value)
        if size <= self.budget // 4:
            with self.lock:
                self.items[key] = (stamp, value, size)
                self.held += size
                while self.held > self.budget:
                    self.held -= self.items.popitem(last=False)[1][2]
        return value

    def drop(self, which) -> None:
        with self.lock:
            for key in [k for k in self.items if which(k)]:
                self.held -= self.items.pop(key)[2]


INFO = JsonCache(env_megabytes("PLAYGROUND_INFO_CACHE_MB", 32))


def package_info(folder: str | Path) -> dict:
    """playground.packages.store.package_info without the training history (config.json, training.json's summary, file
    sizes), read again only when a file of the package changes: the pickers and tables refresh on every tab switch.
    Shared between calls: never modify it. The cache (INFO) keeps the most recently used packages that still exist,
    within PLAYGROUND_INFO_CACHE_MB: a deleted package's files leave memory with it, and no package holds the
    server's memory by the size of its history; package_probe reads that."""
    from playground.packages.store import package_info as read_info

    def summary(folder: Path) -> dict:
        info = read_info(folder)
        if info["training"]:
            info["training"] = {k: v for k, v in info["training"].items() if k != "history"}
        return info

    return INFO.get(Path(folder), "summary", summary)


def package_probe(folder: str | Path) -> list:
    """The recorded cross-attention of a package's probe pair, one entry per validation (the Attention tab's slider
    reads it at every move): training.json's history, read on demand and cached as package_info is."""
    from playground.packages.format import read_training

    def probe(folder: Path) -> list:
        training = read_training(folder) or {}
        return list((training.get("history") or {}).get("probe") or [])

    return INFO.get(Path(folder), "probe", probe)


