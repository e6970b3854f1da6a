"""Where a store keeps an entry: the one rule, for the store itself (store/entries.py, publishing, eviction) and for
the fast path's look before the store's modules load (builds/avoidance/memo.py). Standard library only."""

from __future__ import annotations

from pathlib import Path

ENTRIES = "entries"


def entry_folder(root: Path, key: str) -> Path:
    """The folder of `key`'s entry in the store at `root` (its name is the key, 64 hex digits)."""
    return root / ENTRIES / key
