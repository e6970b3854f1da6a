"""The builder's shared libraries, loaded on a thread of their own while the worker's modules import (issue 31).

Importing TensorRT-RTX is ~38 ms here (2 cores, 2026-12-05), ~20 of them the loader mapping and relocating
`libtensorrt_rtx.so.1` (234 MB); the worker imported it only after its own modules, one after the other. Started first
thing in the worker (`trtls.builds.worker.__main__`), a thread loads what the builder's import would load first, with
libc's `dlopen` and the flags `ctypes.CDLL` gives (`builds.cuda.load_library`: the loader runs without the GIL), so
the import later finds the libraries loaded and takes the same handles (a library is loaded once per process). A
worker alone reaches TensorRT imported 13 ms sooner here; beside a CLI's own start on 2 cores there is no idle core to
load them on, and a build starts as before (docs/performance.md, 2026-12-05).

The loader has one lock: any other `dlopen` meanwhile waits for the builder's, and the import system's waits holding
the GIL, which would stop every thread. So the C modules the worker's own imports load are loaded first
(`load_extensions`); its modules after that are pure Python (tests/builds/test_builder_prefetch.py holds it). Only
the libraries of a `<module>_libs` package beside the builder `--preload` names (`tensorrt_rtx_libs`, `tensorrt_libs`:
the wheels' own layout), and nothing is imported from it: a library that does not load is left to the builder's
import, which reports it as before.
"""

from __future__ import annotations

import importlib.util
import os
import threading

from trtls.builds.cuda import load_library
from trtls.core.vocabulary import BUILDER_MODULES


def prefetch_builder(argv: list[str]) -> threading.Thread | None:
    """Start loading the shared libraries of the builder `--preload [MODULE]` names in `argv` (`auto`, or none: the
    first of BUILDER_MODULES that is installed); the thread doing it, or None when there is nothing to load. Join it
    before the interpreter finalizes (no thread inside the loader at exit)."""
    if "--preload" not in argv:
        return None
    named = argv[argv.index("--preload") + 1 :][:1]
    paths = builder_libraries(BUILDER_MODULES if not named or named[0] == "auto" else tuple(named))
    if not paths:
        return None
    load_extensions()
    thread = threading.Thread(target=load_libraries, args=(paths,), name="trtls-builder-libs", daemon=True)
    thread.start()
    return thread


def load_extensions() -> None:
    """The C modules the worker's imports and threads load after this one (hashlib's OpenSSL, json, queue, fcntl,
    subprocess for platform's `uname -p`), each a dlopen that would otherwise wait behind the builder's libraries."""
    import _heapq  # noqa: F401
    import _json  # noqa: F401
    import _posixsubprocess  # noqa: F401
    import _queue  # noqa: F401
    import fcntl  # noqa: F401
    import math  # noqa: F401
    import resource  # noqa: F401
    import select  # noqa: F401

    try:
        import _blake2  # noqa: F401
        import _hashlib  # noqa: F401
    except ImportError:  # a Python without OpenSSL's hashes: hashlib's own then, loaded when first used
        pass


def builder_libraries(names: tuple[str, ...]) -> list[str]:
    """The shared libraries in the `<name>_libs` package of the first of `names` that is installed, largest first
    (the builder's core before its parser, which needs it); [] when none is, or it has no such package."""
    for name in names:
        try:
            if importlib.util.find_spec(name) is None:
                continue
            spec = importlib.util.find_spec(f"{name}_libs")
        except (ImportError, ValueError):
            continue
        found = []
        for folder in list(spec.submodule_search_locations or [])[:1] if spec is not None else []:
            try:
                with os.scandir(folder) as entries:
                    found = [(e.stat().st_size, e.path) for e in entries if ".so" in e.name and e.is_file()]
            except OSError:
                found = []
        return [path for _, path in sorted(found, reverse=True)]
    return []


def load_libraries(paths: list[str]) -> None:
    """Load each of `paths`; one that does not load is skipped (the builder's import says what is wrong)."""
    for path in paths:
        load_library(path)
