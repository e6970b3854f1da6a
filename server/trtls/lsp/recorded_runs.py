"""Builds this server did not start that the editor shows all the same: the latest recorded run of each engine of an
open recipe (report/capability_lens.latest_runs), whose Evidence lens names it after a `trtls build` in a terminal
or a server restart, and whose `onnx` hover says what TensorRT said of the model then and whether it changed since.

The records are read off the event loop (`RecordedRuns`): the first lens of a recipe with 50 recorded runs would
otherwise wait on ~0.5–1 s of reading, and with it every hover, completion and cancel behind it. A lens or a hover is
answered from the last reading (none at first), a fresh one runs in a thread, and the lenses are asked again when it
lands with another answer. The hover's "model changed since?" never hashes a big model on the loop either
(`ModelDigests`): a stat and the digest cache answer an unchanged model, an edited one is hashed in a thread.

trtls.showEvidence and trtls.buildReport answer such a build from its evidence as they answer a reuse (a finished
RestoredRun); it is not registered, so trtls.listBuilds still lists only this server's runs, and an id the registry
forgot that no lens shows stays unknown."""

from __future__ import annotations

import asyncio
import os
import stat
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
    pause_for_test(PAUSE_POINT, str(recipe))


def pause_for_test(point: str, said: str) -> None:
    """Test hook (`TRTLS_TEST_PAUSE=<point>:<folder>`, points `recorded_runs`, `model_digest` and `model_inputs`):
    fs/hold.test_pause, writing `<folder>/<point>.thread` (the reading thread's name) and `<folder>/<point>.reading`
    (what it reads), then holding until `<folder>/<point>.go` exists, so a test can hold a reading while it asks the
    server something, without sleeps."""
    import threading

    from trtls.fs.hold import test_pause

    test_pause(point, point, marks={"thread": threading.current_thread().name, "reading": said})


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
    from trtls.builds.roots import state_root
    from trtls.builds.supervisor.runs import RestoredRun
    from trtls.core.summary_record import SUMMARY_NAME, Summary, read_summary
    from trtls.report.capability_lens import latest_runs
    from trtls.report.evidence import runs_dir

    readings = recorded_runs(ls)
    for loaded in list(ls.recipes.values()):
        shown = readings.last_read(loaded.path)
        if run_id not in (shown if shown is not None else latest_runs(loaded.path)).values():
            continue
        record = runs_dir(loaded.path) / run_id / SUMMARY_NAME
        summary = read_summary(record, within=state_root(record))  # a run folder linked out is no record
        if isinstance(summary, Summary) and summary.buildId == run_id:
            return RestoredRun(summary, loaded.path)
    return None


def model_since(loaded: LoadedRecipe, engine: str, summary: Summary) -> ModelSince:
    """Whether the engine's model is still the one the recorded build read: its sha256 now against the record's
    `modelSha256` — written for every outcome, failed, cancelled and killed too — or, for a record of an older
    trtls, the one its known-good record holds (a built one's). The sha256 now is a stat and the digest cache's
    entry when the model is unchanged (`MODEL_DIGESTS`); a model written since (larger than HASH_IN_PLACE) is hashed
    in a thread, never on the event loop: `checking` until it lands, and the next hover has it."""
    from trtls.builds.supervisor.job import state_dir
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
        now = MODEL_DIGESTS.sha256(loaded.resolve(loaded.engine(engine).onnx), sdir)
    except (OSError, ValueError):
        return "unreadable"
    if now is CHECKING:
        return "checking"
    return "changed" if now != recorded else "unchanged"


class Checking:
    """The sha256 of a model that is being hashed in a thread now."""


CHECKING = Checking()
DIGEST_PAUSE_POINT = "model_digest"  # TRTLS_TEST_PAUSE=model_digest:<folder> holds each hashing (tests only)
MAX_DIGESTS = 256  # models whose sha256 this process remembers (a server hovers a few recipes' models)
HASH_IN_PLACE = 4 << 20  # a model this small is hashed where it is asked (a few ms); a larger one in a thread


class ModelDigests:
    """The sha256 of the models the hovers ask about, keyed by what a stat says of the file (its real path, device,
    inode, size and mtime): an unchanged model is a stat and, the first time, the digest cache's entry (the build's
    key hashed it there); a model with no known digest for that stat is hashed in a thread (one hashing per file
    state at a time), and CHECKING is answered until it lands. A digest is never answered for another state of the
    file: a model written since its hash is hashed again, so no stale "unchanged" is said. A model of at most
    HASH_IN_PLACE bytes is hashed where it is asked (a few milliseconds, an answer at once), as is any model without
    a running event loop (the CLI, a test calling the hover itself: no loop to hold)."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, int, int, int, int], str] = {}
        self._hashing: set[tuple[str, int, int, int, int]] = set()

    def sha256(self, model: Path, state: Path) -> str | Checking:
        """The model's sha256 now, or CHECKING while a thread hashes it; OSError or ValueError when it cannot be
        read (gone, not a regular file)."""
        from trtls.checkpoint.hashing import DigestCache
        from trtls.core.paths import real

        target = real(Path(model).absolute())  # the builder reads where a link leads (store.key._digests)
        key = _file_state(target)
        if key in self._known:
            return self._known[key]
        cached = DigestCache(state / "digests.json").get(target, os.stat(target))
        if cached is not None:
            return self._remember(key, cached)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None or key[3] <= HASH_IN_PLACE:
            return self._remember(key, *_hash(target, state, key))
        if key not in self._hashing:
            self._hashing.add(key)
            hashing = loop.run_in_executor(None, _hash_in_thread, target, state, key)
            hashing.add_done_callback(lambda done: self._land(key, done))
        return CHECKING

    def _remember(self, key: tuple[str, int, int, int, int], sha: str, racy: bool = False) -> str:
        """`racy`: the file was written within RACY_NS of its hash, when a write of the same size in the same clock
        tick would keep its stat: answered once, never remembered (as the digest cache does)."""
        if racy:
            return sha
        if len(self._known) >= MAX_DIGESTS:
            self._known.clear()
        self._known[key] = sha
        return sha

    def _land(self, key: tuple[str, int, int, int, int], done: asyncio.Future[tuple[str, bool]]) -> None:
        self._hashing.discard(key)
        if not done.cancelled() and done.exception() is None:
            self._remember(key, *done.result())  # else: gone, or written while hashed: the next hover hashes again


MODEL_DIGESTS = ModelDigests()


def _file_state(target: Path) -> tuple[str, int, int, int, int]:
    st = os.stat(target)
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{target} is not a regular file")
    return (str(target), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _hash_in_thread(target: Path, state: Path, key: tuple[str, int, int, int, int]) -> tuple[str, bool]:
    """`_hash` in the executor's thread, held there by the test hook (`TRTLS_TEST_PAUSE=model_digest:<folder>`)."""
    pause_for_test(DIGEST_PAUSE_POINT, str(target))
    return _hash(target, state, key)


def _hash(target: Path, state: Path, key: tuple[str, int, int, int, int]) -> tuple[str, bool]:
    """In a thread (or in place without a loop): the model's sha256 through the digest cache (saved for the next
    build's key and the next server), and whether it is racy (written within RACY_NS of now); ValueError when the
    file was written while it was hashed (that digest is of neither state)."""
    from trtls.checkpoint.hashing import RACY_NS
    from trtls.store.key import KeyUnavailable, file_sha256

    try:
        sha = file_sha256(target, state)
    except KeyUnavailable as exc:
        raise ValueError(str(exc)) from exc
    if sha is None or _file_state(target) != key:
        raise ValueError(f"{target} changed while it was hashed")
    return sha, time.time_ns() - key[4] < RACY_NS
