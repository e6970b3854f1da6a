"""Every folder trtls writes under `.trtls/` is judged by the path policy (issue 22): a symlink planted one level
down (the fast-path memos in `.trtls/engines`, reductions in `.trtls/reduce`) that leads out of the recipe folder is
TRT118, like `runs` or `locks`; and a timing cache's lock file is never opened through a symlink."""

from __future__ import annotations

import fcntl
from pathlib import Path

import pytest

from trtls.builds.timing_cache import cache_lock
from trtls.onnx_files.profile_checks import check_recipe


@pytest.mark.parametrize("sub", ["engines", "reduce", "runs"])
def test_a_symlinked_state_folder_leading_out_is_refused(workspace: Path, tmp_path: Path, sub: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (workspace / ".trtls").mkdir(exist_ok=True)
    (workspace / ".trtls" / sub).symlink_to(elsewhere)
    loaded = check_recipe(workspace / "trtls.toml")
    messages = [f.message for f in loaded.findings if f.code == "TRT118"]
    assert any(f".trtls/{sub}" in m for m in messages), [f.message for f in loaded.findings]


def test_a_cache_lock_is_never_opened_through_a_symlink(tmp_path: Path) -> None:
    precious = tmp_path / "precious"
    precious.write_text("data")
    cache = tmp_path / "demo.timing-cache"
    (tmp_path / "demo.timing-cache.lock").symlink_to(precious)
    with pytest.raises(OSError), cache_lock(cache):
        pass
    assert precious.read_text() == "data"
    (tmp_path / "demo.timing-cache.lock").unlink()
    with cache_lock(cache):
        with open(tmp_path / "demo.timing-cache.lock") as other, pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the real lock is held
