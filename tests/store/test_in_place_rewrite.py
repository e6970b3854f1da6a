"""A model rewritten in place at its size with its mtime put back (cp -p or rsync -t --inplace over it, a tool that
preserves timestamps) keeps its size, mtime and inode: the fast path's memo and the digest cache, keyed on those three,
served the old engine as up to date (issue 32: never a stale engine). Only the ctime, which no one can set back, says
the file changed; both now key on it. A real `trtls build` of `demo` after a real rewrite of one of its weights."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from tests.store.conftest import copy_store
from tests.store.helpers import run_build, summaries, with_store

OLD = 1_577_836_800_000_000_000  # 2020-01-01: a model that was not just written (its digest is cached)


def _rewrite_in_place(model: Path) -> None:
    """Another weight, the same length of file, written into the same inode, the mtime put back."""
    before = os.stat(model)
    proto = onnx.load(str(model))
    weight = max(proto.graph.initializer, key=lambda t: len(t.raw_data))
    values = numpy_helper.to_array(weight).copy()
    values.flat[0] = values.flat[0] + np.float32(1.0) if values.flat[0] != 0 else np.float32(0.5)
    weight.CopyFrom(numpy_helper.from_array(values, weight.name))
    data = proto.SerializeToString()
    assert len(data) == before.st_size
    with open(model, "r+b") as fh:
        fh.write(data)
    os.utime(model, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(model)
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)


def test_a_model_rewritten_in_place_with_its_mtime_put_back_is_rebuilt(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    with_store(seed_ws, copy_store(seeded, tmp_path))
    model = seed_ws / "models" / "demo.onnx"
    os.utime(model, ns=(OLD, OLD))
    for _ in range(2):  # the first computes the key (its digest cached: an old mtime), the second takes the fast path
        assert run_build(seed_ws).returncode == 0
        assert summaries(seed_ws)[-1]["outcome"] == "reused"
    key = summaries(seed_ws)[-1]["engineKey"]

    _rewrite_in_place(model)
    done = run_build(seed_ws)
    assert done.returncode == 0, done.stderr
    after = summaries(seed_ws)[-1]
    assert after["outcome"] == "built", "a changed model was served the old engine as up to date"
    assert after["engineKey"] != key and after["rebuiltBecause"], after["rebuiltBecause"]
