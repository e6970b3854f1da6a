"""`trtls farm up` with `$TRTLS_FARM_STATE` naming a file that is not a farm state (a user's JSON, a recipe) replaced it
with the farm's state, and `trtls farm down` then removed it: the user's file was lost. A token path beside it holding
a user's file was replaced too. Both are refused now, before anything is written or started; the files are
unchanged."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def farm(state: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRTLS_FARM_STATE": str(state)}
    return subprocess.run(
        [sys.executable, "-m", "trtls.cli.main", "farm", *args], capture_output=True, text=True, env=env, timeout=180
    )


@pytest.mark.parametrize(
    ("name", "text", "token_text"),
    [
        ("data.json", '{"mine": true}\n', None),
        ("trtls.toml", "version = 1\n", None),
        ("farm.json", None, "my notes, not a token\n"),
    ],
)
def test_a_file_that_is_not_the_farms_is_never_replaced(
    tmp_path: Path, name: str, text: str | None, token_text: str | None
) -> None:
    state = tmp_path / name
    token = state.with_suffix(".token")
    if text is not None:
        state.write_text(text)
    if token_text is not None:
        token.write_text(token_text)
    try:
        r = farm(state, "up", "--num-cpus", "1", "--workers", "0")
    finally:  # a farm the command wrongly started is stopped, never left running
        if text is None and state.exists() or text is not None and state.read_text() != text:
            farm(state, "down")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "is there but is not a trtls farm" in r.stderr and "left as it is" in r.stderr, r.stderr
    assert (state.read_text() if state.exists() else None) == text
    assert (token.read_text() if token.exists() else None) == token_text
    assert not state.with_suffix(".log").exists()  # nothing started


def test_a_users_log_beside_the_state_path_is_never_appended_to(tmp_path: Path) -> None:
    """`$TRTLS_FARM_STATE=…/notes.json` beside a user's `notes.log`: `farm up` appended the head's output (and its
    SIGTERM dump at `farm down`) to the user's file. A log that is not the farm's (neither empty nor beginning
    `trtls farm`) is refused now like the state and the token, before anything is written or started."""
    state = tmp_path / "notes.json"
    log = tmp_path / "notes.log"
    log.write_text("my precious notes\n")
    try:
        r = farm(state, "up", "--num-cpus", "1", "--workers", "0")
    finally:  # a farm the command wrongly started is stopped, never left running
        if state.exists():
            farm(state, "down")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert f"{log} is there but is not a trtls farm log" in r.stderr and "left as it is" in r.stderr, r.stderr
    assert log.read_text() == "my precious notes\n"
    assert not state.exists() and not state.with_suffix(".token").exists()  # nothing written, nothing started


@pytest.mark.parametrize("name", ["farm.token", "farm.log", "relative"])
def test_a_state_path_the_state_token_and_log_cannot_share_is_refused(tmp_path: Path, name: str) -> None:
    """`$TRTLS_FARM_STATE=…/f.token` made the state and its token one file (the token written over the state, drivers'
    authentication broken); `…/f.log` the state and the head's log; a relative path a farm each command looks for in
    its own folder. `farm up` refuses each, exit 1, before anything is written or started."""
    state = Path("farm.json") if name == "relative" else tmp_path / name
    env = {**os.environ, "TRTLS_FARM_STATE": str(state)}
    r = subprocess.run(
        [sys.executable, "-m", "trtls.cli.main", "farm", "up", "--num-cpus", "1", "--workers", "0"],
        capture_output=True, text=True, env=env, timeout=180, cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert ("relative path" if name == "relative" else "would be one file") in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "nothing written"
