"""A user's folder is never adopted as an engine store because it happens to hold a `tmp/` or a `stats/` (issue 27
item 1, tried again): an unmarked folder holding only store-named subfolders was taken for a store an older trtls
made, marked, and then `trtls store gc` removed the user's old `tmp/tmp-…` file and the store's statistics pruning
the user's `stats/<day>.<n>.jsonl`. Real `trtls` processes, real folders; the user's files are checked byte for byte.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trtls.fs.kinds import OWNED_MARK
from trtls.store.entries import Store, StoreUnusable

OLD = time.time() - 200 * 86400  # older than a sweep of tmp/ (an hour) and the statistics kept (90 days)
KEY = "ab" * 32


def trtls(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trtls", *args], capture_output=True, text=True, timeout=300, cwd=cwd)


def old_file(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (OLD, OLD))
    return path


def recipe(folder: Path, store: Path) -> Path:
    folder.mkdir()
    (folder / "model.onnx").write_bytes(b"not read by check's store rule")
    text = f'[engines.demo]\nonnx = "model.onnx"\noutput = "build/demo.engine"\n\n[store]\npath = "{store}"\n'
    (folder / "trtls.toml").write_text(text)
    return folder


@pytest.mark.parametrize(
    "layout",
    [
        {"tmp/tmp-notes.txt": "my notes"},  # a name a sweep of <store>/tmp takes
        {"stats/2024-01-01.5.jsonl": "my log", "tmp/scratch.txt": "x"},  # a name the statistics pruning takes
        # every folder an older store had, but a user's file in one of them
        {f"{sub}/{KEY}": "k" for sub in ("entries", "used", "quarantine", "tmp")} | {"locks/mine.txt": "x"},
    ],
)
def test_a_users_folder_with_store_named_subfolders_is_not_made_a_store(tmp_path: Path, layout: dict) -> None:
    user = tmp_path / "work"
    files = {name: old_file(user / name, text) for name, text in layout.items()}
    project = recipe(tmp_path / "project", user)

    check = trtls("check", str(project), cwd=tmp_path)
    assert check.returncode != 0 and "TRT339" in check.stdout + check.stderr, check.stdout + check.stderr
    assert "did not make a store" in check.stdout + check.stderr
    with pytest.raises(StoreUnusable, match="did not make a store"):
        Store(user).check()  # what a build does before it creates or uses the store
    gc = trtls("store", "gc", str(project), cwd=tmp_path)
    assert "Traceback" not in gc.stdout + gc.stderr

    assert not (user / OWNED_MARK).exists(), "the user's folder was marked as a store"
    assert {n: p.read_text() for n, p in files.items()} == layout, "a file of the user's folder changed or went"
    assert sorted(str(p.relative_to(user)) for p in user.rglob("*") if p.is_file()) == sorted(layout)


def test_an_older_trtls_store_is_still_recognised(tmp_path: Path) -> None:
    """What an older trtls left (its five folders, names carrying the entry key) is still taken and marked."""
    store = tmp_path / "store"
    for sub in ("entries", "used", "locks", "quarantine", "tmp"):
        (store / sub).mkdir(parents=True)
    (store / "locks" / f"{KEY}.lock").write_text("")
    (store / "tmp" / f"evicted-{KEY}-12-34").mkdir()
    Store(store).check()
    assert (store / OWNED_MARK).is_file()
