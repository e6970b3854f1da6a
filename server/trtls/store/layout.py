"""Where a store keeps an entry: the one rule, for the store itself (store/entries.py, publishing, eviction) and for
the fast path's look before the store's modules load (builds/avoidance/memo.py); and where a builder says its version
in its own code (the key reads it, the memo keeps its stat). Standard library only."""

from __future__ import annotations

from pathlib import Path

ENTRIES = "entries"


def entry_folder(root: Path, key: str) -> Path:
    """The folder of `key`'s entry in the store at `root` (its name is the key, 64 hex digits)."""
    return root / ENTRIES / key


def version_sources(site: Path, module: str) -> list[Path]:
    """The files that say a builder's version in its own code: the package's `__init__.py` and its bindings' (TensorRT's
    wheels keep `__version__` in `<module>_bindings`). The key reads them for a builder with no `*.dist-info` beside it
    (store/key.py); the fast path's memo keeps their stat (builds/avoidance/memo.py)."""
    return [site / module / "__init__.py", site / f"{module}_bindings" / "__init__.py"]
