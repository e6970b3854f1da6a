"""The digest cache (`.trtls/digests.json`) says what a file's bytes are from its stat alone (size, mtime, inode,
ctime), so an unchanged model is not read again. Another account that can write `.trtls` (a team's shared project)
wrote one that gave a changed model the digest of the model before: `trtls build` said "up to date" and kept the
engine built from the old weights (the key is the digest's). The same cache says what the engine at the output is,
and what a route's checkpoint files are for gate 1. It, and the external-data index beside it, are now taken only
from this account's own files that no other account can write (`fs.read_text(owned=True)`); another's is an empty
cache: the files are read.

Real builds of the quickstart `demo` into a real store; the other account's file is made by root with `chown`, as
the two-account tests do."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import onnx
import pytest

from tests.store.helpers import run_build, summaries, with_store

OTHER = 40001


def _stat_key(path: Path) -> list[int]:
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns]


@pytest.mark.skipif(os.geteuid() != 0, reason="another account's file needs root to make (chown)")
def test_another_accounts_digest_cache_never_makes_a_changed_model_up_to_date(workspace: Path, tmp_path: Path) -> None:
    with_store(workspace, tmp_path / "store")
    assert run_build(workspace).returncode == 0
    model = workspace / "models" / "demo.onnx"
    old_sha = hashlib.sha256(model.read_bytes()).hexdigest()
    proto = onnx.load(str(model))
    weights = proto.graph.initializer[0]
    weights.raw_data = bytes([weights.raw_data[0] ^ 0x40]) + weights.raw_data[1:]  # new weights, same size
    onnx.save(proto, str(model))
    assert hashlib.sha256(model.read_bytes()).hexdigest() != old_sha
    cache = workspace / ".trtls" / "digests.json"
    data = json.loads(cache.read_text())
    data["files"][str(model)] = {"key": _stat_key(model), "sha256": old_sha}  # the changed model, said to be the old
    cache.unlink()
    cache.write_text(json.dumps(data))
    os.chown(cache, OTHER, OTHER)
    first = summaries(workspace)[-1]
    done = run_build(workspace)
    assert done.returncode == 0, done.stdout + done.stderr
    last = summaries(workspace)[-1]
    assert last["engineKey"] != first["engineKey"], "the changed model was keyed by the other account's digest"
    assert last["outcome"] == "built" and "up to date" not in done.stdout, done.stdout
