"""Builds this server did not start that the editor shows all the same: the latest recorded run of each engine of an
open recipe (report/capability_lens.latest_runs), whose Evidence lens names it after a `trtls build` in a terminal
or a server restart, and whose `onnx` hover says what TensorRT said of the model then and whether it changed since.

The records are read off the event loop (`RecordedRuns`): the first lens of a recipe with 50 recorded runs would
otherwise wait on ~0.5–1 s of reading, and with it every hover, completion and cancel behind it. A lens or a hover is
answered from the last reading (none at first), a fresh one runs in a thread, and the lenses are asked again when it
lands with another answer.

trtls.showEvidence and trtls.buildReport answer such a build from its evidence as they answer a reuse (a finished
RestoredRun); it is not registered, so trtls.listBuilds still lists only this server's runs, and an id the registry
forgot that no lens shows stays unknown."""

from __future__ import annotations

import asyncio
import os
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trtls.builds.supervisor.runs import RestoredRun
    from trtls.core.recipe import LoadedRecipe
    from trtls.core.summary_record import Summary
    from trtls.lsp.language_server import TrtlsServer
    from trtls.report.capability_lens import ModelSince

PAUSE_POINT = "recorded_runs"  # TRTLS_TEST_PAUSE=recorded_runs:<folder> holds each reading (tests only)


class RecordedRuns:
    """Each recipe's latest recorded runs as last read, and at most one reading of them running at a time."""

    def __init__(self, landed: Callable[[], None]) -> None:
        self._read: dict[Path, dict[str, str]] = {}  # recipe → engine → run id, as last read
        self._reading: set[Path] = set()
        self._landed = landed  # on the loop, when a reading changed an answer (the server asks for new lenses)

    def latest(self, recipe: Path) -> dict[str, str]:
        """On the event loop: engine → its latest recorded run as last read ({} before the first reading lands), and
        a fresh reading started in a thread unless one runs; it is cheap after the first (a record is read again only
        when its folder changed: capability_lens's memo)."""
        if recipe not in self._reading:
            self._reading.add(recipe)
            reading = asyncio.get_running_loop().run_in_executor(None, _read_latest, recipe)
            reading.add_done_callback(lambda done: self._land(recipe, done))
        return self._read.get(recipe, {})

    def last_read(self, recipe: Path) -> dict[str, str] | None:
        """The last reading of `recipe`, starting none; None when none has landed."""
        return self._read.get(recipe)

    def _land(self, recipe: Path, done: asyncio.Future[dict[str, str]]) -> None:
        self._reading.discard(recipe)
        if done.cancelled() or done.exception() is not None:
            return  # the loop is closing, or the reading failed: the next request reads again
        before, self._read[recipe] = self._read.get(recipe, {}), done.result()
        if self._read[recipe] != before:
            self._landed()


def _read_latest(recipe: Path) -> dict[str, str]:
    from trtls.report.capability_lens import latest_runs

    _test_pause(recipe)
    return latest_runs(recipe)


def _test_pause(recipe: Path) -> None:
    """Test hook (`TRTLS_TEST_PAUSE=recorded_runs:<folder>`), as the worker's (builds/worker/commit_guard.test_pause):
    write `<folder>/recorded_runs.reading`, then wait until `<folder>/recorded_runs.go` exists, so a test can hold a
    reading while it asks the server something, without sleeps."""
    name, _, folder = os.environ.get("TRTLS_TEST_PAUSE", "").partition(":")
    if name != PAUSE_POINT or not folder:
        return
    from trtls.fs import Kind, atomic_write_text

    atomic_write_text(Path(folder, f"{PAUSE_POINT}.reading"), str(recipe), kind=Kind.scratch, within=folder)
    go = Path(folder, f"{PAUSE_POINT}.go")
    deadline = time.monotonic() + 600
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.01)


_by_server: weakref.WeakKeyDictionary[TrtlsServer, RecordedRuns] = weakref.WeakKeyDictionary()


def recorded_runs(ls: TrtlsServer) -> RecordedRuns:
    """The server's readings, made on first use; a reading that changes an answer asks the client for new lenses."""
    found = _by_server.get(ls)
    if found is None:
        found = _by_server[ls] = RecordedRuns(ls.refresh_lenses)
    return found


def recorded_build(ls: TrtlsServer, run_id: str) -> RestoredRun | None:
    """The finished build `run_id` when it is the latest recorded build of an engine of a recipe open here (the id is
    a run folder's name, found by listing, never a path taken from the client), its record read through the door and
    naming that very id; None otherwise. The last reading answers (it is what the lenses show); a recipe not read
    yet is read now."""
    from trtls.builds.supervisor.runs import RestoredRun
    from trtls.core.summary_record import SUMMARY_NAME, Summary, read_summary
    from trtls.report.capability_lens import latest_runs
    from trtls.report.evidence import runs_dir

    readings = recorded_runs(ls)
    for loaded in list(ls.recipes.values()):
        shown = readings.last_read(loaded.path)
        if run_id not in (shown if shown is not None else latest_runs(loaded.path)).values():
            continue
        summary = read_summary(runs_dir(loaded.path) / run_id / SUMMARY_NAME)
        if isinstance(summary, Summary) and summary.buildId == run_id:
            return RestoredRun(summary, loaded.path)
    return None


def model_since(loaded: LoadedRecipe, engine: str, summary: Summary) -> ModelSince:
    """Whether the engine's model is still the one the recorded build read: its sha256 now (through the digest
    cache: a stat when unchanged) against the record's `modelSha256` — written for every outcome, failed and
    cancelled too — or, for a record of an older trtls, the one its known-good record holds (a built one's)."""
    from trtls.builds.supervisor.build import state_dir
    from trtls.store.key import KeyUnavailable, file_sha256
    from trtls.store.known_good import KnownGood

    sdir = state_dir(loaded.path)
    recorded = summary.modelSha256
    if recorded is None and summary.buildId is not None and "modelSha256" not in summary.model_fields_set:
        parts = (KnownGood(sdir, engine).find(summary.buildId) or {}).get("parts")
        files = parts.get("files") if isinstance(parts, dict) else None
        recorded = files.get("onnx") if isinstance(files, dict) else None
    if not isinstance(recorded, str):
        return "not_recorded"
    if loaded.recipe is None or engine not in loaded.recipe.engines:
        return "unreadable"
    try:
        now = file_sha256(loaded.resolve(loaded.engine(engine).onnx), sdir)
    except (KeyUnavailable, OSError, ValueError):
        return "unreadable"
    if now is None:
        return "unreadable"
    return "changed" if now != recorded else "unchanged"
