"""The engine-store tests share one real build of `demo` published to a store (copied per test)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.store.helpers import entries, run_build, summaries, with_store
from tests.store.nginx_dav import nginx_dav  # noqa: F401  (a fixture: a real nginx WebDAV server, test_remote*)


@pytest.fixture(scope="session")
def seeded(tmp_path_factory: pytest.TempPathFactory, quickstart_models: Path) -> tuple[Path, dict]:
    """One real build of `demo` published to a store; each test works on its own copy of that store."""
    from tests.conftest import QUICKSTART

    root = tmp_path_factory.mktemp("seed")
    ws = root / "ws"
    shutil.copytree(QUICKSTART, root / "pristine", ignore=shutil.ignore_patterns(".trtls", "build"))
    shutil.copytree(root / "pristine", ws)
    store = root / "store"
    with_store(ws, store)
    done = run_build(ws)
    assert done.returncode == 0, done.stderr
    (summary,) = summaries(ws)
    assert summary["outcome"] == "built" and summary["store"]["used"] and summary["engineKey"]
    assert [e.name for e in entries(store)] == [summary["engineKey"]]
    return store, summary


def copy_store(seeded: tuple[Path, dict], tmp_path: Path) -> Path:
    store = tmp_path / "store"
    shutil.copytree(seeded[0], store)
    return store


@pytest.fixture
def seed_ws(seeded: tuple[Path, dict], tmp_path: Path) -> Path:
    """A fresh workspace with the very models the seed was built from (samples/quickstart/models may be regenerated
    by another session meanwhile: other bytes, another key — a rebuild, rightly)."""
    ws = tmp_path / "ws"
    shutil.copytree(seeded[0].parent / "pristine", ws)
    return ws
