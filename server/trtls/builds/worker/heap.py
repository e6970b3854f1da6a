"""Every thread of the worker allocates from glibc's main malloc arena, as a build on a script's main thread does.

TensorRT builds on the worker's builder thread (builds/worker/build.py), not on its main thread, and glibc gives each
new thread an arena of its own: a heap that hands the free memory at its top back to the kernel as soon as it passes
the trim threshold (`heap_trim`), so the builder's next growth faults the same pages in again. The main arena grows
with `brk` and adapts its thresholds to the program. Measured on `demo`'s `build_serialized_network` (2 cores, 20
interleaved runs each, 2026-12-05; benchmarks/probe_builder_heap.py, docs/performance.md "The builder's heap"): 399 ms
on a script's main thread, 422 ms on a second thread, 402 ms on a second thread sharing the main arena; a whole
`trtls build` of `demo` ~20 ms sooner. A 64 MiB top pad did as well on `demo`, but turns off glibc's sliding mmap
threshold (43 % more page faults on `large`) and was ~2 % slower on `large` once; sharing the arena was within
`large`'s own spread both times.

Why sharing is safe here: a TensorRT-RTX build runs on one thread (CPU time = wall time, 2 and 16 cores), and the
worker's other threads (events, the control line, the log relay) allocate little. The limit is read when a thread
first needs an arena of its own, once per process: so it is set first of all, before the worker starts any thread
(`__main__`, `farm/preloaded_worker`). A malloc policy the person chose (any `MALLOC_*` variable or a `glibc.malloc`
tunable in their environment) is theirs: nothing is changed then. Not glibc (musl, macOS): nothing.
"""

from __future__ import annotations

import os
import sys

M_ARENA_MAX = -8  # glibc's malloc.h

_set: int | None = None  # the arena limit this process set, for the build's environment record


def chosen_by_person(environ: dict[str, str] | None = None) -> bool:
    """Whether the environment already sets a malloc policy (glibc reads these at the process's start)."""
    env = os.environ if environ is None else environ
    if any(name.startswith("MALLOC_") for name in env):  # MALLOC_ARENA_MAX, MALLOC_TOP_PAD_, MALLOC_CHECK_ …
        return True
    return "glibc.malloc." in env.get("GLIBC_TUNABLES", "")


def share_main_arena() -> int | None:
    """Limit this process to glibc's main arena (see the module doc); the limit set (1), or None where nothing was
    changed. Call before the process starts a thread."""
    global _set
    if not sys.platform.startswith("linux") or chosen_by_person():
        return None
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return None
    except (ValueError, OSError):
        return None  # not glibc
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    if mallopt(M_ARENA_MAX, 1):
        _set = 1
    return _set


def arena_limit_set() -> int | None:
    """What `share_main_arena` set in this process (None: nothing)."""
    return _set
