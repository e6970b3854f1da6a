"""The relay's last `trtls/buildTree` of a finished build carries its evidence path (the CI e2e failure: a finished
demo row with no Show Evidence / Show Build Timeline). A build's outcome is set before its evidence is written (the
output's sha is re-read from disk first); under load the relay woke in between, drew the row finished with no
evidence, and stopped. A real demo build in this process, its verification slowed as a loaded disk would."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from trtls.builds.supervisor.output_guard import OutputGuard
from trtls.lsp import build_relay
from trtls.lsp.build_relay import BuildRelay

from ..builds.helpers import run_build


class RecordingTransport:
    """What the relay sends, kept in order (the LSP transport, not the logic under test)."""

    def __init__(self) -> None:
        self.trees: list[dict[str, Any]] = []
        self.sent_at: list[float] = []
        self.protocol = SimpleNamespace(notify=self._notify)

    def _notify(self, method: str, params: dict[str, Any]) -> None:
        self.trees.append(params)
        self.sent_at.append(asyncio.get_running_loop().time())

    def window_log_message(self, params: Any) -> None:
        pass


async def test_the_last_tree_of_a_finished_build_names_its_evidence(workspace: Path, monkeypatch) -> None:
    slow_verify = OutputGuard.verify_written

    async def verify_on_a_loaded_disk(self: OutputGuard, build: Any) -> None:
        await asyncio.sleep(2.5)  # longer than the relay's 1 s tick: it wakes with the outcome set, no summary yet
        await slow_verify(self, build)

    monkeypatch.setattr(OutputGuard, "verify_written", verify_on_a_loaded_disk)
    _, build = await run_build(workspace)
    ls = RecordingTransport()
    done: list[str] = []
    relay = BuildRelay(
        ls, build, "file:///w/trtls.toml", send_tree=True, has_progress=False, on_done=lambda b: done.append(b.id)
    )
    await relay.start()
    summary = await build.wait()
    await asyncio.wait_for(_until(lambda: done), 30)
    assert summary.outcome == "built", summary.error
    last = ls.trees[-1]
    assert last["status"] == "built"
    assert last["evidencePath"] == str(build.evidence_dir / "summary.json") and Path(last["evidencePath"]).is_file()


async def _until(cond: Any) -> None:
    while not cond():
        await asyncio.sleep(0.05)


async def test_running_builds_share_the_trees_a_second_and_the_last_state_still_goes(
    workspace: Path, monkeypatch
) -> None:
    """With 29 other builds' relays counted as running, a real build's relay sends a tree at most every 3 s (30 builds
    / TREES_PER_S): the first, then none while it runs less than that, then its finished state before `end`."""
    others = {object() for _ in range(29)}
    monkeypatch.setattr(build_relay, "_tree_relays", set(others))
    assert build_relay.tree_interval() == 2.9  # before this build's relay joins
    _, build = await run_build(workspace)
    ls = RecordingTransport()
    done: list[Any] = []
    relay = BuildRelay(ls, build, "file:///w/trtls.toml", send_tree=True, has_progress=False, on_done=done.append)
    await relay.start()
    assert build_relay.tree_interval() == 3.0
    await build.wait()
    await asyncio.wait_for(_until(lambda: done), 30)
    running = [t for t, tree in zip(ls.sent_at, ls.trees, strict=True) if tree["running"]]
    assert all(b - a >= 3.0 - 0.01 for a, b in zip(running, running[1:], strict=False)), ls.sent_at
    assert ls.trees[-1]["status"] == "built" and not ls.trees[-1]["running"]
    assert build_relay._tree_relays == others, "its relay left the count at its end"


async def test_a_relay_whose_send_raises_leaves_the_shared_count(workspace: Path, monkeypatch) -> None:
    """A relay that could not send (a client gone, a tree its model refused) used to stay counted as running: every
    other build's trees were then held for a build that had ended. A real build; the transport raises on each tree."""
    monkeypatch.setattr(build_relay, "_tree_relays", set())
    _, build = await run_build(workspace)
    ls = RecordingTransport()

    def refuse(method: str, params: dict[str, Any]) -> None:
        raise ConnectionResetError("the client went away")

    ls.protocol.notify = refuse
    relay = BuildRelay(ls, build, "file:///w/trtls.toml", send_tree=True, has_progress=False, on_done=lambda b: None)
    await relay.start()
    assert build_relay._tree_relays == {relay}
    await build.wait()
    await asyncio.wait_for(_until(lambda: not build_relay._tree_relays), 30)
    assert build_relay.tree_interval() == build_relay.MIN_INTERVAL_S
