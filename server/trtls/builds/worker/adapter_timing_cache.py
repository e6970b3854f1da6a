"""The timing-cache calls on TensorRT objects the worker already holds (a builder config, a cache): this module
imports no TensorRT; it wraps the calls so TensorRT-RTX's no-op warnings stay quiet and the known hang is avoided.
Re-exported by builds/worker/adapter.py, which the worker calls."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trtls.builds.worker.adapter import BuilderModule


def timing_cache_supported(bm: BuilderModule) -> bool:
    """TensorRT-RTX keeps the calls but they do nothing (it has a runtime cache instead).

    Measured on TRT-RTX 1.7: create_timing_cache works silently; set/serialize/combine/reset warn;
    config.get_timing_cache() returns None; set_timing_cache returns True.
    """
    return not bm.is_rtx


@contextlib.contextmanager
def _no_rtx_timing_cache_warning() -> Iterator[None]:
    # TRT-RTX warns "... Timing cache operations are no-ops in TensorRT-RTX" (DeprecationWarning) on
    # every call; callers ask timing_cache_supported() instead, so here the warning is only noise.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*[Tt]iming cache")
        yield


def create_timing_cache(config: Any, data: bytes = b"") -> Any:
    with _no_rtx_timing_cache_warning():
        return config.create_timing_cache(bytes(data))


def set_timing_cache(config: Any, cache: Any, ignore_mismatch: bool) -> bool:
    """True even for a corrupted cache (TensorRT logs an ERROR and builds cold): watch the logger."""
    with _no_rtx_timing_cache_warning():
        return bool(config.set_timing_cache(cache, ignore_mismatch))


def serialize_timing_cache(cache: Any) -> bytes:
    """b"" for no cache (TRT-RTX's config.get_timing_cache() returns None)."""
    if cache is None:
        return b""
    with _no_rtx_timing_cache_warning():
        return bytes(cache.serialize())


def combine_timing_cache(a: Any, b: Any, ignore_mismatch: bool = False) -> bool:
    """Merge ``b`` into ``a``; False when TensorRT refuses (different TensorRT version or device)."""
    if a is b:
        return True  # measured: cache.combine(cache) never returns on TRT-RTX 1.7 (self-deadlock)
    with _no_rtx_timing_cache_warning():
        return bool(a.combine(b, ignore_mismatch))
