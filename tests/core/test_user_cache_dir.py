"""One owner for trtls's per-user cache folder (core.paths.user_cache_dir): the engine store's default and the warm
farm's state file are both under it, and both ignore a relative XDG_CACHE_HOME (the XDG base directory
specification: it would put them in whatever folder a command ran in). The farm's state once took it as given."""

from __future__ import annotations

from pathlib import Path

import pytest

from trtls.builds.farm.warm_farm import state_path
from trtls.core.paths import user_cache_dir
from trtls.store.config import default_store_path


@pytest.mark.parametrize("xdg", ["cache", "./x", ""])
def test_a_relative_or_empty_xdg_cache_home_is_ignored_by_the_store_and_the_farm(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, xdg: str
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", xdg)
    monkeypatch.delenv("TRTLS_FARM_STATE", raising=False)
    assert user_cache_dir() == tmp_path / ".cache" / "trtls"
    assert default_store_path() == tmp_path / ".cache" / "trtls" / "store"
    assert state_path() == tmp_path / ".cache" / "trtls" / "farm.json"


def test_an_absolute_xdg_cache_home_holds_both(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("TRTLS_FARM_STATE", raising=False)
    assert default_store_path().parent == state_path().parent == tmp_path / "xdg" / "trtls"
