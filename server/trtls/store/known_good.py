"""Every successful build of an engine table, newest last (`<recipe>/.trtls/engines/<name>.json`): build id, date,
key, size, sha256 and what differed from the build before. The engines themselves are store entries; this file is
the table's own memory of which ones it built, for `trtls engines`, `trtls rollback` and "why rebuilt".

A record is read only when it is a regular file (never through a symlink, never a FIFO or a device) of a bounded
size, and a build in it counts only when its key is an engine key (64 hex digits): a key is a path in the store.
A record that cannot be read says why (`problem`); one that cannot be written is a TRT118/TRT405 warning, never a
traceback."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

from trtls import fs
from trtls.core.paths import UnsafeWrite
from trtls.fs import Kind, parse_json, read_text
from trtls.store.key import is_key

FORMAT = "trtls.known-good/1"
MAX_RECORDS = 200
RECORD_LIMIT = 64 * 1024 * 1024  # 200 builds, each with its key's parts (a few KiB to a few hundred KiB)


class KnownGood:
    def __init__(self, state_dir: Path, engine: str):
        self.state_dir = Path(state_dir)
        self.path = self.state_dir / "engines" / f"{engine}.json"
        self.problem: str | None = None  # why the record on disk was not read (a symlink, a FIFO, too large)

    def records(self) -> list[dict[str, Any]]:
        try:
            data = parse_json(read_text(self.path, limit=RECORD_LIMIT, follow=False, within=self.state_dir.parent))
        except FileNotFoundError:
            # no record — unless the way to it is a link (a `.trtls` or `engines` swapped for one, dangling or not):
            # then "nothing known-good" would hide why, and a rollback must name the path
            link = next((p for p in (self.state_dir, self.path.parent) if p.is_symlink()), None)
            if link is not None:
                self.problem = f"{link}: is a symlink; a known-good record is never read through one"
            return []
        except (OSError, ValueError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not JSON"
            self.problem = f"{self.path}: {why}"
            return []
        if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("builds"), list):
            self.problem = f"{self.path}: not a known-good record trtls wrote"
            return []
        return [r for r in data["builds"] if isinstance(r, dict) and is_key(r.get("key"))]

    def last(self) -> dict[str, Any] | None:
        recs = self.records()
        return recs[-1] if recs else None

    def find(self, build_id: str) -> dict[str, Any] | None:
        return next((r for r in reversed(self.records()) if r.get("buildId") == build_id), None)

    def append(self, record: dict[str, Any]) -> str | None:
        """Add a build; None when recorded, else the located warning why it was not (nothing written elsewhere)."""
        recs = [*self.records(), record][-MAX_RECORDS:]
        if self.problem is not None and os.path.lexists(self.path):
            # a history that is there but cannot be read is never replaced by this one build: the builds it holds
            # are the rollback targets (a user's edit, a disk error, a file of another kind); the user decides
            code = "TRT118" if os.path.islink(self.path) else "TRT405"
            return f"{code} {self.problem}; it is not replaced, and the build was not recorded as known-good"
        within = self.state_dir.parent  # the recipe's folder: a `.trtls` or `engines` that leads out is refused
        try:
            fs.ensure_folder(self.path.parent, within=within)
            text = records_text(recs)
            fs.atomic_write_text(self.path, text, kind=Kind.evidence, within=within)
        except UnsafeWrite as exc:
            return f"TRT118 {exc.filename}: {exc.strerror}; the build was not recorded as known-good"
        except OSError as exc:
            code = "TRT405" if exc.errno in (errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM) else "TRT118"
            return f"{code} {self.path}: {exc.strerror or exc}; the build was not recorded as known-good"
        return None


def records_text(recs: list[dict[str, Any]]) -> str:
    """The record's text: one build per line. Written by json's C encoder, which an indented dump never uses: a table's
    200 builds (~700 KB with their keys' parts) take 4 ms, against 15 ms indented, on every build (issue 31)."""
    builds = ",\n".join(json.dumps(r) for r in recs)
    return f'{{"format": {json.dumps(FORMAT)}, "builds": [\n{builds}\n]}}\n'


PIN_FORMAT = "trtls.pin/1"
PIN_LIMIT = 64 * 1024  # a pin: one build's id, key, digest and who pinned it


class Pin:
    """A rollback that sticks (`<recipe>/.trtls/engines/<name>.pin.json`): the build a rollback restored, its key and
    sha256, and the recipe's own key when it was pinned. While the recipe's key is still that one, a build serves the
    pinned engine instead of the recipe's (builds/avoidance/pinned.py); a changed recipe lifts it, `trtls build --unpin`
    removes it. Read like a known-good record (a regular file, never through a link, bounded), written through the
    door."""

    def __init__(self, state_dir: Path, engine: str):
        self.state_dir = Path(state_dir)
        self.path = self.state_dir / "engines" / f"{engine}.pin.json"

    def read(self) -> dict[str, Any] | None:
        """The pin, or None (none, or one that is not a pin trtls wrote: a link, a FIFO, not JSON, a bad key — which
        `damaged` says)."""
        return self._load()[0]

    def damaged(self) -> str | None:
        """Why the pin file that is there is not a pin trtls wrote, or None (no pin file, or a whole pin): a build
        never takes such a file for "no rollback" (it would build over the rollback the user asked for)."""
        return self._load()[1] if os.path.lexists(self.path) else None

    def _load(self) -> tuple[dict[str, Any] | None, str | None]:
        try:
            data = parse_json(read_text(self.path, limit=PIN_LIMIT, follow=False, within=self.state_dir.parent))
        except FileNotFoundError:
            return None, None
        except OSError as exc:
            return None, f"cannot be read ({exc.strerror or exc})"
        except ValueError as exc:
            return None, f"is not JSON ({exc})"
        if not isinstance(data, dict) or data.get("format") != PIN_FORMAT or not is_key(data.get("key")):
            return None, "is not a pin trtls wrote (no pin format or no engine key)"
        if data.get("recipeKey") is not None and not is_key(data.get("recipeKey")):
            return None, "is not a pin trtls wrote (its recipe key is not an engine key)"
        return data, None

    def write(self, pin: dict[str, Any]) -> str | None:
        """Record `pin`; None when recorded, else the located warning why it was not."""
        within = self.state_dir.parent
        try:
            fs.ensure_folder(self.path.parent, within=within)
            text = json.dumps({"format": PIN_FORMAT, **pin}, indent=1, default=str) + "\n"
            fs.atomic_write_text(self.path, text, kind=Kind.evidence, within=within)
        except OSError as exc:
            code = "TRT118" if isinstance(exc, UnsafeWrite) else "TRT405"
            return f"{code} {self.path}: {exc.strerror or exc}; the rollback was not pinned"
        return None

    def remove(self) -> str | None:
        """Remove the pin; None when it is gone, else the located warning why it is not."""
        try:
            fs.remove_file(self.path, kind=Kind.evidence, within=self.state_dir.parent)
        except OSError as exc:
            return f"TRT405 {self.path}: {exc.strerror or exc}; the pin was not removed"
        return None


def uncorroborated(
    recipe: Path, state_dir: Path, engine: str, rec: dict[str, Any], published: dict[str, Any]
) -> str | None:
    """Why a known-good record is not one trtls wrote for this engine, or None. A record is a file anyone who can
    write `.trtls/` can edit: one copied from another project's engine (its real key and sha256, a new build id)
    restored that engine's bytes here, said it was this engine's build and pinned it. The record must name a sha256
    (every record a build writes does), and what it says must be borne out by the store entry's publisher — this
    engine of this recipe — or by this folder's own run record of that build (its engine and key). A rollback and a
    build serving a pin both ask it."""
    if not isinstance(rec.get("sha256"), str):
        return "names no sha256 (every record a build writes does): not a record trtls wrote"
    if published.get("engine") == engine and str(published.get("recipe")) == str(recipe):
        return None
    from trtls.core.summary_record import Summary, read_summary

    build_id = str(rec.get("buildId"))
    local = str(rec.get("restoredAs") or build_id)  # a reuse's record names the publisher's build and its own run
    runs = state_dir / "runs"
    said = read_summary(runs / local / "summary.json", within=runs) if "/" not in local and local != ".." else None
    if isinstance(said, Summary) and said.engine == engine and said.engineKey == rec.get("key"):
        return None
    by = f"build {published.get('buildId')} of engine {published.get('engine')!r} in {published.get('recipe')}"
    return (
        f"is not borne out: the store's engine for its key was published by {by}, and this folder keeps no run "
        f"record of {local} building or reusing {engine} with that key"
    )
