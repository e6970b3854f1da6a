"""`--rebuild` replaces the entry it rebuilt (issue 32, item 1, the store's half; ccache's recache): an entry whose
engine is stale for its key (a key that missed a byte the builder reads) is what `--rebuild` is for, and the next
plain build — here or in any other checkout — must restore the rebuilt engine, never the stale one. A real
`trtls build --rebuild` against a store whose entry holds other, self-consistent bytes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tests.store.conftest import copy_store
from tests.store.forged import forged_entry
from tests.store.helpers import entries, run_build, summaries, with_store
from trtls.store.entries import Store


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_publish_with_other_bytes_replaces_the_entry(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    store.check()
    stale = forged_entry(store, tmp_path, "same-key", data=b"stale engine " * 50)
    fresh = tmp_path / "fresh.engine"
    fresh.write_bytes(b"rebuilt engine " * 50)
    again = store.publish(stale.key, stale.record["parts"], fresh, {"buildId": "rebuilt"}, sha(fresh))
    assert again.sha256 == sha(fresh) and sha(store.root / "entries" / stale.key / "engine") == sha(fresh)
    assert store.replaced == {"sha256": stale.sha256, "size": stale.size, "buildId": "build-same-key"}
    assert list((store.root / "tmp").iterdir()) == []  # the replaced entry is gone, not left half-way
    same = store.publish(stale.key, stale.record["parts"], fresh, {"buildId": "third"}, sha(fresh))
    assert store.replaced is None and same.build["buildId"] == "rebuilt"  # the same bytes: nothing replaced


def test_rebuild_replaces_a_stale_entry_and_the_next_build_restores_the_rebuilt_engine(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    store = copy_store(seeded, tmp_path)
    (folder,) = entries(store)
    stale = b"a stale engine for this key " * 100  # what a key that missed a changed weight would hold
    (folder / "engine").write_bytes(stale)
    record = json.loads((folder / "entry.json").read_text())
    record["engine"] = {"sha256": hashlib.sha256(stale).hexdigest(), "size": len(stale)}
    (folder / "entry.json").write_text(json.dumps(record))
    with_store(seed_ws, store)

    rebuilt = run_build(seed_ws, "--rebuild")
    assert rebuilt.returncode == 0, rebuilt.stderr
    (built,) = summaries(seed_ws)
    assert built["outcome"] == "built"
    engine_sha = built["engineArtifact"]["sha256"]
    assert sha(folder / "engine") == engine_sha, "--rebuild left the stale entry in the store"
    assert built["store"]["replaced"]["sha256"] == hashlib.sha256(stale).hexdigest()

    (seed_ws / "build" / "demo.engine").unlink()  # another checkout: nothing at the output yet
    plain = run_build(seed_ws)
    assert plain.returncode == 0, plain.stderr
    assert summaries(seed_ws)[-1]["outcome"] == "reused"
    assert sha(seed_ws / "build" / "demo.engine") == engine_sha
