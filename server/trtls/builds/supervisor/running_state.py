"""`running.json` as a declared record, and its one reader (issue 28: no free JSON at the seams).

The supervisor writes the record when a build starts (builds/supervisor/running_record.py); orphan recovery reads
it when that supervisor died (builds/supervisor/orphans.py, orphan_model.py). The record is untrusted — it can be
planted or damaged — so readers take its fields from a `RunningState` (`state.worker_pid`, `state.job.onnx`), never
from the dict by string, and every field is checked for the type the writer gives it: a pid is an int (never a
bool), `startedAt` a finite number, `job` an object, and so on.

Permissive where an older trtls left less: a field the record does not carry is None (an older record, or a build
whose worker was not started yet). A field that is there with a value trtls never writes is a damaged record:
`read_running_state` answers a `RunningProblem` naming the path and the field (every wrong field in `fields`, the
first one worded in `message`) and carrying `partial`, the record with the wrong fields left out, so recovery can
still complete the evidence and say why it signalled nothing. A record that cannot be read, is not JSON, is not an
object, or has no build id is a problem with no `partial`: nothing to recover.

`record()` gives back the JSON the record was read from (the keys it had, the job as written), so the supervisor
rewrites its own record through the model (running_record.note_previous_sha). No pydantic: the supervisor imports
this before a build's worker starts (issue 31).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

RUNNING = "running.json"
RECORD_LIMIT = 4 << 20  # a running.json is a few KiB (the job included); anything larger was not written by trtls


class _Fields:
    """Reads typed fields of one JSON object, noting every field whose value trtls never writes (its dotted name
    and a sentence) instead of raising: a wrong field reads as absent."""

    def __init__(self, data: dict[str, Any], prefix: str = "", wrong: list[tuple[str, str]] | None = None) -> None:
        self.data, self.prefix = data, prefix
        self.wrong: list[tuple[str, str]] = [] if wrong is None else wrong
        self.present: set[str] = set()

    def _get(self, key: str) -> object:
        if key in self.data:
            self.present.add(key)  # an explicit null included: it is written back as it was
        return self.data.get(key)

    def _refuse(self, key: str, value: object, expected: str) -> None:
        self.present.discard(key)
        self.wrong.append((self.prefix + key, f"{json.dumps(value, default=str)[:80]}, not {expected}"))

    def text(self, key: str) -> str | None:
        value = self._get(key)
        if value is None or isinstance(value, str):
            return value
        self._refuse(key, value, "a string")
        return None

    def integer(self, key: str) -> int | None:
        value = self._get(key)
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        self._refuse(key, value, "an integer")
        return None

    def number(self, key: str) -> int | float | None:
        value = self._get(key)
        if value is None:
            return None
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            return value
        self._refuse(key, value, "a finite number")
        return None

    def flag(self, key: str) -> bool | None:
        value = self._get(key)
        if value is None or isinstance(value, bool):
            return value
        self._refuse(key, value, "true or false")
        return None

    def obj(self, key: str) -> _Fields | None:
        value = self._get(key)
        if value is None:
            return None
        if isinstance(value, dict):
            return _Fields(value, f"{self.prefix}{key}.", self.wrong)
        self._refuse(key, value, "an object")
        return None


def _present(keys: tuple[str, ...], fields: _Fields) -> tuple[str, ...]:
    return tuple(k for k in keys if k in fields.present)


@dataclass(frozen=True)
class RunOwner:
    """Who supervised the build (`running_record.process_owner`): the kind of process, its pid, its command."""

    kind: str | None = None
    pid: int | None = None
    command: str | None = None
    present: tuple[str, ...] = ("kind", "pid", "command")

    @classmethod
    def parse(cls, f: _Fields) -> RunOwner:
        return cls(f.text("kind"), f.integer("pid"), f.text("command"), _present(("kind", "pid", "command"), f))

    def record(self) -> dict[str, Any]:
        values = {"kind": self.kind, "pid": self.pid, "command": self.command}
        return {k: values[k] for k in self.present}


@dataclass(frozen=True)
class OutputState:
    """The output as a build found it (`exists` None: it could not be read, `error` says why), without following a
    final symlink: enough to tell later whether it was replaced (a rename always brings a new inode)."""

    exists: bool | None
    dev: int | None = None
    inode: int | None = None
    size: int | None = None
    mtime_ns: int | None = None
    error: str | None = None

    @classmethod
    def now(cls, output: Path) -> OutputState:
        try:
            st = os.lstat(output)
        except FileNotFoundError:
            return cls(False)
        except OSError as exc:
            return cls(None, error=exc.strerror or str(exc))
        return cls(True, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    @classmethod
    def parse(cls, f: _Fields) -> OutputState:
        exists = f.flag("exists")
        ints = f.integer("dev"), f.integer("inode"), f.integer("size"), f.integer("mtimeNs")
        state = cls(exists, *ints, error=f.text("error"))
        if exists:  # an output that existed is named by these, or its state proves nothing
            noted = {w[0] for w in f.wrong}
            for key, value in (("dev", state.dev), ("inode", state.inode), ("mtimeNs", state.mtime_ns)):
                if value is None and f.prefix + key not in noted:
                    f.wrong.append((f.prefix + key, "missing, though the output existed"))
        return state

    def record(self) -> dict[str, Any]:
        if self.exists is None:
            return {"exists": None, "error": self.error}
        if not self.exists:
            return {"exists": False}
        return {"exists": True, "dev": self.dev, "inode": self.inode, "size": self.size, "mtimeNs": self.mtime_ns}

    def replaced_since(self, before: OutputState | None) -> bool | None:
        """Was the output replaced since `before` was taken? None when that cannot be told (no state, unreadable)."""
        if before is None or before.exists is None or self.exists is None:
            return None
        if not before.exists:
            return self.exists
        if not self.exists:
            return True
        return (before.dev, before.inode, before.mtime_ns) != (self.dev, self.inode, self.mtime_ns)


@dataclass(frozen=True)
class RunningJob:
    """The worker's job as far as recovery reads it: the model, the output, whether to keep a failure's partial
    engine, and the timing cache's path. `written` is the job as the supervisor wrote it (JSON), carried back
    unchanged when the record is rewritten and read by nothing else."""

    onnx: str | None
    output: str | None
    keep_evidence: bool | None
    timing_cache_path: str | None
    timing_cache: bool  # whether the job configures a timing cache at all
    written: dict[str, Any] = field(compare=False, repr=False)

    @classmethod
    def parse(cls, f: _Fields) -> RunningJob:
        cache = f.obj("timing_cache")
        return cls(
            f.text("onnx"),
            f.text("output"),
            f.flag("keep_evidence"),
            cache.text("path") if cache is not None else None,
            cache is not None and bool(cache.data),
            f.data,
        )


KEYS = (
    "buildId",
    "engine",
    "output",
    "workerPid",
    "workerStart",
    "workerNonce",
    "supervisorPid",
    "supervisorStart",
    "job",
    "startedAt",
    "owner",
    "outputBefore",
    "previousSha256",
)  # the writer's order


@dataclass(frozen=True)
class RunningState:
    """One `running.json`, every field the supervisor writes. None: the record does not carry it (an older trtls,
    a build whose worker was not started yet) or, in a `RunningProblem.partial`, carries a value trtls never wrote."""

    build_id: str
    engine: str | None = None
    output: str | None = None  # the engine's path (older records: only in the job)
    worker_pid: int | None = None
    worker_start: str | None = None  # fs.kill.process_start_id of the worker
    worker_nonce: str | None = None  # the secret only that worker carries in its environment (fs.kill.NONCE_ENV)
    supervisor_pid: int | None = None
    supervisor_start: str | None = None
    job: RunningJob | None = None
    started_at: int | float | None = None  # epoch seconds, as written
    owner: RunOwner | None = None
    output_before: OutputState | None = None
    previous_sha256: str | None = None
    present: tuple[str, ...] = KEYS  # the keys the record carries (an explicit null included)

    @property
    def output_path(self) -> Path:
        """The engine's path: the record's, else its job's ('' when neither names one)."""
        return Path(self.output or (self.job.output if self.job else None) or "")

    def record(self) -> dict[str, Any]:
        """The record as JSON data, with the keys it was read with (in the writer's order)."""
        values: dict[str, Any] = {
            "buildId": self.build_id,
            "engine": self.engine,
            "output": self.output,
            "workerPid": self.worker_pid,
            "workerStart": self.worker_start,
            "workerNonce": self.worker_nonce,
            "supervisorPid": self.supervisor_pid,
            "supervisorStart": self.supervisor_start,
            "job": self.job.written if self.job else None,
            "startedAt": self.started_at,
            "owner": self.owner.record() if self.owner else None,
            "outputBefore": self.output_before.record() if self.output_before else None,
            "previousSha256": self.previous_sha256,
        }
        return {k: values[k] for k in KEYS if k in self.present}


@dataclass(frozen=True)
class RunningProblem:
    """Why a `running.json` is not a `RunningState`: its path, the wrong fields (dotted: `job.onnx`; empty when the
    file is not a record at all) and a sentence; `partial`: the record without its wrong fields, None when there is
    nothing to recover (unreadable, not JSON, not an object, no build id)."""

    path: Path
    message: str
    fields: tuple[str, ...] = ()
    partial: RunningState | None = None

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def running_state_of(data: object, path: Path | str = RUNNING) -> RunningState | RunningProblem:
    """A record already in memory (JSON data) as a `RunningState`; `path` names it in a problem."""
    path = Path(path)
    if not isinstance(data, dict):
        return RunningProblem(path, "not a running record (not a JSON object)")
    f = _Fields(data)
    build_id = f.text("buildId")
    if not build_id:
        why = f"is {f.wrong[0][1]}" if f.wrong else "is missing"
        return RunningProblem(path, f"not a running record: buildId {why}", ("buildId",))
    job, owner, before = f.obj("job"), f.obj("owner"), f.obj("outputBefore")
    state = RunningState(
        build_id,
        f.text("engine"),
        f.text("output"),
        f.integer("workerPid"),
        f.text("workerStart"),
        f.text("workerNonce"),
        f.integer("supervisorPid"),
        f.text("supervisorStart"),
        RunningJob.parse(job) if job is not None else None,
        f.number("startedAt"),
        RunOwner.parse(owner) if owner is not None else None,
        OutputState.parse(before) if before is not None else None,
        f.text("previousSha256"),
    )
    if not f.wrong:
        return replace(state, present=_present(KEYS, f))
    # a nested object with a wrong field is left out whole (its fields are read together)
    spoiled = {w[0].split(".", 1)[0] for w in f.wrong}
    partial = replace(
        state,
        job=None if "job" in spoiled else state.job,
        owner=None if "owner" in spoiled else state.owner,
        output_before=None if "outputBefore" in spoiled else state.output_before,
        present=tuple(k for k in _present(KEYS, f) if k not in spoiled),
    )
    (first, why), more = f.wrong[0], len(f.wrong) - 1
    message = f"the record does not hold together: {first} is {why}" + (f" (and {more} more)" if more else "")
    return RunningProblem(path, message, tuple(w[0] for w in f.wrong), partial)


def read_running_state(path: Path) -> RunningState | RunningProblem:
    """The record at `path`, read through the one door: a regular file (a FIFO, a folder or a final symlink is
    refused before a byte is read), at most RECORD_LIMIT bytes, JSON, holding together."""
    from trtls.fs.read import UnreadableRecord, read_json_record

    try:
        data = read_json_record(path, limit=RECORD_LIMIT)
    except UnreadableRecord as exc:
        return RunningProblem(path, str(exc))
    return running_state_of(data, path)
