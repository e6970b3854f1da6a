"""A farm node's own use of the remote engine store: the engine a node's worker built is published to the remote
store from the node itself, as soon as the worker says `build_finished` (built), before the engine travels back to
the submitting machine. The remote then holds it even when the submitting machine dies on the way, and its bytes
cross the network once to the remote (not node → driver → remote).

The publish goes through the same code as the submitting machine's (`Store.publish` → `store.remote.push_entry`):
the engine is hashed into a node-local store folder (`<node scratch>/store`, bounded, least recently used first) and
only bytes of the sha256 the worker reported become an entry; the blob is sent first (skipped when a HEAD finds it
with its length), then the record, so a reader that finds the record finds its blob. The same single-flight rule
holds: the node's key lock (`locks/<key>.lock` in its folder) serialises the cells of one node; two machines that
publish one key both PUT the same blob name and a valid record.

What the driver hands over (`NodeStore`, built by `builds.avoidance.lookup.node_store_plan`): the remote's URL, the
key and its parts as the driver computed them, and whether this run may write the remote. The key's honesty rule of
the farm (`store.farm_keys.builder_mismatch`) is applied here to the worker's own `environment` line: an engine of
another builder than the key's is not published. A signed store is not published from a node (the team's signing key
stays on the machines that hold it; the driver publishes it, signed). Plain Python, no Ray: the node's actor calls it.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

from trtls.store.farm_keys import PUBLISHED, builder_mismatch
from trtls.store.key import EngineKey, is_key

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
) -> str:
    """Publish the engine a node's worker built (`finished`: its `build_finished`, `env`: its `environment`) to the
    remote store named by `plan`; the line that says what happened (a note of the cell). Never raises."""
    from trtls.store.entries import Store

    key = plan_key(plan)
    url = plan.get("url")
    if key is None or not isinstance(url, str) or not isinstance(plan.get("parts"), dict):
        return "not published from this node: the driver's store plan names no key or remote"
    mismatch = builder_mismatch(EngineKey(key, plan["parts"]), {"environment": env, "node": {"hostname": node}})
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
    store = Store(scratch / "store", "read_write", NODE_STORE_MAX, remote=url)
    try:
        store.publish(key, plan["parts"], engine, record, sha if isinstance(sha, str) else None)
    except Exception as exc:  # the node's disk, a store folder that cannot be one: the driver still publishes
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return f"not published from node {node}: {why}"
    sent = [n for n in store.notes if "not sent" in n or "not used" in n]
    if sent:
        return f"not published from node {node}: {'; '.join(sent)}"
    return f"{PUBLISHED} {node}: key {key[:12]}, engine {str(sha)[:12]}"


def finished_with_note(line: str, note: str) -> str:
    """A `build_finished` line with `note` added to its notes."""
    ev = json.loads(line)
    ev["notes"] = [*(ev.get("notes") or []), note]
    return json.dumps(ev)
