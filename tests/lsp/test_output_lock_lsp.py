"""One writer per output across faces (issue 22, item 6): a build in the real language server (over stdio) and a real
`trtls build` process of the same output, at the same time.

Both workers stop right after their rename (the `TRTLS_TEST_PAUSE=after_rename` hook), still holding the output: at
that moment the other build must be waiting and must not have reached its own rename, the engine on disk is the
holder's, and the holder's evidence must record exactly that sha. Each order (the server first, the CLI first) is
run, and a server build cancelled while it waits says nothing false about an engine it never touched."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from trtls.builds.supervisor.output_lock import OutputLock, lock_path
from trtls.core.display import previous_engine_text
from trtls.core.summary_record import Summary

from ..builds.cli_procs import CliBuild, is_waiting_line, pause_env, sha256_of, wait_for_file
from ..builds.test_output_lock import older_engine
from .raw_stdio import RawServer


def start_server(ws: Path, pause: Path, monkeypatch: pytest.MonkeyPatch) -> RawServer:
    """A server whose builds' workers stop after their rename (the env is the server's only: CLIs get their own).
    The recipe is open with an unsaved edit (demo's max batch 4, not 8): the server builds the text the editor
    shows, so its engine differs from the CLI's and each sha says whose engine it is."""
    with monkeypatch.context() as m:
        m.setenv("TRTLS_TEST_PAUSE", pause_env(pause, "after_rename")["TRTLS_TEST_PAUSE"])
        s = RawServer(cwd=ws)
    s.initialize(ws)
    uri = (ws / "trtls.toml").as_uri()
    edited = (ws / "trtls.toml").read_text().replace("max = [8, 3, 32, 32]", "max = [4, 3, 32, 32]", 1)
    s.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "toml", "version": 1,
                                                       "text": edited}})  # fmt: skip
    return s


def command(s: RawServer, name: str, arg: dict[str, Any]) -> dict[str, Any]:
    response = s.request("workspace/executeCommand", {"command": name, "arguments": [arg]}, timeout=60)
    assert "result" in response, response
    return response["result"]


def server_build(s: RawServer, ws: Path) -> str:
    res = command(s, "trtls.buildEngine", {"uri": (ws / "trtls.toml").as_uri(), "engine": "demo"})
    assert res["status"] == "started", res
    return res["buildId"]


def server_status(s: RawServer, build_id: str) -> str:
    rows = [r for r in command(s, "trtls.listBuilds", {})["builds"] if r["buildId"] == build_id]
    return rows[0]["status"] if rows else ""


def until(predicate, what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def summary_of(ws: Path, build_id: str, timeout: float = 300) -> dict[str, Any]:
    path = ws / ".trtls" / "runs" / build_id / "summary.json"
    until(path.is_file, f"no evidence for {build_id}", timeout)
    return json.loads(path.read_text())


def lock_holder(ws: Path) -> str | None:
    out = ws / "build" / "demo.engine"
    return OutputLock(lock_path(ws / ".trtls" / "locks", out), out).holder().get("buildId")


def release_all(*folders: Path) -> None:
    """Let every paused worker go (a failing test must not leave workers waiting for ten minutes)."""
    for folder in folders:
        for marker in folder.glob("*.after_rename"):
            (folder / (marker.name.removesuffix(".after_rename") + ".go")).write_text("")


@pytest.mark.parametrize("first", ["server", "cli"])
def test_a_server_build_and_a_cli_build_of_one_output_take_turns_and_record_what_is_on_disk(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first: str
) -> None:
    engine = workspace / "build" / "demo.engine"
    p_server, p_cli = tmp_path / "pause-server", tmp_path / "pause-cli"
    s = start_server(workspace, p_server, monkeypatch)
    cli: CliBuild | None = None
    try:
        if first == "server":
            held_id = server_build(s, workspace)
            held_marker = wait_for_file(p_server, ".after_rename")
            cli = CliBuild(workspace, "demo", env=pause_env(p_cli, "after_rename"))
            waiting = cli.wait_for(is_waiting_line)
            assert held_id in waiting["msg"] and "language server" in waiting["msg"], waiting
            waiter_id = ""  # a CLI build says its id once it holds the output: its marker names it below
            waiter_pause = p_cli
        else:
            cli = CliBuild(workspace, "demo", env=pause_env(p_cli, "after_rename"))
            held_marker = wait_for_file(p_cli, ".after_rename")
            held_id = cli.wait_for(lambda ln: ln.get("type") == "build_started")["build_id"]
            waiter_id = server_build(s, workspace)
            until(lambda: f"waiting for build {held_id}" in server_status(s, waiter_id), "the server build waits")
            waiter_pause = p_server
        assert held_marker.name == f"{held_id}.after_rename"
        # the holder has renamed its engine and still holds the output; the other has not reached its rename
        assert lock_holder(workspace) == held_id
        assert not list(waiter_pause.glob("*.after_rename"))
        on_disk_first = sha256_of(engine)
        (held_marker.parent / f"{held_id}.go").write_text("")

        waiter_marker = wait_for_file(waiter_pause, ".after_rename")
        waiter_id = waiter_id or waiter_marker.name.removesuffix(".after_rename")
        assert waiter_marker.name == f"{waiter_id}.after_rename"
        assert lock_holder(workspace) == waiter_id
        on_disk_second = sha256_of(engine)
        (waiter_pause / f"{waiter_id}.go").write_text("")

        s_first, s_second = summary_of(workspace, held_id), summary_of(workspace, waiter_id)
        assert cli.finish() == 0
    finally:
        release_all(p_server, p_cli)
        if cli is not None:
            cli.kill()
        code = s.close()
    assert s_first["outcome"] == s_second["outcome"] == "built"
    assert on_disk_first != on_disk_second, "two different engines, so each sha names whose engine is on disk"
    # exactly one at a time: the second took the output only after the first had written its evidence
    first_done = (workspace / ".trtls" / "runs" / held_id / "summary.json").stat().st_mtime
    assert first_done <= s_second["outputLock"]["acquiredAt"] + 1e-3
    assert s_second["outputLock"]["waitedFor"] == [held_id] and s_first["outputLock"]["waitedFor"] == []
    # each evidence records the engine that was on disk after its own rename, re-read and verified
    for s_, sha in ((s_first, on_disk_first), (s_second, on_disk_second)):
        art = s_["engineArtifact"]
        assert art["sha256"] == sha and art["reportedSha256"] == sha and art["verified"] is True, art
    assert sha256_of(engine) == on_disk_second
    err = s.stderr.decode(errors="replace")
    assert "Traceback" not in err and code == 0, err[-3000:]


def test_a_server_build_cancelled_while_it_waits_for_a_cli_rename_says_nothing_false(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server face of the issue's case: the CLI holder has renamed a new engine over an old one and still holds
    the output; a server build of the same output, waiting, is cancelled. It never touched the file."""
    previous = older_engine(workspace)  # an engine at the output, other bytes than the holder's
    p_server, p_cli = tmp_path / "pause-server", tmp_path / "pause-cli"
    s = start_server(workspace, p_server, monkeypatch)
    holder = CliBuild(workspace, "demo", env=pause_env(p_cli, "after_rename"))
    try:
        marker = wait_for_file(p_cli, ".after_rename")
        held_id = marker.name.removesuffix(".after_rename")
        waiter_id = server_build(s, workspace)
        until(lambda: f"waiting for build {held_id}" in server_status(s, waiter_id), "the server build waits")
        assert command(s, "trtls.cancelBuild", {"buildId": waiter_id})["accepted"] is True
        s_waiter = summary_of(workspace, waiter_id)
        (p_cli / f"{held_id}.go").write_text("")
        s_holder = holder.summary()
        assert holder.finish() == 0
    finally:
        release_all(p_cli)
        holder.kill()
        code = s.close()
    assert s_waiter["outcome"] == "cancelled" and s_waiter["workerPid"] is None
    assert any("while waiting for another build" in n for n in s_waiter["notes"])
    assert s_waiter["previousEngineIntact"] is not False
    assert "NOT intact" not in previous_engine_text(Summary.written(s_waiter))
    art = s_holder["engineArtifact"]
    on_disk = sha256_of(workspace / "build" / "demo.engine")
    assert art["sha256"] == on_disk and art["verified"] is True and on_disk != previous
    err = s.stderr.decode(errors="replace")
    assert "Traceback" not in err and code == 0, err[-3000:]
