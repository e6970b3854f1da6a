"""The engine key: every byte the builder reads and every setting, computed without TensorRT; what changed, by name."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.builds.helpers import loaded
from trtls.builds.supervisor.job import worker_job
from trtls.checkpoint.hashing import DigestCache
from trtls.store.diff import key_changes
from trtls.store.key import builder_identity, engine_key, key_of_parts


def _key(ws: Path, engine: str = "demo", **overrides):
    return engine_key(worker_job(loaded(ws), engine, "t", overrides or None), ws / ".trtls")


def test_key_covers_settings_profiles_and_onnx_bytes_by_name(workspace: Path) -> None:
    base = _key(workspace)
    assert base.hex == _key(workspace).hex  # stable
    assert key_of_parts(base.parts) == base.hex
    level = _key(workspace, settings={"optimization_level": 5})
    assert level.hex != base.hex
    assert key_changes(base.parts, level.parts) == ["optimization_level 3 → 5"]
    profiles = [{"inputs": [{"input": "input", "min": [1, 3, 32, 32], "opt": [4, 3, 32, 32], "max": [16, 3, 32, 32]}]}]
    prof = _key(workspace, profiles=profiles)
    assert key_changes(base.parts, prof.parts) == ["profile 0 input.max [8,3,32,32] → [16,3,32,32]"]
    onnx = workspace / "models" / "demo.onnx"
    data = bytearray(onnx.read_bytes())
    data[-1] ^= 0xFF
    onnx.write_bytes(bytes(data))
    changed = _key(workspace)
    assert key_changes(base.parts, changed.parts) == ["onnx demo.onnx bytes changed"]


def test_key_does_not_depend_on_paths(workspace: Path, tmp_path: Path) -> None:
    import shutil

    other = tmp_path / "elsewhere"
    shutil.copytree(workspace, other)
    assert _key(other).hex == _key(workspace).hex
    assert _key(other).parts["paths"]["onnx"] != _key(workspace).parts["paths"]["onnx"]


def test_key_covers_external_data_and_plugins(models_ws: Path, tmp_path: Path) -> None:
    base = _key(models_ws, "external")
    ext = base.parts["files"]["external"]
    assert list(ext) == ["external.onnx.data"], ext
    data = models_ws / "models" / "external.onnx.data"
    blob = bytearray(data.read_bytes())
    blob[len(blob) // 2] ^= 0x01
    data.write_bytes(bytes(blob))
    after = _key(models_ws, "external")
    assert after.hex != base.hex
    assert key_changes(base.parts, after.parts) == ["external data external.onnx.data bytes changed"]
    # a plugin library is keyed by content: same path, other bytes, other key
    lib = tmp_path / "libplugin.so"
    lib.write_bytes(b"one")
    job = worker_job(loaded(models_ws), "external", "t")
    job["plugins"]["libraries"] = [str(lib)]
    one = engine_key(job, models_ws / ".trtls")
    lib.write_bytes(b"two")
    os.utime(lib, ns=(1, 1))
    two = engine_key(job, models_ws / ".trtls")
    assert key_changes(one.parts, two.parts) == ["plugin library libplugin.so changed"]


def test_warm_digest_cache_does_not_read_the_model(workspace: Path) -> None:
    onnx = workspace / "models" / "demo.onnx"
    old = 1_000_000_000_000_000_000  # an mtime well in the past: not "racy", so it is cached
    os.utime(onnx, ns=(old, old))
    _key(workspace)
    cache = DigestCache(workspace / ".trtls" / "digests.json")
    assert str(onnx.absolute()) in cache.entries
    # the cache is believed while the file's stat (size, mtime, inode, ctime) is unchanged: the model is not re-read
    # (a digest the cache says, that no read of the model gives, is the key's); test_in_place_rewrite: one rewritten
    # in place with its mtime put back is re-read (its ctime moved)
    cache.entries[str(onnx.absolute())]["sha256"] = "0" * 64
    cache.dirty = True
    cache.save()
    assert _key(workspace).parts["files"]["onnx"] == "0" * 64


def test_builder_identity_needs_no_tensorrt_import() -> None:
    code = (
        "import sys; from trtls.store.key import builder_identity; b = builder_identity('auto'); "
        "assert not any(m.startswith('tensorrt') for m in sys.modules), sorted(sys.modules); "
        "print(b['module'], b['version'])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == "tensorrt_rtx" and out[1].count(".") >= 2
    assert builder_identity("tensorrt_rtx")["distributions"]
