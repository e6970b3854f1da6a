"""The fast path's memo (`.trtls/engines/<name>.hit.json`) names where the engine goes and which store, trust and
signing key serve it, and it is acted on before the recipe is read. Another account that can write `.trtls/engines`
(a team's shared project) copied the memo — it is readable — and changed those fields: the next `trtls build`
restored the engine over the owner's README (exit 0, "up to date"), or served an engine from the other account's
own store under `trust = "group"`, past the recipe's store and its trust. A memo is now acted on only when this
account (or root) wrote it and no other account can write it (`fs.read_bytes(owned=True)`, judged on the very
descriptor read); any other memo is left to the full path, which reads the recipe.

Real builds of the quickstart `demo`, a real store, a memo owned by another uid (root plays the other account with
`chown`, as the two-account tests do) and a real forged store of that account."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from tests.store.helpers import run_build, summaries, with_store

OTHER = 40001  # the other account's uid (and gid)


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _built(workspace: Path, tmp_path: Path) -> tuple[Path, Path, dict]:
    with_store(workspace, tmp_path / "store")
    done = run_build(workspace)
    assert done.returncode == 0, done.stdout + done.stderr
    memo = workspace / ".trtls" / "engines" / "demo.hit.json"
    return workspace, memo, json.loads(memo.read_text())


def _planted(memo: Path, record: dict, uid: int = OTHER, mode: int = 0o644) -> None:
    """The other account's memo: a new file of its own at the memo's name (its folder is group-writable)."""
    memo.unlink()
    memo.write_text(json.dumps(record))
    os.chown(memo, uid, uid)
    memo.chmod(mode)


def _served_by_memo(ws: Path) -> bool:
    return any((s.get("store") or {}).get("source") == "memo" for s in summaries(ws) if s.get("outcome") == "reused")


@pytest.fixture
def as_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("another account's file needs root to make (chown)")


@pytest.mark.usefixtures("as_root")
def test_another_accounts_memo_never_sends_the_engine_over_a_file_of_the_project(
    workspace: Path, tmp_path: Path
) -> None:
    ws, memo, record = _built(workspace, tmp_path)
    readme = ws / "README.md"
    readme.write_text("the owner's notes\n")
    record["output"] = str(readme)
    record["job"] = {**(record.get("job") or {}), "output": str(readme)}
    _planted(memo, record)
    done = run_build(ws)
    assert readme.read_bytes() == b"the owner's notes\n", "the engine was restored over the README a memo named"
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    assert (ws / "build" / "demo.engine").is_file()  # the full path: where the recipe says
    assert not _served_by_memo(ws)


@pytest.mark.usefixtures("as_root")
def test_another_accounts_memo_never_serves_from_its_own_store(workspace: Path, tmp_path: Path) -> None:
    ws, memo, record = _built(workspace, tmp_path)
    theirs = tmp_path / "theirs"
    shutil.copytree(tmp_path / "store", theirs)
    forged = b"an engine of the other account " * 64
    entry = theirs / "entries" / record["key"]
    (entry / "engine").write_bytes(forged)
    meta = json.loads((entry / "entry.json").read_text())
    meta["engine"] = {"sha256": hashlib.sha256(forged).hexdigest(), "size": len(forged)}
    (entry / "entry.json").write_text(json.dumps(meta))
    for folder, _, files in os.walk(theirs):
        for name in [folder, *(os.path.join(folder, f) for f in files)]:
            os.chown(name, OTHER, OTHER)
    record["store"] = {**record["store"], "path": str(theirs), "trust": "group", "signingKeyFile": None}
    _planted(memo, record)
    (ws / "build" / "demo.engine").unlink()
    done = run_build(ws)
    assert _sha(ws / "build" / "demo.engine") != hashlib.sha256(forged).hexdigest(), "the other account's engine"
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    assert not _served_by_memo(ws)


@pytest.mark.usefixtures("as_root")
def test_a_memo_others_can_write_is_not_acted_on_and_this_accounts_own_is(workspace: Path, tmp_path: Path) -> None:
    ws, memo, record = _built(workspace, tmp_path)
    _planted(memo, record, uid=os.geteuid(), mode=0o666)  # this account's, but any account could have rewritten it
    (ws / "build" / "demo.engine").unlink()
    assert run_build(ws).returncode == 0
    assert not _served_by_memo(ws)
    (ws / "build" / "demo.engine").unlink()  # the full path wrote the memo again, this account's own: used
    again = run_build(ws)
    assert again.returncode == 0 and "up to date" in again.stdout, again.stdout + again.stderr
    assert _served_by_memo(ws)


@pytest.mark.usefixtures("as_root")
def test_the_door_reads_an_owned_record_only_from_this_account_and_never_one_others_can_write(tmp_path: Path) -> None:
    from trtls.fs import UnsafeWrite, read_bytes

    mine = tmp_path / "mine.json"
    mine.write_text("{}")
    mine.chmod(0o644)
    assert read_bytes(mine, limit=16, owned=True) == b"{}"
    theirs = tmp_path / "theirs.json"
    theirs.write_text("{}")
    os.chown(theirs, OTHER, OTHER)
    with pytest.raises(UnsafeWrite, match="another account"):
        read_bytes(theirs, limit=16, owned=True)
    assert read_bytes(theirs, limit=16) == b"{}"  # without `owned`, a record of another account is read as before
    for mode in (0o664, 0o646):
        mine.chmod(mode)
        with pytest.raises(UnsafeWrite, match="writable by other accounts"):
            read_bytes(mine, limit=16, owned=True)
