"""The store is a boundary (issue 27, items 1, 2 and 6): `[store] path` is judged like any write, `trtls store gc`
sweeps only inside a folder trtls made a store and only names trtls makes there, never through a `tmp` that is a
symlink, and a key read from a record becomes a path only when it is 64 hex digits. Real `trtls` processes, real
folders and symlinks; what a refused command could have touched is checked byte for byte."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.store.conftest import copy_store
from tests.store.forged import forged_entry
from tests.store.helpers import run_build, with_store
from trtls.core.recipe import load_recipe
from trtls.core.store_table import store_path_findings
from trtls.fs.kinds import OWNED_MARK
from trtls.store.entries import Refused, Store, StoreUnusable

OLD = time.time() - 7200  # older than the hour after which `store gc` took any leftover in tmp/


def trtls(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trtls", *args], capture_output=True, text=True, timeout=300)


def old_file(path: Path, text: str = "someone's notes") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (OLD, OLD))
    return path


def snapshot(folder: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(folder)): (None if p.is_dir() or p.is_symlink() else p.read_bytes())
        for p in sorted(folder.rglob("*"))
    }


@pytest.mark.parametrize("where", [".", "models", ".trtls", ".."])
def test_a_build_refuses_a_store_path_that_is_no_place_for_a_store(workspace: Path, where: str) -> None:
    (workspace / ".trtls").mkdir(exist_ok=True)
    old_file(workspace / "tmp" / "mine.txt")
    with_store(workspace, Path(where))
    before = snapshot(workspace.parent)
    done = run_build(workspace)
    assert done.returncode == 2, done.stdout + done.stderr
    line = next(i for i, t in enumerate((workspace / "trtls.toml").read_text().splitlines(), 1) if t.startswith("path"))
    assert f"trtls.toml:{line}:8: TRT339 error:" in done.stderr, done.stderr
    after = snapshot(workspace.parent)
    made = sorted(k for k in set(after) - set(before) if not k.startswith("ws/.trtls/"))
    assert made == [], f"the refused store created {made}"
    assert not (workspace / "build" / "demo.engine").exists()


@pytest.mark.parametrize("where", ["/", "/etc", "/usr/lib", "/tmp", "HOME", "HOME/..", "WS", "WS/.trtls/store"])
def test_system_home_and_recipe_folders_are_never_a_store(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    home = tmp_path / "home" / "me"
    home.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    root = Path(where.replace("HOME", str(home)).replace("WS", str(workspace)))
    store = Store(root, "read")  # read: even a store that is only read is judged
    with pytest.raises(StoreUnusable) as refused:
        store.check()
    assert refused.value.code == "TRT339"


@pytest.mark.parametrize(("where", "why"), [(".", "recipe's folder"), ("models", "holds"), ("build", "holds"),
                                            (".trtls", ".trtls"), ("..", "holds the recipe's folder")])  # fmt: skip
def test_check_locates_a_store_path_that_is_no_place_for_a_store(workspace: Path, where: str, why: str) -> None:
    (workspace / ".trtls").mkdir(exist_ok=True)
    with_store(workspace, Path(where))
    loaded = load_recipe(workspace / "trtls.toml")  # the check reports it when the recipe loads (every face)
    found = [f for f in loaded.findings if f.path == ("store", "path")]
    assert [(f.code, f.path) for f in found] == [("TRT339", ("store", "path"))]
    assert why in found[0].message


def test_a_store_of_its_own_folder_passes_the_check_and_is_marked_when_made(workspace: Path, tmp_path: Path) -> None:
    with_store(workspace, tmp_path / "team" / "store")
    loaded = load_recipe(workspace / "trtls.toml")
    assert loaded.recipe is not None and store_path_findings(loaded, loaded.recipe) == []
    Store(tmp_path / "team" / "store").check()
    assert (tmp_path / "team" / "store" / OWNED_MARK).read_text().startswith("trtls engine store")


def test_store_gc_never_sweeps_a_folder_that_is_not_a_store(workspace: Path) -> None:
    """`[store] path = "."`: `store gc` used to delete every old file in `./tmp` whose name it did not know."""
    mine = old_file(workspace / "tmp" / "mine.txt")
    leftover_like = old_file(workspace / "tmp" / f"tmp-publish-{'a' * 64}-999999999-1")
    with_store(workspace, Path("."))
    done = trtls("store", "gc", str(workspace))
    assert done.returncode in (0, 2), done.stderr
    assert "Traceback" not in done.stderr
    assert mine.read_text() == "someone's notes" and leftover_like.exists()


def test_store_gc_takes_only_names_trtls_makes_in_tmp(workspace: Path, tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    store.check()
    forged_entry(store, tmp_path, "kept")
    stranger = old_file(store.root / "tmp" / "notes.txt")
    dead_publish = store.root / "tmp" / f"tmp-publish-{'b' * 64}-999999999-1"
    dead_publish.mkdir()
    (dead_publish / "engine").write_bytes(b"half")
    with_store(workspace, store.root)
    done = trtls("store", "gc", str(workspace))
    assert done.returncode == 0 and "1 leftovers removed" in done.stdout, done.stdout + done.stderr
    assert stranger.read_text() == "someone's notes" and not dead_publish.exists()
    assert len(store.entries()) == 1


def test_store_gc_never_sweeps_through_a_tmp_that_is_a_symlink(workspace: Path, tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    store.check()
    outside = tmp_path / "outside"
    victims = [old_file(outside / "notes.txt"), old_file(outside / f"tmp-publish-{'c' * 64}-999999999-1")]
    (store.root / "tmp").rmdir()
    (store.root / "tmp").symlink_to(outside)
    with_store(workspace, store.root)
    done = trtls("store", "gc", str(workspace))
    assert "Traceback" not in done.stderr, done.stderr
    assert all(v.read_text() == "someone's notes" for v in victims)
    with pytest.raises(StoreUnusable, match="tmp is a symlink") as refused:
        store.check()  # a build refuses such a store, located on [store] path
    assert refused.value.code == "TRT339"


def test_a_key_from_a_record_is_never_a_path(workspace: Path, tmp_path: Path) -> None:
    """A known-good record whose key is `../../…` used to make `trtls rollback --to` move that folder into the store's
    quarantine."""
    store_dir = tmp_path / "store"
    Store(store_dir).check()
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "entry.json").write_text("{}")  # an entry that fails verification is moved to quarantine
    (victim / "precious.txt").write_text("mine")
    with_store(workspace, store_dir)
    engines = workspace / ".trtls" / "engines"
    engines.mkdir(parents=True)
    record = {"buildId": "evil", "key": "../../victim", "sha256": "0" * 64, "size": 1, "startedAt": 1}
    (engines / "demo.json").write_text(json.dumps({"format": "trtls.known-good/1", "builds": [record]}))
    done = trtls("rollback", "demo", str(workspace), "--to", "evil")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "TRT338" in done.stderr and "Traceback" not in done.stderr
    assert (victim / "precious.txt").read_text() == "mine" and (victim / "entry.json").read_text() == "{}"
    assert list((store_dir / "quarantine").iterdir()) == []
    for bad in ("../../victim", "A" * 64, "a" * 63, "", "a" * 64 + "/x"):
        with pytest.raises(Refused, match="not an engine key"):
            Store(store_dir).get(bad)
    assert (victim / "precious.txt").exists()


def test_a_store_of_an_older_trtls_is_recognised_and_marked(seeded: tuple[Path, dict], tmp_path: Path) -> None:
    store_dir = copy_store(seeded, tmp_path)
    (store_dir / OWNED_MARK).unlink()  # as an older trtls left it: only its own folders
    Store(store_dir).check()
    assert (store_dir / OWNED_MARK).is_file() and len(Store(store_dir).entries()) == 1


def test_a_store_subfolder_swapped_for_a_symlink_is_named_in_the_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the hostile-filesystem property (a `rollback` while `<store>/entries` became a link to a folder
    outside): TRT331 named the store folder only, not the part of it that was refused. The swap lands after the
    store's folders were judged (a link seen there is TRT339, naming it) and before the walk that makes them."""
    import trtls.store.folder as store_folder

    Store(tmp_path / "store").check()  # made and marked
    outside = tmp_path / "outside"
    outside.mkdir()
    entries = tmp_path / "store" / "entries"
    make_store = store_folder.make_store

    def swapped_then_made(root: Path) -> None:
        entries.rmdir()
        entries.symlink_to(outside)
        make_store(root)

    monkeypatch.setattr(store_folder, "make_store", swapped_then_made)
    with pytest.raises(StoreUnusable) as refused:
        Store(tmp_path / "store").check()
    assert refused.value.code == "TRT331" and str(entries) in str(refused.value)
    assert list(outside.iterdir()) == []  # nothing made through the link
