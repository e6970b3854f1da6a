"""The key's honesty when the build runs elsewhere (a farm cell is keyed on the submitting machine, built on a node).

TensorRT-RTX builds ahead of time for the compute capabilities in its settings: its plan does not depend on the
node's GPU, only on the builder version, which the node's evidence reports. Full TensorRT times tactics on the GPU
of the machine that builds, which the submitting machine cannot key: on a `[cluster]` it does not use the store.
Store types only (no builds import): the store layer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trtls.store.key import EngineKey

if TYPE_CHECKING:  # the annotation only: the caller hands a Summary, and this module stays free of pydantic
    from trtls.core.summary_record import Summary

FULL_TRT_ON_CLUSTER = (
    "full TensorRT on a [cluster]: it times tactics on the GPU of the node that builds the cell, and the key is"
    " computed on this machine with this machine's device, so the store is neither looked up nor published to"
    " (docs/store.md, Matrices and the build farm)"
)


def full_tensorrt_on_cluster(cluster: Any, key: EngineKey | None) -> bool:
    """A full-TensorRT build on a farm (`cluster`: the recipe's `[cluster]` table, or None)."""
    return cluster is not None and key is not None and (key.parts.get("builder") or {}).get("module") == "tensorrt"


def builder_mismatch(key: EngineKey | None, summary: Summary) -> str | None:
    """Why a built engine must not be published under `key`, or None: its evidence (`summary`) reports a builder
    module or version (or, for full TensorRT, a device) other than the one the key was computed with."""
    if key is None:
        return None
    env = summary.environment
    got_module = summary.builderModule or (env.module if env else None)
    if not got_module:
        return None  # the build reported no builder (nothing to compare)
    builder = key.parts.get("builder") or {}
    target = key.parts.get("target") or {}
    key_module, key_version = builder.get("module"), builder.get("version")
    got_version = summary.tensorrtVersion or (env.version if env else None)
    node = summary.node or {}
    where = f"node {node.get('hostname')} ({str(node.get('nodeId') or '')[:12]})" if node else "this build"
    theirs = "(the key's, on the submitting machine)"
    differs = []
    if got_module != key_module:
        differs.append(f"builder module {got_module} (on {where}) ≠ {key_module} {theirs}")
    elif got_version and got_version not in (key_version if isinstance(key_version, list) else [key_version]):
        # a key that knows no version (`[]`: no *.dist-info and no `__version__` line found) names no builder: an
        # engine published under it would be served to every other version of that builder
        differs.append(f"builder {got_module} {got_version} (on {where}) ≠ {key_module} {key_version} {theirs}")
    device = env.device_name if env else None
    if got_module == "tensorrt" == key_module and device != target.get("device"):
        differs.append(f"device {device} (on {where}) ≠ {target.get('device')} {theirs}")
    if not differs:
        return None
    return f"not stored: {'; '.join(differs)}; the engine is at the output but is not published under key {key.short}"


PUBLISHED = "published to the remote store from node"  # a cell's note (builds/farm/node_store.py) the driver reads


def published_by_node(notes: list[Any], key: str) -> bool:
    """Whether a cell's `build_finished` notes say its node published `key` to the remote store itself (the driver
    does not send the same engine again)."""
    return any(isinstance(n, str) and n.startswith(PUBLISHED) and key[:12] in n for n in notes)
