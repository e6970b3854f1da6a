"""The connection to the Ray cluster a recipe's `[cluster]` names, and its node inventory.

Ray is process-global: one connection per process (the CLI's run, or the language server's life), made on a
thread so an event loop never blocks on it. `address = "local"` starts an embedded instance that ends with
this process. Ray is imported here lazily: this module is only reached when a recipe has `[cluster]`.
"""

from __future__ import annotations

import gc
import hashlib
import logging
import os
import threading
from pathlib import Path
from typing import Any

from trtls.builds.farm.placement import Node
from trtls.core.farm import LOCAL, ClusterTable


class FarmUnavailable(RuntimeError):
    """Ray is missing (TRT234) or the cluster cannot be reached (TRT235); `code` says which."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


_lock = threading.Lock()
_connected: str | None = None
_onnx_refs: dict[str, Any] = {}  # sha256 → ObjectRef: each ONNX is put in the object store once per process
_hashed: dict[tuple[str, int, int], str] = {}  # (path, size, mtime) → sha256


def connect(cluster: ClusterTable) -> None:
    """Blocking (run it on a thread). Idempotent for one address; a second address in one process is refused."""
    global _connected
    try:
        import ray
    except ImportError as exc:
        raise FarmUnavailable(
            "TRT234", f"the recipe has [cluster] but Ray is not installed ({exc}): pip install 'trtls[farm]'"
        ) from None
    with _lock:
        if ray.is_initialized():
            if _connected not in (None, cluster.address):
                raise FarmUnavailable(
                    "TRT235", f"this process is already connected to {_connected}; restart it to use {cluster.address}"
                )
            return
        kwargs: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,
            "logging_level": logging.WARNING,
            "configure_logging": False,
        }
        if cluster.runtime_env:
            kwargs["runtime_env"] = cluster.runtime_env
        if cluster.address == LOCAL:
            # a busy machine can take longer than Ray's default to register the embedded node's raylet
            os.environ.setdefault("RAY_raylet_start_wait_time_s", "180")
            kwargs["address"] = "local"  # always a new instance: never join someone else's `ray start` by accident
            kwargs["num_cpus"] = cluster.num_cpus or os.cpu_count() or 1
            if cluster.labels:
                kwargs["labels"] = dict(cluster.labels)
        else:
            kwargs["address"] = cluster.address
        try:
            ray.init(**kwargs)
        except Exception as exc:  # ConnectionError, TimeoutError, ValueError from a bad address …
            raise FarmUnavailable("TRT235", f"cannot connect to the Ray cluster at {cluster.address}: {exc}") from None
        _connected = cluster.address
        # Ray's modules and client state live as long as the process: out of the collector's sight, a full
        # collection in a language server driving 32 cells took ~100 ms (hover waited behind it) instead of a few.
        gc.freeze()


def nodes() -> list[Node]:
    """Alive nodes with their labels and total resources."""
    import ray

    out = []
    for n in ray.nodes():
        if not n.get("Alive"):
            continue
        out.append(
            Node(
                n["NodeID"],
                dict(n.get("Labels") or {}),
                dict(n.get("Resources") or {}),
                n.get("NodeManagerHostname", ""),
            )
        )
    return out


def node_alive(node_id: str) -> bool:
    import ray

    return any(n["NodeID"] == node_id and n.get("Alive") for n in ray.nodes())


def onnx_ref(path: Path) -> tuple[str, Any]:
    """(sha256, ObjectRef) of an ONNX file, put into the object store once per content hash."""
    import ray

    st = path.stat()
    stamp = (str(path), st.st_size, st.st_mtime_ns)  # a model is hashed once, not once per cell
    with _lock:
        known = _hashed.get(stamp)
        if known is not None and known in _onnx_refs:
            return known, _onnx_refs[known]
    data = path.read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    with _lock:
        _hashed[stamp] = sha
        ref = _onnx_refs.get(sha)
        if ref is None:
            ref = _onnx_refs[sha] = ray.put(data)
    return sha, ref


def disconnect() -> None:
    """Leave the cluster (an embedded instance ends with it)."""
    global _connected
    import ray

    with _lock:
        _onnx_refs.clear()
        _hashed.clear()
        if ray.is_initialized():
            ray.shutdown()
        _connected = None
