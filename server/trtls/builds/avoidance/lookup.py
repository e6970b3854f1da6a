"""Build avoidance: the engine store between the recipe and the supervisor (docs/store.md).

    recipe ──► engine key (digest cache) ──► store hit? ── yes ──► atomic restore + evidence "reused"
                                                 │ no (single-flight lock on the key)
                                                 ▼
                                    supervisor ──► worker ──► engine ──► publish to the store + known-good record

Every face goes through trtls.app (`request_build`, `request_matrix`), which calls `prepare` → `reuse_or_lock` → (on
a miss) the supervisor → `attach` (`after_build` when the build ends). A hit imports no TensorRT, starts no worker
and loads no build core (its state, events, view): the key is computed from the worker job (builds.supervisor.job)
with the digest cache. Builds with injected faults, an external worker, or `--no-store` are not keyed (what an
external worker reads is unknown)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trtls.builds.avoidance.pinned import serve_pin, settle_pin
from trtls.builds.avoidance.restore import WAIT_POLL_S, output_root, remember, restore_hit
from trtls.builds.avoidance.reuse import OutputHeld, ago, append_known_good
from trtls.builds.roots import evidence_error, write_record
from trtls.builds.supervisor.job import new_build_id, state_dir, worker_job
from trtls.core.cancel import CancelToken
from trtls.store.config import store_config
from trtls.store.diff import key_changes
from trtls.store.entries import Entry, LeftInPlace, NotTrusted, Refused, Store
from trtls.store.farm_keys import FULL_TRT_ON_CLUSTER, builder_mismatch, full_tensorrt_on_cluster, published_by_node
from trtls.store.key import KeyUnavailable, engine_key, inputs_changed
from trtls.store.known_good import KnownGood
from trtls.store.lock import KeyLock
from trtls.store.quarantined import quarantined_since
from trtls.store.stats import record_miss
from trtls.store.use import NO_STORE, StoreUse

if TYPE_CHECKING:
    from trtls.builds.supervisor.build import Build


def prepare(
    loaded: Any,
    engine: str,
    overrides: dict[str, Any] | None = None,
    *,
    no_store: bool = False,
    rebuild: bool = False,
    bypass: str | None = None,
    faults: dict[str, Any] | None = None,
    history: str | None = None,
    unpin: bool = False,
    job: dict[str, Any] | None = None,
) -> StoreUse:
    """Key the build and open its store. Raises StoreUnusable (TRT330/TRT331) for a store folder that cannot
    serve its mode; trtls.app places it on the recipe. A rollback's pin is settled here (kept, lifted
    by a changed key, or removed by `unpin`: builds/avoidance/pinned.py). `job`: the worker job the build will run,
    built once
    by the caller (trtls.app); keyed here, never changed (the key reads no build id)."""
    eng = loaded.engine(engine)
    sdir = state_dir(loaded.path)
    config = store_config(loaded.recipe.store, loaded.base_dir)
    job = job if job is not None else worker_job(loaded, engine, "key", overrides)
    use = StoreUse(engine, sdir, config, Path(job["output"]), history or engine, rebuild=rebuild)
    use.job = job
    use.write_root = Path(job["write_root"])  # judged now, at load: a restore never judges the output's folder again
    if eng.worker:
        use.not_used = "an external worker builds this engine: what it reads is unknown, so it is not keyed"
        return use
    if faults:
        use.not_used = "a build with injected faults is never stored"
        return use
    from trtls.builds.avoidance.memo import key_device  # the device the key covers (no TensorRT)

    use.device = key_device(sdir, use.history)
    use.overridden = bool(overrides)
    try:
        use.key = engine_key(job, sdir, use.device)
    except KeyUnavailable as exc:
        use.not_used = f"no engine key: {exc}"
        return use
    if full_tensorrt_on_cluster(loaded.recipe.cluster, use.key):
        use.not_used = FULL_TRT_ON_CLUSTER
    use.last = KnownGood(sdir, use.history).last()
    if use.last is not None and use.last.get("key") != use.key.hex and isinstance(use.last.get("parts"), dict):
        use.changes = key_changes(use.last["parts"], use.key.parts)
    settle_pin(use, unpin)
    if bypass is not None:
        use.not_used = bypass
    elif no_store:
        use.not_used = NO_STORE
    elif config is None:
        use.not_used = 'the store is off ([store] mode = "off" or TRTLS_STORE=off)'
    if use.not_used is None and config is not None:
        use.store = Store.from_config(config)  # its trust, its signing key, the recipe's folder
        use.store.stop = CancelToken()  # the lookup's cancel state: set, it cuts a remote fetch (StoreUse.looked_up)
        use.store.check()
    return use


def find_entry(use: StoreUse, remote: bool = True) -> Entry | None:
    """The key's entry (a local miss asks the remote store unless `remote` is False); damage and distrust said."""
    assert use.store is not None and use.key is not None
    try:
        return use.store.get(use.key.hex, remote)
    except NotTrusted as exc:  # may be whole, but someone the store does not trust could have written it
        use.warnings.append(f"TRT340 {exc}")
        return None
    except Refused as exc:
        use.damaged = str(exc)
        said = f"{'TRT342' if isinstance(exc, LeftInPlace) else 'TRT334'} {exc}"  # left in place: every build
        use.warnings += [said] if said not in use.warnings else []  # looked up twice (before and after the lock)
        return None


def _missed(use: StoreUse, loaded: Any, build_id: str, count: bool = True) -> None:
    """A build runs: say why when the entry its table last used was quarantined since (by this build's fast path or
    any other process: TRT332, `rebuiltBecause`), remove the temps a killed restore left beside the output, and
    count the miss (store statistics; `count` False: a matrix cell's is counted when it ends, `after_build`)."""
    assert use.store is not None and use.key is not None
    if use.damaged is None and not use.rebuild and use.last is not None:
        since = use.last.get("startedAt")
        found = quarantined_since(use.store.root, use.key.hex, since if isinstance(since, (int, float)) else None)
        if found is not None:
            use.damaged = found[1]
            use.warnings.append(
                f"TRT332 store entry {use.key.hex[:12]} was damaged ({found[1]}) and quarantined {ago(found[0])};"
                " the engine is rebuilt"
            )
    held = OutputHeld(use.state_dir, use.output, build_id, use.engine, within=output_root(use, loaded.path))
    with contextlib.suppress(OSError):
        if held.take():  # not waited for: a build of this output that runs now cleans them when it restores
            held.release()
    if count:
        record_miss(use.store, use.key.hex, use.engine, use.rebuilt_because())


async def reuse_or_lock(
    use: StoreUse,
    loaded: Any,
    build_id: str | None = None,
    say: Callable[[str], None] | None = None,
    wait: bool = True,
    on_wait: Callable[[str], None] | None = None,
    count_miss: bool = True,
) -> dict[str, Any] | None:
    """A hit: the output restored and the reuse's evidence written; returns that summary. A miss: returns None,
    holding the key's lock when the store is writable (the caller builds, then calls `after_build`). Two processes
    on one key: the second waits for the first's lock, then reuses its entry — or builds itself when the first
    did not publish (cancelled, failed, killed). `on_wait(holder)`: once, when it starts waiting (`pid build-id`). A
    rollback's pin is served instead of the key's entry (PinUnavailable when it cannot be). `count_miss` False: a
    miss is not counted in the store's statistics now (a matrix cell's: `after_build` counts how it ended)."""
    if use.store is None or use.key is None:
        return None
    build_id = build_id or new_build_id(use.engine)
    if (use.pin is not None or use.pin_damaged is not None) and not use.rebuild:
        return await serve_pin(use, loaded.path, build_id)  # PinUnavailable: nothing is built over the rollback
    lock = KeyLock(use.store.root, use.key.hex) if use.store.writable else None
    waited = False
    while True:
        entry = None if use.rebuild else await use.looked_up(lambda: find_entry(use))  # off the event loop
        if entry is not None:
            if lock is not None:
                lock.release()
            summary = await restore_hit(use, loaded.path, entry, build_id, waited)
            if summary is not None:
                return summary
        if lock is None or lock.try_acquire(build_id):
            use.lock = lock
            if lock is not None and lock.note is not None and lock.note not in use.warnings:
                use.warnings.append(lock.note)  # another account's lock file it can neither write nor read
            if entry is None and not use.rebuild and await use.looked_up(lambda: find_entry(use)) is not None:
                continue  # published between our look and our lock: reuse it
            _missed(use, loaded, build_id, count_miss)
            return None
        if not wait:
            _missed(use, loaded, build_id, count_miss)
            return None  # another process builds this key; the caller builds too (no lock: its publish is a no-op)
        if not waited:
            use.waited_for = lock.holder()
            if on_wait is not None:
                on_wait(use.waited_for)
            if say is not None:
                say(f"waiting for build {use.waited_for} of the same engine key (another process) — it will be reused")
        waited = True
        await asyncio.sleep(WAIT_POLL_S)


def after_build(use: StoreUse, build: Build, count: bool = False) -> dict[str, Any]:
    """After a real build: publish a built engine, remember it as known-good, add the key, the store's record and
    what changed since the last build to the evidence (summary.json rewritten atomically, and folded into the build's
    state as a new `Recorded`: a listener that comes after, a view, reads it there). A farm cell its node
    served from the remote store (`reused`) is kept as a local reuse is (builds/avoidance/node_served.py
    `keep_node_served`: the local entry, the known-good record, one hit). `count`: a matrix cell, whose lookup
    counted nothing: a miss is counted now unless its node served it (a hit, counted once). Releases the lock."""
    try:
        written = build.state.record
        # a copy (the state changes by a fold only): the keys added here are top-level, so a shallow one
        summary = dict(written) if written is not None else {}
        if use.key is not None:
            summary["engineKey"] = use.key.hex
            if build.outcome != "reused":  # a farm node served it from the remote store: nothing was rebuilt
                summary["rebuiltBecause"] = use.rebuilt_because()
        if build.outcome == "built" and use.key is not None:
            art = summary.get("engineArtifact") or {}
            record = {
                "buildId": build.id,
                "engine": build.engine,
                "recipe": str(build.recipe_path),
                "startedAt": build.started_at,
                "durationS": summary.get("durationS"),
                "buildConfigHash": build.config_hash,
                "tensorrtVersion": summary.get("tensorrtVersion"),
                "builderModule": summary.get("builderModule"),
                "publishedBy": {"hostname": os.uname().nodename, "pid": os.getpid()},  # on a farm: not a node
            }
            stored = _publish(use, build.output, record, art.get("sha256"), summary)
            known = {**record, "key": use.key.hex, "sha256": art.get("sha256"), "size": art.get("size")}
            known.update(stored=stored, changes=use.changes, parts=use.key.parts)
            # two files, each its own atomic write: the memo on a thread beside the known-good record, their fsyncs
            # issued together (~2 ms of the build's end here, issue 31); an error in either is raised as before
            with ThreadPoolExecutor(1, thread_name_prefix="trtls-memo") as pool:
                # --no-store: its job is remembered for the next one
                memo = pool.submit(remember, use, build.recipe_path) if stored or use.not_used == NO_STORE else None
                append_known_good(KnownGood(use.state_dir, use.history), known, use.warnings)
            if memo is not None:
                memo.result()
        elif build.outcome == "reused" and use.key is not None:
            from trtls.builds.avoidance.node_served import keep_node_served

            keep_node_served(use, build)
        if count and build.outcome != "reused" and use.store is not None and use.key is not None:
            record_miss(use.store, use.key.hex, use.engine, use.rebuilt_because())
        summary["store"] = use.record()
        if written is not None:
            path = build.evidence_dir / "summary.json"
            try:  # inside the recipe's folder, checked at the write (a .trtls swapped for a symlink is refused)
                write_record(path, json.dumps(summary, indent=2, default=str))
            except OSError as exc:
                summary["store"]["warnings"].append(evidence_error(exc, path))
            from trtls.core.build_state import Recorded  # loaded with the build it folds into

            build.fold(Recorded(summary))
        return summary
    finally:
        use.release()


def _publish(use: StoreUse, engine: Path, record: dict[str, Any], sha: str | None, summary: dict[str, Any]) -> bool:
    if use.store is None or use.key is None:
        return False
    # the record this build just wrote: a farm cell built by another builder; an input changed while it was built.
    # The summary's model is imported here, after the build: a miss's job goes to its worker before (app/build.py)
    from trtls.core.summary_record import Summary

    mismatch = builder_mismatch(use.key, Summary.written(summary)) or inputs_changed(use.key, record["startedAt"])
    if mismatch is not None:
        use.warnings.append(mismatch)
        use.store.upload.skipped(mismatch)  # what a stop now cuts (store/upload_state.py): no upload
        record["keyMismatch"] = mismatch  # the known-good record says why it was not stored
        return False
    if use.store.mode != "read_write":
        use.warnings.append("the store is read-only (mode = read): the engine was not stored")
        use.store.upload.skipped("the store is read-only (mode = read)")
        return False
    try:  # a farm node that published this key to the remote already: not sent twice (builds/farm/node_store.py)
        pushed = published_by_node(summary.get("notes") or [], use.key.hex)
        if pushed:
            use.store.upload.skipped("a farm node sent the engine to the remote store already")
        use.store.publish(use.key.hex, use.key.parts, engine, record, sha, push=not pushed, staged=use.take_staged())
        return True
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename and exc.strerror else ""  # what refused it (an entry's folder)
        use.warnings.append(f"TRT333 the engine is built at {engine} but was not stored: {where}{exc.strerror or exc}")
        use.store.upload.skipped(f"the engine was not stored in the local store: {exc.strerror or exc}")
        return False


def upload_a_stop_cuts(use: StoreUse, build: Build) -> str | None:
    """The remote store (its URL as shown) whose upload of `build`'s engine a stop of the build cuts now: a built
    engine whose store's upload is sending, or still to come from a store that would send it (`Store.upload`, read
    from the loop while the end publishes on its thread: store/upload_state.py); None otherwise — nothing was built,
    the upload is done or the store skips it (a farm node sent it, the key did not match, the remote was down)."""
    if use.store is None or build.outcome != "built":
        return None
    return use.store.upload_a_stop_cuts()


def attach(
    use: StoreUse,
    build: Any,
    on_warning: Callable[[str], None] | None = None,
    *,
    count: bool = False,
    then: Callable[[Any], None] | None = None,
) -> None:
    """Publish and record when `build` ends, before any other listener (a view) reads its summary, and say the
    warnings that came with it (`on_warning`). The key's lock names this build from now on (waiters say which build
    they wait for). The publish runs on a thread, the build's end awaiting it (builds/supervisor/build_end.py): it
    sends the engine to the remote store, which a large engine to a slow remote makes long, and a stop of the build
    meanwhile (a Ctrl-C, a SIGTERM: the loop answers it) cuts that upload at once through the store's cancel state
    (`Store.stop`, the lookup's: `Build.stop_end_with`), as it cuts a fetch. On the loop, the stop waited until the
    upload's whole bound had passed. A matrix's cell is attached here too (builds/avoidance/cells.py): `count`, its
    miss counted as it ends (`after_build`); `then(build)`, on the loop once it has published (the cells of its key
    restored from its entry)."""
    if use.lock is not None:
        use.lock.relabel(build.id)
    if use.store is not None:
        use.store.stop = use.store.stop or CancelToken()
        build.stop_end_with(use.store.stop, lambda: upload_a_stop_cuts(use, build))
    # the lookup's were said before the build (`trtls build` prints them). A set, not a count: the build's own
    # warnings (TRT333) land in `warnings`, which all_warnings lists before the key's and the store's notes
    said = set(use.all_warnings())

    async def ended(b: Any) -> None:
        await use.looked_up(lambda: after_build(use, b, count))  # off the loop; a stop of this task cuts it too
        if then is not None:
            then(b)
        for w in use.all_warnings():
            if w not in said and on_warning is not None:
                on_warning(w)

    def on_end(b: Any, ev: Any) -> Coroutine[Any, Any, None] | None:
        if ev is None:
            return ended(b)
        if ev.type == "build_finished" and ev.outcome == "built" and b.remote is None:
            # the engine is renamed into place: its copy into the store starts now, beside the evidence, and the
            # publish takes it once the end decides to publish (`after_build`; removed otherwise)
            use.stage_engine(b.output, ev.engine_sha256)
        return None

    build.listeners.insert(0, on_end)
