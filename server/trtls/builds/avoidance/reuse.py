"""A reuse from the engine store, with nothing imported beyond the standard library and the store: its evidence
record, the output lock around the restore, and the fast path of an unchanged build.

The fast path (`fast_hit`): after a build or a reuse, `.trtls/engines/<name>.hit.json` remembers what the key was
computed from — the recipe file's sha256, the stat (size, mtime_ns, inode) of every file the key read, the builder's
distribution folders, the device, the store settings and the trtls modules that turn a recipe into a job. When all
of that is unchanged, `trtls build --engine NAME` restores the entry without loading the recipe models (pydantic),
the ONNX checks or the event models: ~0.1 s of CPU instead of ~1 s. Anything different — a byte of the recipe, a
touched model, another builder, a trtls upgrade — and the full path runs (it computes the key itself). The recipe's
warnings are not printed on the fast path: the recipe is byte-identical to one that loaded without errors."""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trtls import __version__
from trtls.builds.avoidance.memo import MAX_MEMO_BYTES, Looked, _same_device, look, memo_output, memo_path
from trtls.builds.roots import evidence_error, write_record
from trtls.builds.run_ids import new_run_id
from trtls.core.display import ago
from trtls.core.evidence import runbook_without_worker
from trtls.store.entries import Entry, Refused, RestoreFailed, Store, StoreUnusable
from trtls.store.known_good import KnownGood


def up_to_date_line(src: dict[str, Any]) -> str:
    """The one line a reuse says: `up to date — engine from build demo-… 2 h ago`."""
    return f"up to date — engine from build {src.get('buildId')} {ago(src.get('startedAt'))}"


def pinned_line(pin: dict[str, Any]) -> str:
    """The one line a build serving a rollback's pin says."""
    return f"pinned to build {pin.get('buildId')} by a rollback — trtls build --unpin to go back to the recipe's engine"


class OutputHeld:
    """The output's one-writer lock (builds/supervisor/output_lock.py) for the length of a restore: a restore never
    renames over
    an output another build is writing. `take()` is False while another process holds it. Once taken, the temps a
    killed restore or build left beside the output (`<output name>.trtls-tmp-*`) are removed: whoever wrote them
    held this lock, so none of them is being written now (`within`: the output's write root; None: left alone)."""

    def __init__(self, state_dir: Path, output: Path, build_id: str, engine: str, within: Path | None = None):
        from trtls.builds.supervisor.output_lock import OutputLock, lock_path

        self.lock = OutputLock(lock_path(state_dir / "locks", output), output)
        self.holder = {"buildId": build_id, "pid": os.getpid(), "owner": {"kind": "store restore"}, "engine": engine}
        self.output, self.within = output, within
        self.removed: list[str] = []  # the stale temps this holder removed

    def take(self) -> bool:
        if not self.lock.try_acquire(self.holder):
            return False
        if self.within is not None:
            self.removed = remove_stale_temps(self.output, self.within)
        return True

    def release(self) -> None:
        self.lock.release()


def remove_stale_temps(output: Path, within: Path) -> list[str]:
    """Remove `<output name>.trtls-tmp-*` beside `output` (regular files or links, the link itself), through the
    door; call it only while holding the output's lock. The names removed; one that cannot be is left, unsaid."""
    from trtls.fs import Kind, remove_file
    from trtls.fs.kinds import TEMP_MARK

    prefix = f"{output.name}{TEMP_MARK}"
    try:
        names = [n for n in os.listdir(output.parent) if n.startswith(prefix)]
    except OSError:
        return []
    removed = []
    for name in names:
        try:
            if stat.S_ISDIR(os.lstat(output.parent / name).st_mode):
                continue
            if remove_file(output.parent / name, kind=Kind.engine_output, within=within):
                removed.append(name)
        except OSError:
            continue
    return removed


def reuse_evidence(
    build_id: str,
    engine: str,
    recipe: Path,
    entry: Entry,
    output: Path,
    t0: float,
    store_record: dict[str, Any],
    waited: bool = False,
    fast: bool = False,
    pinned: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The reuse's `summary.json` (written to `.trtls/runs/<build_id>/`), returned. `pinned`: the rollback's pin
    it served (the message says so, and how to go back to the recipe's engine)."""
    src = entry.build
    how = "unchanged since the last run: the recipe was not re-read" if fast else "the key was computed"
    summary = {
        "trtlsVersion": __version__,
        "buildId": build_id,
        "engine": engine,
        "recipe": str(recipe),
        "outcome": "reused",
        "error": None,
        "reusedFrom": {
            "buildId": src.get("buildId"),
            "startedAt": src.get("startedAt"),
            "durationS": src.get("durationS"),
            "storeEntry": str(entry.folder),
            "waitedForIt": waited,
        },
        "engineKey": entry.key,
        **runbook_without_worker(src),  # every record kind carries the runbook's fields (core.evidence)
        "engineArtifact": {
            "action": "kept" if store_record.get("outputAlreadyCurrent") else "restored",
            "kind": "engine",
            "path": str(output),
            "size": entry.size,
            "sha256": entry.sha256,
        },
        "store": store_record,
        "startedAt": t0,
        "durationS": round(time.time() - t0, 3),
        "workerPid": None,
        "notes": [f"no worker started: the engine of key {entry.key[:12]} was in the store ({how})"],
        "message": up_to_date_line(src) if pinned is None else pinned_line(pinned),
        "pinned": pinned,
    }
    path = recipe.parent / ".trtls" / "runs" / build_id / "summary.json"
    try:  # inside the recipe's folder, checked at the write: never through a `.trtls` swapped for a symlink
        write_record(path, json.dumps(summary, indent=2, default=str))
    except OSError as exc:  # the engine is restored; the record could not be written (TRT413): said, not raised
        summary["evidenceError"] = evidence_error(exc, path)
        summary["message"] = f"{summary['message']} — {summary['evidenceError']}"
    return summary


def append_known_good(known: KnownGood, record: dict[str, Any], warnings: list[str]) -> None:
    """Add a known-good record; one that cannot be written (a full disk, `.trtls` swapped for a symlink, the
    record itself a link) is a located warning: the engine is in place, the table's memory of it is not."""
    try:
        why = known.append(record)
    except OSError as exc:
        why = evidence_error(exc, known.path)
    if why:
        warnings.append(str(why))


def remember_reused(
    state_dir: Path,
    history: str,
    entry: Entry,
    build_id: str,
    changes: list[str],
    warnings: list[str],
    stored: bool = True,
) -> None:
    """A reuse is recorded when it changes which engine the table has (not once per unchanged run). `stored`
    False: this machine's store could not keep it (a farm node served it: builds/farm/node_reuse.py)."""
    known = KnownGood(state_dir, history)
    last = known.last()
    if last is not None and last.get("key") == entry.key and last.get("sha256") == entry.sha256:
        return
    append_known_good(
        known,
        {
            **{k: entry.build.get(k) for k in ("buildId", "startedAt", "durationS", "buildConfigHash")},
            "restoredAs": build_id,
            "key": entry.key,
            "sha256": entry.sha256,
            "size": entry.size,
            "stored": stored,
            "reused": True,
            "changes": changes,
            "parts": entry.record.get("parts"),
        },
        warnings,
    )


# -- the fast path: a hit served from the memo (builds/avoidance/memo.py tells a miss before this module loads) ----


def own_memo(state: Path, engine: str, memo: dict[str, Any]) -> bool:
    """Whether the memo that was read is this account's own: the file at its name is this account's (or root's) and
    no other account can write it (`fs.read_bytes(owned=True)`, on the descriptor read), and it says what was read.
    The memo names the output and the store, trust and signing key that serve it, acted on before the recipe is read:
    an account that can write `.trtls/engines` could copy it (it is readable) and change them."""
    from trtls.fs import parse_json, read_bytes

    try:
        return bool(parse_json(read_bytes(memo_path(state, engine), limit=MAX_MEMO_BYTES, owned=True)) == memo)
    except (OSError, ValueError):
        return False


def fast_hit(
    recipe: Path,
    engine: str,
    on_miss: Callable[[dict[str, Any] | None], None] | None = None,
    looked: Looked | None = None,
) -> dict[str, Any] | None:
    """The reuse's summary when nothing the key reads changed since the last run and the store holds the key;
    None → take the full path (which also handles every refusal and warning). `on_miss`: called when the key is known
    (the memo holds) and the store has no entry for it — a build follows (the CLI starts its worker at once) — with
    the job the memo kept (None when it kept none): the job of this build but for its id. `looked`: the memo's answer
    (builds/avoidance/memo.look) when the caller already has it."""
    looked = looked if looked is not None else look(recipe, engine)
    memo = looked.memo
    if memo is None:
        return None
    state = recipe.parent / ".trtls"
    if not own_memo(state, engine, memo):
        return None  # another account's memo (or one others can rewrite): the full path reads the recipe
    s = memo["store"]
    rdir, kfile = s.get("recipeDir"), s.get("signingKeyFile")
    store = Store(
        Path(s["path"]),
        s["mode"],
        s.get("maxSize"),
        trust=s["trust"],
        recipe_dir=Path(rdir) if rdir else None,
        signing_key_file=kfile,
    )
    output = memo_output(memo, recipe)
    if output is None:
        return None  # the recipe's write policy no longer allows the memo's output: the full path says why
    try:
        store.check()  # the store as the full path opens it: placed, trusted (TRT339, TRT340), its key usable
        entry = store.get(str(memo["key"]))
    except (Refused, StoreUnusable, OSError):
        return None  # the full path says why (TRT334, TRT339, TRT340), located
    if entry is None:  # evicted since it was looked at
        if on_miss is not None:
            on_miss(looked.job)
        return None
    if not _same_device(memo):
        return None
    build_id = new_run_id(engine)
    held = OutputHeld(state, output, build_id, engine, within=recipe.parent)
    try:
        if not held.take():
            return None  # a build of this output is running: the full path waits for it
    except OSError:
        return None  # the lock cannot be opened (a symlinked .trtls): the full path says why, located
    t0 = time.time()
    try:  # the output's digest first: one that already holds the entry is never rewritten
        current = not store.restore(entry, output, build_id, recipe.parent, state)  # outside: the full path
    except Refused:
        return None  # quarantined; the full path rebuilds and says so (TRT332)
    except RestoreFailed:
        return None  # the output cannot be written (TRT412/TRT405): the full path's probe says it, with evidence
    except OSError:
        # a symlinked output or folder (TRT118), an immutable output, a read-only or full disk (TRT412/TRT405):
        # the full path's checks say it, located, with evidence
        return None
    finally:
        held.release()
    record: dict[str, Any] = {
        "used": True,
        "why": None,
        "path": str(store.root),
        "mode": store.mode,
        "source": "memo",
        "trust": store.trust,  # who may have written what served this engine, as the full path's record says
        "signingKey": str(store.signing_key_file) if store.signing_key_file else None,
        "warnings": list(store.notes),
        "key": entry.key,
        "waitedFor": None,
        "outputAlreadyCurrent": current,
    }
    from trtls.store.stats import record_hit

    record_hit(store, entry, engine, "fast")
    remember_reused(state, engine, entry, build_id, [], record["warnings"])
    return reuse_evidence(build_id, engine, recipe, entry, output, t0, record, fast=True)
