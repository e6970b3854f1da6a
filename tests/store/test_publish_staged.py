"""The engine's copy into the store, staged while the build's end writes its evidence (store/publishing.py `stage`,
store/use.py `stage_engine`): a publish takes a staged copy only of the very bytes it was asked to store, copies again
otherwise, and no staged copy outlives the publish that did not take it. A real store on disk; real files."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from trtls.store.entries import Store
from trtls.store.key import key_of_parts

PARTS = {"model": "m", "settings": {"optimization_level": 3}}
KEY = key_of_parts(PARTS)


def _engine(tmp_path: Path, data: bytes) -> tuple[Path, str]:
    engine = tmp_path / "out" / "demo.engine"
    engine.parent.mkdir(exist_ok=True)
    engine.write_bytes(data)
    return engine, hashlib.sha256(data).hexdigest()


def _left_in_tmp(store: Store) -> list[str]:
    tmp = store.root / "tmp"
    return sorted(p.name for p in tmp.iterdir()) if tmp.exists() else []


def test_a_publish_takes_the_staged_copy_and_leaves_nothing_in_tmp(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    engine, sha = _engine(tmp_path, b"engine bytes " * 5000)
    staged = store.stage(KEY, engine, sha)
    assert staged is not None and staged.sha256 == sha and staged.size == engine.stat().st_size
    assert (staged.tmp / "engine").read_bytes() == engine.read_bytes()
    engine.write_bytes(b"x")  # the output, changed after the copy: the staged copy's bytes are what is stored
    entry = store.publish(KEY, PARTS, engine, {"buildId": "b1"}, sha, push=False, staged=staged)
    assert entry.sha256 == sha
    stored = store.root / "entries" / KEY
    assert hashlib.sha256((stored / "engine").read_bytes()).hexdigest() == sha
    assert json.loads((stored / "entry.json").read_text())["engine"] == {"sha256": sha, "size": staged.size}
    assert _left_in_tmp(store) == []


def test_a_staged_copy_of_other_bytes_is_removed_and_the_engine_copied_again(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    engine, first = _engine(tmp_path, b"the first build's bytes" * 1000)
    staged = store.stage(KEY, engine, first)
    assert staged is not None
    engine, second = _engine(tmp_path, b"what the end verified" * 1000)  # the bytes the end found on disk
    store.publish(KEY, PARTS, engine, {"buildId": "b2"}, second, push=False, staged=staged)
    assert hashlib.sha256((store.root / "entries" / KEY / "engine").read_bytes()).hexdigest() == second
    assert _left_in_tmp(store) == []


def test_a_copy_that_reads_other_bytes_than_the_worker_said_stages_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    engine, _ = _engine(tmp_path, b"on disk" * 1000)
    assert store.stage(KEY, engine, "0" * 64) is None
    assert _left_in_tmp(store) == []


def test_a_publish_of_bytes_the_store_holds_already_removes_the_staged_copy(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    engine, sha = _engine(tmp_path, b"same bytes" * 1000)
    store.publish(KEY, PARTS, engine, {"buildId": "b1"}, sha, push=False)
    staged = store.stage(KEY, engine, sha)
    assert staged is not None and _left_in_tmp(store) != []
    entry = store.publish(KEY, PARTS, engine, {"buildId": "b2"}, sha, push=False, staged=staged)
    assert entry.build["buildId"] == "b1"  # a no-op: the entry as it was
    assert _left_in_tmp(store) == []


def test_a_read_only_store_stages_nothing_and_its_publish_says_why(tmp_path: Path) -> None:
    Store(tmp_path / "store").check()
    store = Store(tmp_path / "store", mode="read")
    engine, sha = _engine(tmp_path, b"bytes" * 100)
    assert store.stage(KEY, engine, sha) is None
    with pytest.raises(OSError, match="read-only"):
        store.publish(KEY, PARTS, engine, {"buildId": "b1"}, sha, push=False)


def test_unstage_removes_a_copy_no_publish_took(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    engine, sha = _engine(tmp_path, b"bytes" * 1000)
    staged = store.stage(KEY, engine, sha)
    assert staged is not None and staged.tmp.exists()
    store.unstage(staged)
    assert _left_in_tmp(store) == [] and not (store.root / "entries" / KEY).exists()
