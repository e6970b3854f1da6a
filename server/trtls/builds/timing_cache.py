"""Timing-cache policy: what this build does with its cache, decided explicitly and recorded.

Decisions: cold, reused, updated, discarded, quarantined, not_applicable.
- A cache is only reused when its identity (builder module and version, device, the settings that
  change tactic choice) matches this build's; a mismatch or a corrupted file is moved to quarantine
  and the build runs cold. Corruption never raises in TensorRT: it is seen in the logger.
- A cancelled or failed build never writes its cache back ("discarded").
- Saving merges with what is on disk under a file lock and replaces the file atomically: two builds
  sharing a cache never lose each other's timings or leave a torn file (trtexec/Polygraphy overwrite in place).
- TensorRT-RTX: timing-cache calls are no-ops, so the decision is not_applicable with that reason,
  except that a corrupted file is still detected (the deserialisation path is real) and quarantined.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from trtls.builds.artifacts import quarantine
from trtls.builds.roots import nearest_folder
from trtls.fs import (
    Kind,
    atomic_write_bytes,
    atomic_write_text,
    ensure_folder,
    held_lock,
    parse_json,
    read_bytes,
    read_text,
)

NO_DEVICE_MARKER = "Cuda Runtime"
CORRUPTION_MARKERS = ("Failed to deserialize timing cache", "The timing cache will not be used")
TACTIC_SETTINGS = (
    "optimization_level",
    "max_num_tactics",
    "avg_timing_iterations",
    "tiling_level",
    "hardware_compatibility_level",
    "compute_capabilities",
    "max_aux_streams",
)
RTX_REASON = "TensorRT-RTX ignores timing caches (its calls are no-ops; it keeps a runtime cache instead)"
MAX_CACHE_BYTES = 4 << 30  # a timing cache of every tactic of a large network is tens of MB
MAX_META_BYTES = 1 << 20  # the sidecar: an identity and a sha256
QUARANTINED = "timing cache quarantined: {}; this build ran cold"  # the reason of every plan that set a cache aside


def cache_identity(environment: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    return {
        "module": environment.get("module"),
        "version": environment.get("version"),
        "device": environment.get("device_name"),
        "compute_capability": environment.get("compute_capability"),
        "settings": {k: settings.get(k) for k in TACTIC_SETTINGS},
    }


def identity_path(cache: Path) -> Path:
    return cache.with_name(cache.name + ".identity.json")


class CachePlan:
    """What the build does with its timing cache, and why. A plain class (the worker imports this module before
    TensorRT, and `dataclasses` would bring `inspect`, `ast` and `dis`): fields, equality and repr as a dataclass's."""

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value: unhashable, as the dataclass was
    _FIELDS = ("path", "mode", "decision", "reason", "data", "quarantined_to", "identity", "within")

    def __init__(
        self,
        path: Path | None,
        mode: str,
        decision: str,
        reason: str,
        data: bytes | None = None,  # bytes to hand to the builder
        quarantined_to: str | None = None,
        identity: dict[str, Any] | None = None,
        within: Path | None = None,  # the folder its writes must stay in (the job's timing_cache.write_root)
    ) -> None:
        self.path, self.mode, self.decision, self.reason = path, mode, decision, reason
        self.data, self.quarantined_to = data, quarantined_to
        self.identity: dict[str, Any] = {} if identity is None else identity
        self.within = within

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self._FIELDS)

    def __repr__(self) -> str:
        return f"CachePlan({', '.join(f'{k}={getattr(self, k)!r}' for k in self._FIELDS)})"


def plan_cache(
    path: Path | None,
    mode: str,
    identity: dict[str, Any],
    supported: bool,
    optimization_level: int,
    quarantine_dir: Path,
    within: Path | None = None,
) -> CachePlan:
    """Before the build: decide whether the file on disk may be read. `within`: the folder the cache's writes must
    stay in (the job's `timing_cache.write_root`; by default its nearest existing folder).

    trtls records the sha256 of every cache it writes beside it, so a cache that changed on disk
    (truncated, flipped bytes, replaced) is caught here, before TensorRT — which would only log it,
    or not notice at all."""
    root = within if within is not None or path is None else nearest_folder(path.parent)

    def planned(decision: str, reason: str, **more: Any) -> CachePlan:
        return CachePlan(path, mode, decision, reason, identity=identity, within=root, **more)

    def quarantined(file: Path, why: str, said: str) -> CachePlan:
        dest = _quarantine_pair(file, quarantine_dir, why, root)
        return planned("quarantined", QUARANTINED.format(said), quarantined_to=dest)

    if path is None or mode == "off":
        return planned("cold", "no timing cache configured" if path is None else "timing cache mode is off")
    if optimization_level == 0 and supported:
        return planned("not_applicable", "optimization level 0 ignores timing caches")
    if not path.is_file():
        return planned("cold" if supported else "not_applicable", "no cache file yet" if supported else RTX_REASON)
    data = read_bytes(path, limit=MAX_CACHE_BYTES, follow=True)  # a FIFO or a device is refused, never read
    meta = _read_meta(path)
    if meta is not None and meta.get("sha256") != hashlib.sha256(data).hexdigest():
        why = (
            f"cache bytes changed since trtls wrote them (sha256 mismatch, {len(data)} bytes on disk, "
            f"{meta.get('size')} written)"
        )
        return quarantined(path, why, why)
    if supported and meta is not None and meta.get("identity") != identity:
        stored = meta.get("identity") or {}
        changed = ", ".join(sorted(k for k in identity if stored.get(k) != identity.get(k)))
        return quarantined(path, f"cache identity changed: {changed}", f"made for another build identity ({changed})")
    decision = "reused" if supported else "not_applicable"
    reason = "valid cache loaded" if supported else RTX_REASON
    if meta is None:  # a cache trtls did not write: nothing to check its bytes against but TensorRT itself
        reason = (
            ("cache loaded" if supported else RTX_REASON)
            + "; this file was not written by trtls (no sha256 sidecar), "
            + f"so only TensorRT can judge its {len(data)} bytes"
        )
    return planned(decision, reason, data=data)


def after_load(plan: CachePlan, logged: list[str], set_ok: bool, quarantine_dir: Path) -> CachePlan:
    """After handing the bytes to TensorRT: the logger, not an exception, says whether they were bad."""
    bad = [m for m in logged if any(marker in m for marker in CORRUPTION_MARKERS)]
    if plan.data is None or (not bad and set_ok):
        return plan
    if any(NO_DEVICE_MARKER in m for m in logged):
        # Without a CUDA device TensorRT cannot deserialise any cache, good or bad: inconclusive, not suspect.
        plan.reason += (
            "; TensorRT could not check it here (it needs a CUDA device to deserialise any cache, good or bad),"
            " so its content is unverified and the file is left in place"
        )
        return plan
    why = bad[0] if bad else "set_timing_cache returned False"
    plan.quarantined_to = _quarantine_pair(plan.path, quarantine_dir, why, plan.within)  # type: ignore[arg-type]
    plan.decision, plan.reason, plan.data = "quarantined", QUARANTINED.format(why), None
    return plan


def after_build(
    plan: CachePlan,
    outcome: str,
    supported: bool,
    new_bytes: Callable[[], bytes] | None,
    combine: Callable[[bytes, bytes], bytes | None],
) -> tuple[CachePlan, bool]:
    """After the builder returned: write back only from a successful build in read_write mode."""
    if plan.decision in ("quarantined", "not_applicable") or plan.path is None or plan.mode == "off":
        return plan, False
    if outcome != "built":
        plan.decision = "discarded"
        plan.reason = f"the {outcome} build's timings were discarded; the cache on disk is untouched"
        return plan, False
    if plan.mode != "read_write" or not supported or new_bytes is None:
        return plan, False
    save_merged(plan.path, new_bytes(), plan.identity, combine, within=plan.within)
    plan.decision, plan.reason = "updated", "new timings merged into the cache under a lock and written atomically"
    return plan, True


@contextmanager
def cache_lock(path: Path, within: Path | None = None) -> Iterator[None]:
    """An exclusive flock on `<path>.lock`, inside `within` (by default the lock's nearest existing folder); never
    through a symlink planted at the lock's name (it would create or lock a file elsewhere)."""
    lock = path.with_name(path.name + ".lock")
    root = within if within is not None else nearest_folder(lock.parent)
    ensure_folder(lock.parent, within=root)
    with held_lock(lock, kind=Kind.cache, within=root):
        yield


def save_merged(
    path: Path,
    new: bytes,
    identity: dict[str, Any],
    combine: Callable[[bytes, bytes], bytes | None],
    within: Path | None = None,
) -> None:
    """Merge `new` into the file under an exclusive lock; a failed combine keeps the new timings alone. `within`:
    the folder the cache must stay in (by default its nearest existing folder)."""
    root = within if within is not None else nearest_folder(path.parent)
    with cache_lock(path, within=root):
        merged = new
        meta = _read_meta(path)
        if path.is_file() and meta is not None and meta.get("identity") == identity:
            old = read_bytes(path, limit=MAX_CACHE_BYTES, follow=True)
            if hashlib.sha256(old).hexdigest() == meta.get("sha256"):  # never merge from a damaged file
                merged = combine(old, new) or new
        atomic_write_bytes(path, merged, kind=Kind.cache, within=root)
        meta = {"identity": identity, "sha256": hashlib.sha256(merged).hexdigest(), "size": len(merged)}
        atomic_write_text(identity_path(path), json.dumps(meta, sort_keys=True), kind=Kind.cache, within=root)


def _read_meta(path: Path) -> dict[str, Any] | None:
    """The sidecar trtls writes with every cache: its identity and the sha256 of its bytes (never through a link)."""
    try:
        meta = parse_json(read_text(identity_path(path), limit=MAX_META_BYTES))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def _quarantine_pair(path: Path, quarantine_dir: Path, reason: str, within: Path | None) -> str:
    root = within if within is not None else nearest_folder(path.parent)
    dest = quarantine(path, quarantine_dir, reason, kind=Kind.cache, within=root)
    ident = identity_path(path)
    if ident.exists():
        quarantine(ident, quarantine_dir, reason, kind=Kind.cache, within=root)
    return str(dest)
