"""Is an engine up to date? The recipe's engine key (digest cache, no TensorRT) against the table's last
successful build, and the engine at `output` against the one that build wrote — as `make` would ask. Faces render
`Freshness.lens_title` (code lens) and `Freshness.changes` (hint, tree); nothing re-derives it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trtls.builds.supervisor.job import state_dir, worker_job
from trtls.core.display import ago, will_rebuild_text
from trtls.store.diff import key_changes
from trtls.store.key import KeyUnavailable, engine_key, file_sha256
from trtls.store.known_good import KnownGood, Pin


@dataclass(frozen=True)
class Freshness:
    state: str  # up_to_date | will_rebuild | in_store | pinned | pin_damaged | output_differs | never_built | unknown
    # output_differs with `last` None: an engine at `output` and no build of the table recorded (TRT337 too)
    changes: list[str] = field(default_factory=list)
    last: dict[str, Any] | None = None
    # in_store: the store's entry of the recipe's key (its producing build); pinned: the rollback's pin
    source: dict[str, Any] | None = None

    @property
    def lens_title(self) -> str:
        if self.state == "up_to_date" and self.last is not None:
            return f"✓ up to date · built {ago(self.last.get('startedAt'))}"
        if self.state == "pinned" and self.source is not None:
            return f"📌 pinned to build {self.source.get('buildId')}"
        if self.state == "in_store" and self.source is not None:
            return f"✓ in the store · Build Engine restores build {self.source.get('buildId')}"
        if self.state == "will_rebuild" and self.changes:
            more = f" (+{len(self.changes) - 1})" if len(self.changes) > 1 else ""
            return f"▶ Build Engine · {self.changes[0]}{more}"
        if self.state == "pin_damaged":
            return "⚠ the rollback's pin is damaged · Build Engine refuses until --unpin"
        if self.state == "output_differs" and self.last is None:
            return "▶ Build Engine · no build recorded for the engine at output"
        if self.state == "output_differs":
            return "▶ Build Engine · the engine at output is not the last build's"
        return "▶ Build Engine"

    @property
    def hint(self) -> str | None:
        """`will rebuild because: optimization_level 3 → 5` (TRT336's message), or None."""
        if self.state == "will_rebuild" and self.changes:
            return will_rebuild_text(self.changes)
        if self.state == "pin_damaged" and self.changes:  # what a build says (TRT338), and what ends it
            return f"{self.changes[0]}; `trtls build --unpin` removes it"
        if self.state == "output_differs" and self.last is None:
            return (
                "the engine at output was not built here: no build of this engine table is recorded"
                " (built elsewhere, or by an older trtls)"
            )
        if self.state == "output_differs":
            return "the engine at output is not the one the last build wrote (no record of it, or other bytes)"
        return None


def engine_freshness(loaded: Any, engine: str) -> Freshness:
    """Never raises: a key that cannot be computed (a missing model, no builder installed) is `unknown`."""
    sdir = state_dir(loaded.path)
    last = KnownGood(sdir, engine).last()
    eng = loaded.engine(engine)
    if eng.worker:  # an external worker's builds are not keyed nor recorded: nothing to compare
        return Freshness("unknown", last=last) if last is not None else Freshness("never_built")
    pins = Pin(sdir, engine)
    pin = pins.read()
    damaged = pins.damaged() if pin is None else None
    if damaged is not None:  # Build Engine refuses it (builds/avoidance/pinned.settle_pin: TRT338) — said before
        return Freshness("pin_damaged", [f"the rollback's pin {pins.path} {damaged}"], last)
    job = worker_job(loaded, engine, "freshness")
    if last is None:  # no build of this table recorded here: an engine at `output` is one no record describes
        return Freshness("output_differs") if _is_file(Path(job["output"])) else Freshness("never_built")
    try:
        from trtls.builds.cuda import cuda_driver

        key = engine_key(job, sdir, cuda_driver())
        out_sha = file_sha256(Path(job["output"]), sdir)
    except (KeyUnavailable, OSError):
        return Freshness("unknown", last=last)
    if pin is not None and pin.get("recipeKey") == key.hex:  # a rollback that sticks until the recipe changes
        return Freshness("pinned", last=last, source=pin)
    if key.hex != last.get("key"):
        parts = last.get("parts")
        changes = key_changes(parts, key.parts) if isinstance(parts, dict) else ["the engine key changed"]
        stored = _stored_build(loaded, key.hex)
        if stored is not None:  # a reverted change: the build restores it, it does not rebuild
            return Freshness("in_store", changes or ["the engine key changed"], last, stored)
        return Freshness("will_rebuild", changes or ["the engine key changed"], last)
    if out_sha != last.get("sha256"):
        return Freshness("output_differs", last=last)
    return Freshness("up_to_date", last=last)


def _stored_build(loaded: Any, key: str) -> dict[str, Any] | None:
    """The producing build of the store's entry of `key`, looked up read-only (nothing quarantined, marked used or
    fetched from a remote store), or None: not there, damaged, not trusted, no store."""
    from trtls.store.config import store_config
    from trtls.store.entries import Refused, Store, StoreUnusable

    try:
        config = store_config(loaded.recipe.store, loaded.base_dir)
        if config is None:
            return None
        entry = Store.read_only(config).get(key)
    except (Refused, StoreUnusable, OSError, ValueError):
        return None
    return entry.build if entry is not None else None


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False


def build_lens_title(loaded: Any, engine: str) -> str:
    """The Build Engine lens's title: `✓ up to date · built 2 h ago` / `✓ in the store · Build Engine restores build
    X` / `📌 pinned to build X` / `▶ Build Engine · onnx demo.onnx bytes changed` / `▶ Build Engine` (never built,
    or the recipe has errors)."""
    if loaded.recipe is None or engine not in loaded.recipe.engines:
        return "▶ Build Engine"
    return engine_freshness(loaded, engine).lens_title


def freshness_findings(loaded: Any) -> list[Any]:
    """TRT336 (will rebuild: what changed) on each engine table, TRT338 (its rollback's pin is damaged: a build
    refuses it), TRT337 (the engine at output is not the last build's) on its `output` — computed from the recipe and
    the digest cache, without TensorRT."""
    from trtls.core.findings import Finding, Origin, Severity

    out: list[Any] = []
    if loaded.recipe is None:
        return out
    for engine in loaded.recipe.engines:
        fresh = engine_freshness(loaded, engine)
        if fresh.state == "will_rebuild" and fresh.hint:
            out.append(
                Finding(
                    "TRT336",
                    Severity.information,
                    fresh.hint,
                    ("engines", engine),
                    Origin.build,
                    data={"changes": fresh.changes},
                )
            )
        elif fresh.state == "pin_damaged" and fresh.hint:
            out.append(Finding("TRT338", Severity.error, fresh.hint, ("engines", engine), Origin.build))
        elif fresh.state == "output_differs" and fresh.hint:
            out.append(
                Finding("TRT337", Severity.information, fresh.hint, ("engines", engine, "output"), Origin.build, True)
            )
    return out
