"""Where a store keeps an entry: the one rule, for the store itself (store/entries.py, publishing, eviction) and for
the fast path's look before the store's modules load (builds/avoidance/memo.py); and where a builder says its version
in its own code and which native libraries it loads (the key reads them, the memo keeps their stat). Standard library
only."""

from __future__ import annotations

import os
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


def library_files(site: Path, module: str) -> list[Path]:
    """The native libraries a builder loads from its own packages, sorted: every `*.so`, `*.so.*` and `*.dll` file in
    `<module>`, `<module>_bindings` (the extension module) and `<module>_libs` (what its `__init__.py` loads:
    `libtensorrt_rtx.so.1`, `libnvinfer.so.10`, the ONNX parser). The key hashes them, so a library replaced in place
    at the same version is another builder (store/key.py); the fast path's memo keeps their stat."""
    found: list[Path] = []
    for folder in (site / module, site / f"{module}_bindings", site / f"{module}_libs"):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        found.extend(folder / n for n in names if n.endswith((".so", ".dll")) or ".so." in n)
    return sorted(found)
