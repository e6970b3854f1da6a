"""A model that changes while its engine is built is not published under the key of the bytes hashed before (issue 32:
never a stale engine). The key hashes the model, then the worker reads it: a save in between gave an engine of the
new bytes stored under the old bytes' key, served from then on to every checkout with the old bytes. Now a file the
key hashed that is not as it was (size, mtime, inode, ctime), or that changed after the build started (a job sent
ahead of the key), keeps the engine at the output and out of the store. A real `trtls build` whose worker process
rewrites the model as TensorRT loads (a sitecustomize on PYTHONPATH: the save lands exactly in that window)."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from tests.store.conftest import copy_store
from tests.store.helpers import run_build, summaries, with_store
from tests.store.test_in_place_rewrite import _rewrite_in_place

SAVE_WHILE_LOADING = """
import os, shutil, sys
_new, _model = os.environ.get("TRTLS_TEST_NEW_MODEL"), os.environ.get("TRTLS_TEST_MODEL")
if _new and "trtls.builds.worker" in getattr(sys, "orig_argv", []):
    def _hook(event, args):
        if event == "import" and str(args[0]).startswith("tensorrt") and not os.path.exists(_new + ".saved"):
            open(_new + ".saved", "w").close()
            with open(_new, "rb") as src, open(_model, "r+b") as dst:  # saved in place, as an editor may
                shutil.copyfileobj(src, dst)
    sys.addaudithook(_hook)
"""


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_model_saved_while_its_engine_is_built_is_not_stored_under_the_old_key(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    store = copy_store(seeded, tmp_path)
    with_store(seed_ws, store)
    model = seed_ws / "models" / "demo.onnx"
    original = tmp_path / "original.onnx"
    shutil.copyfile(model, original)
    changed = tmp_path / "changed.onnx"
    shutil.copyfile(model, changed)
    _rewrite_in_place(changed)  # another weight, the same size
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SAVE_WHILE_LOADING)
    env = {**os.environ, "PYTHONPATH": str(site), "TRTLS_TEST_NEW_MODEL": str(changed), "TRTLS_TEST_MODEL": str(model)}
    (store / "entries" / seeded[1]["engineKey"]).rename(tmp_path / "set-aside")  # the key is a miss: a real build

    done = run_build(seed_ws, env=env)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "changed.onnx.saved").exists() and sha(model) == sha(changed)  # saved while it was built
    built = summaries(seed_ws)[-1]
    assert built["outcome"] == "built" and built["engineKey"] == seeded[1]["engineKey"]  # keyed on the bytes before
    assert not (store / "entries" / seeded[1]["engineKey"]).exists(), (
        "an engine of other bytes was stored under the key"
    )
    assert any("changed while the engine was built" in w for w in built["store"]["warnings"])
    # the engine's copy into the store began as the worker wrote it, before the end knew not to publish: removed
    assert not (store / "tmp").exists() or list((store / "tmp").iterdir()) == []

    shutil.copyfile(original, model)  # the bytes the key was computed from, back: built as what they are
    (seed_ws / "build" / "demo.engine").unlink()
    again = run_build(seed_ws)
    assert again.returncode == 0, again.stderr
    assert sha(seed_ws / "build" / "demo.engine") == seeded[1]["engineArtifact"]["sha256"]


def test_a_job_sent_ahead_of_the_key_is_not_stored_when_an_input_changed_after_the_build_started(
    tmp_path: Path,
) -> None:
    """The other half (a job sent to its worker ahead of the check): the worker may have read the model before the key
    hashed it, so a file the key saw unchanged since hashing is still refused when it changed after the build started
    (its ctime, which no one can set back), and kept when it last changed before."""
    import time

    from trtls.store.key import EngineKey, inputs_changed, stat_key

    before, after = tmp_path / "before.onnx", tmp_path / "after.onnx"
    before.write_bytes(b"saved before the build started")
    time.sleep(0.2)  # well past the ctime's coarse tick (CTIME_SLACK_NS)
    started_at = time.time()  # the job went to the worker here, ahead of the key
    time.sleep(0.2)
    after.write_bytes(b"saved after the build started, before the key hashed it")
    hashed_at = time.time()
    for path, refused in ((before, False), (after, True)):
        key = EngineKey("ab" * 32, {}, [], {str(path): stat_key(path)}, hashed_at)
        said = inputs_changed(key, started_at)
        assert (said is not None) is refused, (path.name, said)
        assert inputs_changed(key, hashed_at + 1) is None, "a build started after the key: only a change since counts"
    assert said is not None and str(after) in said and "not published under key" in said
