"""The precision step of a build (worker side): ModelOpt AutoCast before TensorRT sees the model.

TensorRT 11 and TensorRT-RTX take precision from the graph (strongly typed networks), so FP16/BF16 is a
conversion of the ONNX, not a builder flag. This step:
- keys the result by content: sha256 of the ONNX file (and of every external-data file it names) plus the
  conversion settings and the ModelOpt version; a second build with the same key reuses the converted model
  without starting ModelOpt (`cache: hit`);
- converts in a child process (`trtls.builds.worker.autocast_child`) that a Stop kills at once;
- publishes the result atomically: the child writes into a temp folder, which is renamed to
  `<cache_dir>/<key>/` only when complete, so a cancelled or failed conversion never leaves a half model
  where a later build would find it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from trtls.builds.killable import ran_to_the_end
from trtls.builds.roots import state_root
from trtls.core.cancel import CancelToken
from trtls.core.protocol import stable_json
from trtls.core.sha256 import sha256_file
from trtls.fs import (
    Kind,
    atomic_write_text,
    ensure_folder,
    open_regular,
    parse_json,
    read_text,
    remove_tree,
    rename,
)

MODEL_NAME = "model.onnx"
RECORD_NAME = "precision.json"
MAX_RECORD_BYTES = 1 << 20  # a conversion's record: settings, digests and counts


class PrecisionFailed(RuntimeError):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind  # missing_modelopt | conversion_failed


class PrecisionCancelled(RuntimeError):
    pass


@dataclass
class PrecisionResult:
    onnx: Path
    record: dict[str, Any] = field(default_factory=dict)


def modelopt_version() -> str | None:
    try:
        return metadata.version("nvidia-modelopt")
    except metadata.PackageNotFoundError:
        return None


def _external_data_files(onnx_path: Path) -> list[Path]:
    """External-data files the model names (without loading them), so they are part of the key."""
    try:
        from onnx.external_data_helper import _get_all_tensors, uses_external_data

        from trtls.fs.models import load_onnx

        model = load_onnx(onnx_path, external_data=False)
    except Exception:
        return []  # not loadable here: the child or the parser will say why
    names = set()
    for tensor in _get_all_tensors(model):
        if uses_external_data(tensor):
            for entry in tensor.external_data:
                if entry.key == "location":
                    names.add(entry.value)
    return sorted(onnx_path.parent / n for n in names)


def input_digest(onnx_path: Path) -> str:
    h = hashlib.sha256()
    for path in [onnx_path, *_external_data_files(onnx_path)]:
        h.update(path.name.encode() + b"\0")
        with open_regular(path, limit=None, follow=True) as fh:  # a model's files may live in a cache, via links
            while block := fh.read(1 << 20):
                h.update(block)
    return h.hexdigest()


def conversion_settings(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "tool": "modelopt.onnx.autocast",
        "low_precision_type": spec["convert"],
        "keep_io_types": bool(spec.get("keep_io_types", True)),
        "exclude_op_types": sorted(spec.get("exclude_op_types") or []),
        "exclude_nodes": sorted(spec.get("exclude_nodes") or []),
    }


def cache_key(digest: str, settings: dict[str, Any], tool_version: str | None) -> str:
    return hashlib.sha256(
        stable_json({"input": digest, "settings": settings, "modelopt": tool_version}).encode()
    ).hexdigest()


def run_precision_step(
    onnx_path: Path,
    spec: dict[str, Any],
    cache_dir: Path,
    cancel: CancelToken,
    on_step: Any = None,
) -> PrecisionResult:
    """Return the converted model (from the cache or a fresh conversion). Raises PrecisionCancelled when
    the cancel token is set while converting, PrecisionFailed when ModelOpt is missing or fails."""
    step = on_step or (lambda n: None)
    tool_version = modelopt_version()
    settings = conversion_settings(spec)
    t0 = time.monotonic()
    digest = input_digest(onnx_path)
    step(0)
    key = cache_key(digest, settings, tool_version)
    entry = cache_dir / key
    base = {"input": str(onnx_path), "input_sha256": digest, "key": key, **settings, "modelopt_version": tool_version}
    stored = _stored(entry)
    if stored is not None:
        step(1)
        step(2)
        return PrecisionResult(entry / MODEL_NAME, {**stored, **base, "cache": "hit", "seconds": 0.0})
    if tool_version is None:
        raise PrecisionFailed(
            "missing_modelopt",
            "precision.convert needs NVIDIA ModelOpt (package nvidia-modelopt, with its ONNX extras): "
            "pip install 'trtls[precision]' (on a machine without a GPU, install a CPU build of torch first)",
        )
    root = state_root(cache_dir)  # `<recipe>/.trtls/precision`: the recipe's folder (a swapped .trtls is refused)
    ensure_folder(cache_dir, within=root)
    # one folder per conversion: two of the same key in one process (the language server's divergence searches of
    # one engine side by side) once shared `.<key>.tmp-<pid>`, each removing the other's half-written model
    tmp = cache_dir / f".{key}.tmp-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    _remove_dead_temps(cache_dir, key, root)
    ensure_folder(tmp, within=root)
    try:
        result = _convert_in_child(onnx_path, tmp / MODEL_NAME, settings, cancel, root)
        step(1)
        output_sha = sha256_file(tmp / MODEL_NAME)
        record = {
            **base,
            "output_sha256": output_sha,
            "output_bytes": (tmp / MODEL_NAME).stat().st_size,
            "nodes": result.get("nodes"),
            "casts": result.get("casts"),
            "initializers_low": result.get("initializers_low"),
            "initializers": result.get("initializers"),
        }
        atomic_write_text(tmp / RECORD_NAME, json.dumps(record, indent=2), kind=Kind.cache, within=root)
        placed = _stored(entry)  # by a conversion of the same key that finished first: its model is the one used
        if placed is None:
            remove_tree(entry, kind=Kind.cache, within=root)  # a damaged entry with this key
            try:
                rename(tmp, entry, kind=Kind.cache, within=root)
            except OSError:
                placed = _stored(entry)  # placed by another in between; else the rename's own error
                if placed is None:
                    raise
        if placed is not None:
            record = {**placed, **base}
        step(2)
    finally:
        with contextlib.suppress(OSError):
            remove_tree(tmp, kind=Kind.cache, within=root)
    return PrecisionResult(entry / MODEL_NAME, {**record, "cache": "miss", "seconds": round(time.monotonic() - t0, 3)})


def _remove_dead_temps(cache_dir: Path, key: str, root: Path) -> None:
    """The temp folders of this key that a killed conversion left (`.<key>.tmp-<pid>[-<id>]`, its process gone):
    removed through the door. A live process's, or one whose pid another process took since, is left."""
    from trtls.fs.kill import process_alive

    prefix = f".{key}.tmp-"
    with contextlib.suppress(OSError):
        for name in os.listdir(cache_dir):
            pid = name[len(prefix) :].split("-", 1)[0] if name.startswith(prefix) else ""
            if pid.isdigit() and not process_alive(int(pid)):
                with contextlib.suppress(OSError):
                    remove_tree(cache_dir / name, kind=Kind.cache, within=root)


def _stored(entry: Path) -> dict[str, Any] | None:
    """The cache entry's record when the entry is whole (its model's bytes are the ones recorded), else None."""
    if not ((entry / MODEL_NAME).is_file() and (entry / RECORD_NAME).is_file()):
        return None
    try:
        stored = parse_json(read_text(entry / RECORD_NAME, limit=MAX_RECORD_BYTES))
        if isinstance(stored, dict) and stored.get("output_sha256") == sha256_file(entry / MODEL_NAME):
            return stored
    except (OSError, ValueError):
        pass  # a damaged entry is converted again and replaced
    return None


def _convert_in_child(
    onnx_path: Path, output: Path, settings: dict[str, Any], cancel: CancelToken, within: Path
) -> dict:
    job = {
        "input": str(onnx_path),
        "output": str(output),
        "within": str(within),  # the folder the child's writes must stay in
        "low_precision_type": settings["low_precision_type"],
        "keep_io_types": settings["keep_io_types"],
        "exclude_op_types": settings["exclude_op_types"],
        "exclude_nodes": settings["exclude_nodes"],
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "trtls.builds.worker.autocast_child"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # a Stop kills the child and whatever it started (ONNX Runtime threads)
    )
    assert proc.stdin is not None
    proc.stdin.write((json.dumps(job) + "\n").encode())
    proc.stdin.close()
    if not ran_to_the_end(proc, cancel):
        raise PrecisionCancelled(f"precision conversion stopped by {cancel.source}")
    out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    lines = [ln for ln in out.splitlines() if ln.strip()]
    try:
        result = parse_json(lines[-1])
    except (IndexError, ValueError):
        tail = err.strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
        raise PrecisionFailed("conversion_failed", f"AutoCast died without a result: {tail[0]}") from None
    if not result.get("ok"):
        raise PrecisionFailed(result.get("kind", "conversion_failed"), result.get("error", "AutoCast failed"))
    return result
