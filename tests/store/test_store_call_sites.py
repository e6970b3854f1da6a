"""Issue 32: what a build tells the store's statistics (a hit restored, kept or served by the fast path; a miss with
its reasons), the store's own notes in the evidence's warnings, and the `--json` stream's line when a build waits
for another process's build of its key — with the seeded real engine and real `trtls build` processes."""

from __future__ import annotations

import asyncio
import json
import queue
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.builds.helpers import loaded
from tests.store.conftest import copy_store
from tests.store.helpers import build_cmd, run_build, summaries, with_store
from trtls.builds.avoidance import lookup as avoidance
from trtls.builds.avoidance.reuse import fast_hit
from trtls.store.entries import Store
from trtls.store.lock import KeyLock


def test_every_hit_and_miss_reaches_the_statistics(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_store(seed_ws, copy_store(seeded, tmp_path))
    calls: list[tuple[Any, ...]] = []
    hit = lambda store, entry, engine, how: calls.append(("hit", entry.key, engine, how))  # noqa: E731
    miss = lambda store, key, engine, reasons: calls.append(("miss", key, engine, reasons))  # noqa: E731
    monkeypatch.setattr("trtls.builds.avoidance.restore.record_hit", hit)
    monkeypatch.setattr("trtls.store.stats.record_hit", hit)  # the fast path imports it when it serves
    monkeypatch.setattr("trtls.builds.avoidance.lookup.record_miss", miss)
    key = seeded[1]["engineKey"]

    async def lookup(edit: dict[str, str] | None = None) -> tuple[Any, dict[str, Any] | None]:
        ld = loaded(seed_ws, edit)
        use = await asyncio.to_thread(avoidance.prepare, ld, "demo")
        reused = await avoidance.reuse_or_lock(use, ld)
        use.release()
        return use, reused

    asyncio.run(lookup())  # restored to an empty output
    asyncio.run(lookup())  # the output already holds it: kept
    assert fast_hit(seed_ws / "trtls.toml", "demo") is not None  # unchanged since: the fast path
    assert calls == [("hit", key, "demo", "restored"), ("hit", key, "demo", "kept"), ("hit", key, "demo", "fast")]
    calls.clear()
    use, reused = asyncio.run(lookup({"max = [8, 3, 32, 32]": "max = [16, 3, 32, 32]"}))
    assert reused is None and use.key is not None
    assert calls == [("miss", use.key.hex, "demo", ["profile 0 input.max [8,3,32,32] → [16,3,32,32]"])]


def test_the_stores_own_notes_are_in_the_evidence_warnings(seeded: tuple[Path, dict], seed_ws: Path,
                                                           tmp_path: Path) -> None:  # fmt: skip
    with_store(seed_ws, copy_store(seeded, tmp_path))
    use = avoidance.prepare(loaded(seed_ws), "demo")
    assert isinstance(use.store, Store)
    use.store.notes.append("the remote store http://cache.example/ did not answer: used the local store only")
    assert use.record()["warnings"] == [
        "the remote store http://cache.example/ did not answer: used the local store only"
    ]


def test_json_stream_says_the_build_waited_for_another_process(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    store = copy_store(seeded, tmp_path)
    key = seeded[1]["engineKey"]
    shutil.rmtree(store / "entries" / key)  # not stored yet: another process builds it (the test holds its lock)
    with_store(seed_ws, store)
    lock = KeyLock(store, key)
    assert lock.try_acquire("demo-20261201-101500-ab12cd")
    proc = subprocess.Popen([*build_cmd(seed_ws), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    # one reader of stdout (the thread): communicate() beside it would read part of the last line itself
    reader = threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout or []], daemon=True)
    errors: list[str] = []
    err_reader = threading.Thread(target=lambda: errors.append(proc.stderr.read() if proc.stderr else ""), daemon=True)
    reader.start()
    err_reader.start()
    try:  # a deadline only so that a build that never says it waits fails instead of hanging (it waits on us)
        first = json.loads(lines.get(timeout=120))
    finally:
        lock.release()  # the holder ends without publishing: the waiter builds it itself
    proc.wait(timeout=600)
    reader.join(timeout=60)
    err_reader.join(timeout=60)
    err = "".join(errors)
    assert proc.returncode == 0, err
    rest = []
    while not lines.empty():
        rest.append(lines.get())
    assert first["type"] == "store_wait" and first["engine"] == "demo"
    assert first["holder"]["buildId"] == "demo-20261201-101500-ab12cd" and isinstance(first["holder"]["pid"], int)
    last = json.loads([line for line in rest if line.strip()][-1])
    assert last["type"] == "summary" and last["summary"]["store"]["waitedFor"] == first["holder"]["line"]
    assert summaries(seed_ws)[-1]["outcome"] == "built" and run_build(seed_ws).returncode == 0
