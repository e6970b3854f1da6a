"""What a build records about itself, computed without TensorRT's help where possible: the build-config hash (the
identity of an engine's inputs and target), the parsed network's typing, and the worker's peak memory."""

from __future__ import annotations

import hashlib
import resource
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trtls.core.protocol import stable_json
from trtls.fs.read import open_regular

if TYPE_CHECKING:  # types only: the worker imports this module, and never pydantic (tests/test_layers.py)
    from trtls.core.build_records import NetworkTypingRecord


def peak_rss_bytes() -> int:
    """This worker's peak resident set size so far (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def network_types(bm: Any, network: Any) -> NetworkTypingRecord:
    """The parsed network's typing: strongly typed or not, and the dtype of every input and output. A plain dict (the
    worker's `build_started.network`), validated at the supervisor's edge as `core.build_records.NetworkTyping`."""
    trt = bm.trt
    flag = getattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED", None)
    strongly = None
    if flag is not None:
        try:
            strongly = bool(network.get_flag(flag))
        except Exception:
            strongly = None
    return {
        "stronglyTyped": strongly,
        "inputs": {network.get_input(i).name: network.get_input(i).dtype.name for i in range(network.num_inputs)},
        "outputs": {network.get_output(i).name: network.get_output(i).dtype.name for i in range(network.num_outputs)},
        "layers": network.num_layers,
    }


def build_config_hash(
    onnx: Path,
    effective: dict[str, Any],
    profiles: list,
    environment: dict[str, Any],
    target: Mapping[str, object] | None = None,
) -> str:
    """sha256 over the ONNX bytes, the effective builder settings, the builder module + version and the
    target (compute capabilities, hardware compatibility, device): durations on one target are not the usual
    durations on another."""
    h = hashlib.sha256()
    with open_regular(onnx, limit=None, follow=True) as fh:  # the user's model (it may live in a cache by a link)
        while block := fh.read(1 << 20):
            h.update(block)
    h.update(
        stable_json(
            {
                "settings": effective,
                "profiles": profiles,
                "module": environment.get("module"),
                "version": environment.get("version"),
                "target": target,
            }
        ).encode()
    )
    return h.hexdigest()
