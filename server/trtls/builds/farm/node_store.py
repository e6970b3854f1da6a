"""A farm node's own use of the remote engine store: the engine a node's worker built is published to the remote
store from the node itself, as soon as the worker says `build_finished` (built), before the engine travels back to
the submitting machine. The remote then holds it even when the submitting machine dies on the way, and its bytes
cross the network once to the remote (not node → driver → remote).

The publish goes through the same code as the submitting machine's (`Store.publish` → `store.remote.push_entry`):
the engine is hashed into a node-local store folder (`<node scratch>/store`, bounded, least recently used first) and
only bytes of the sha256 the worker reported become an entry; the blob is sent first (skipped when a HEAD finds it
with its length), then the record, so a reader that finds the record finds its blob. The same single-flight rule
holds: the node's key lock (`locks/<key>.lock` in its folder) serialises the cells of one node; two machines that
publish one key both PUT the same blob name and a valid record. A stop of the cell — its cancel state on the node
(`cell_runner.CellRun.stop`: the driver's cancel line, its input closed, its end) — cuts the upload at once, as a CLI
build's stop cuts its own: the worker has built by then, so the cancel line that reaches it stops nothing there.

What the driver hands over (`NodeStore`, built by `builds.avoidance.cells.node_store_plan`): the remote's URL, the
key and its parts as the driver computed them, and whether this run may write the remote. The key's honesty rule of
the farm (`store.farm_keys.builder_mismatch`) is applied here to the worker's own `environment` line: an engine of
another builder than the key's is not published. A signed store is not published from a node (the team's signing key
stays on the machines that hold it; the driver publishes it, signed). Plain Python, no Ray: the node's actor calls it.

Before anything builds, the node looks the key up itself (`look_up_on_node`, before any worker starts or TensorRT is
imported there): the driver asked the remote just before it placed the cell, so a hit here is an engine another
machine published while the cell waited for a node. It is the driver's remote hit, on the node: `Store.get` brings
the remote's entry into the node-local folder through `store/remote.py`'s `fetch_entry` (the record checked as a
local one is, the bytes hashed against its sha256 and size), `Store.restore` copies it into the cell's job folder
hashing it again (`serve_on_node`), and it travels back as a built engine does (engine_transfer.py); the driver
records the cell `reused` (builds/farm/node_reuse.py).
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trtls.core.cancel import CancelToken
from trtls.core.events import CancelControl
from trtls.core.summary_record import Summary
from trtls.store.entries import Entry, NotTrusted, Refused, RestoreFailed, Store, StoreUnusable
from trtls.store.farm_keys import PUBLISHED, builder_mismatch
from trtls.store.key import EngineKey, is_key
from trtls.store.remote import push_entry

NODE_STORE_MAX = 4 << 30  # the node-local folder the engine is published through: 4 GiB, least recently used first


def plan_key(plan: dict[str, Any] | None) -> str | None:
    """The key a driver's plan names, when it is one."""
    key = (plan or {}).get("key")
    return key if is_key(key) else None


def publish_from_node(
    plan: dict[str, Any],
    scratch: Path,
    engine: Path,
    finished: dict[str, Any],
    env: dict[str, Any],
    node: str,
    duration_s: float | None = None,
    stop: CancelToken | None = None,
) -> str:
    """Publish the engine a node's worker built (`finished`: its `build_finished`, `env`: its `environment`) to the
    remote store named by `plan`; the line that says what happened (a note of the cell). Never raises. `stop`: the
    cell's cancel state on the node (`cell_runner.CellRun.stop`); set, it cuts the upload as a stop of a CLI build
    cuts its own (`Store.stop`): no record is sent, and the line says the upload was stopped."""
    key = plan_key(plan)
    url = plan.get("url")
    if key is None or not isinstance(url, str) or not isinstance(plan.get("parts"), dict):
        return "not published from this node: the driver's store plan names no key or remote"
    reported = Summary.written({"environment": env, "node": {"hostname": node}})  # what the worker said of itself
    mismatch = builder_mismatch(EngineKey(key, plan["parts"]), reported)
    if mismatch is not None:
        return f"{mismatch} (from node {node})"
    sha = finished.get("engine_sha256")
    record = {
        "buildId": plan.get("buildId"),
        "engine": plan.get("engine"),
        "startedAt": plan.get("startedAt"),
        "durationS": duration_s,
        "tensorrtVersion": env.get("version"),
        "builderModule": env.get("module"),
        "publishedBy": {"hostname": socket.gethostname(), "pid": os.getpid(), "node": node},
    }
    store = node_store(scratch, url)
    store.stop = stop
    try:
        entry = store.publish(key, plan["parts"], engine, record, sha if isinstance(sha, str) else None, push=False)
        # sent here, not by publish: a key this node's folder held already with these bytes (it built the key before,
        # and the remote has lost it since) is a no-op publish that sends nothing
        push_entry(store, entry)
    except Exception as exc:  # the node's disk, a store folder that cannot be one: the driver still publishes
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return f"not published from node {node}: {why}"
    sent = [n for n in store.notes if "not sent" in n or "not used" in n]
    if sent:
        return f"not published from node {node}: {'; '.join(sent)}"
    return f"{PUBLISHED} {node}: key {key[:12]}, engine {str(sha)[:12]}"


def stop_on(stop: CancelToken, line: str) -> None:
    """Set `stop`, a cell's cancel state on its node (`CellRun.stop`), when `line` — a control line the driver sent
    the cell — is a cancel, with its source (the person's Ctrl-C says `ctrl_c` on the node too)."""
    try:
        cancel = CancelControl.model_validate_json(line)
    except ValidationError:
        return  # a commit line, or not the wire's
    stop.request(cancel.source)


def finished_with_note(line: str, note: str) -> str:
    """A `build_finished` line with `note` added to its notes."""
    ev = json.loads(line)
    ev["notes"] = [*(ev.get("notes") or []), note]
    return json.dumps(ev)


def node_store(scratch: Path, url: str) -> Store:
    """The node-local store folder a node publishes through and keeps what it fetched from the remote in."""
    return Store(scratch / "store", "read_write", NODE_STORE_MAX, remote=url)


def look_up_on_node(
    plan: dict[str, Any], scratch: Path, node: str, stop: CancelToken | None = None
) -> tuple[Entry | None, str]:
    """The key's entry when the remote store holds it now, verified as the driver's remote hit is (`Store.get`:
    fetched into this node's folder); and the line that says so, or why the node builds. A copy this node already
    holds (it published or fetched the key before) serves only when the remote's record names the same engine: the
    remote, not this folder, says what the key's engine is (a purged or replaced entry is not brought back). Never
    raises: a store the node cannot use is a miss. `stop`: the cell's cancel state on the node (`CellRun.stop`, its
    cell registered before the lookup starts); set, it cuts the lookup's requests at once (`Store.stop`), keeps
    nothing, and the line says the lookup was stopped — a stalled remote held a stopped cell for the lookup's bound."""
    from trtls.store.remote import remote_record

    key, url = plan_key(plan), plan.get("url")
    if key is None or not isinstance(url, str):
        return None, "not looked up on this node: the driver's store plan names no key or remote"
    store = node_store(scratch, url)
    store.stop = stop
    try:
        store.check()  # a read-write store folder is created here
        entry, where = store.get(key, remote=False), "this node's copy of it"
        if entry is not None:
            record = remote_record(store, key)
            if record is None or record["engine"]["sha256"] != entry.sha256:
                entry = None  # the remote holds no such record now: the node's copy is not served
                store.notes.append("this node's copy of the key is not the remote's engine now")
        else:
            entry, where = store.get(key), "fetched from the remote store"
    except (StoreUnusable, NotTrusted, Refused, OSError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return None, f"node {node} did not use the remote store for key {key[:12]}: {why}; it builds"
    if stop is not None and stop.is_set:  # whatever the cut request left, the cell is stopped: nothing is served
        from trtls.store.remote_http import shown

        return None, f"node {node} stopped looking key {key[:12]} up in the remote store {shown(url)} ({stop.source})"
    said = "; ".join(n for n in store.notes if "fetched from" not in n)
    if entry is None:
        return (
            None,
            f"node {node} looked key {key[:12]} up in the remote store: not there{f' ({said})' if said else ''}",
        )
    return entry, f"node {node} found key {key[:12]} in the remote store {url} ({where}): no worker, nothing built"


def serve_on_node(
    plan: dict[str, Any], scratch: Path, entry: Entry, output: Path, tag: str, node: str
) -> tuple[dict[str, Any] | None, str]:
    """Restore `entry` (from `look_up_on_node`) at `output` in the cell's job folder, hashed while copied: the hit the
    driver fetches (`{"key", "sha256", "size", "path", "build", "remote", "node"}`), or None and why it builds."""
    store = node_store(scratch, str(plan.get("url")))
    try:
        store.restore(entry, output, tag, output.parent)
    except (Refused, RestoreFailed, OSError) as exc:  # quarantined (bytes not the record's), the node's disk
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return None, f"node {node} could not serve key {entry.key[:12]} from the remote store: {why}; it builds"
    hit = {
        "key": entry.key,
        "sha256": entry.sha256,
        "size": entry.size,
        "path": str(output),
        "build": entry.build,
        "remote": plan.get("url"),
        "node": node,
    }
    return hit, f"engine {entry.sha256[:12]} ({entry.size} bytes) restored on node {node} from its store entry"
