"""Publishing to the store: an engine written whole into `tmp/`, fsynced, renamed into `entries/<key>` (a reader
sees a whole entry or none), a damaged or other-bytes entry of the key moved aside first (a `--rebuild`, ccache's
recache), the store kept within its bound (least recently used first, quarantined entries before any whole one),
and every publish sent to the remote store when there is one. The reading side (`get`, `restore`) is entries.py."""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from trtls import fs
from trtls.fs import Kind, rename
from trtls.fs.store_root import shared_modes
from trtls.store.copying import copy_hashing
from trtls.store.entry_record import ENTRY_FORMAT, Entry
from trtls.store.folder import NotTrusted, Refused, StoreFolder, StoreUnusable, tmp_name
from trtls.store.layout import entry_folder
from trtls.store.signing import sign
from trtls.store.upload_state import UploadState, cut_by_a_stop

if TYPE_CHECKING:
    from trtls.core.cancel import CancelToken


class Staged(NamedTuple):
    """An engine copied into the store's `tmp/` ahead of its publish (`PublishingFolder.stage`): the folder holding
    it, the file it was copied from, and the sha256 and size of the bytes the copy holds."""

    tmp: Path
    source: Path
    sha256: str
    size: int


class PublishingFolder(StoreFolder):
    """The store's writing side; `Store` (entries.py) adds the reading side this one asks (`get`, `entries`)."""

    replaced: dict[str, Any] | None = None  # what the last publish replaced (the evidence says so)
    # the cancel state of the build it serves: set, it cuts a remote fetch or upload at once (store/remote_http.py)
    stop: CancelToken | None = None

    def __init__(self, *args: Any, **named: Any) -> None:
        super().__init__(*args, **named)
        # where its upload of the engine it publishes to the remote store stands (store/upload_state.py), read from
        # any thread: a stop of a build that has ended says what it still cuts from it (`upload_a_stop_cuts`)
        self.upload = UploadState()

    def upload_a_stop_cuts(self) -> str | None:
        """The remote store (its URL as shown) whose upload of the engine a stop of the build would cut now, or None
        when it cuts nothing there (no remote; the upload skipped — and why is in `upload` — or done)."""
        return cut_by_a_stop(self)

    def get(self, key: str, remote: bool = True) -> Entry | None:
        raise NotImplementedError  # entries.Store.get

    def entries(self) -> list[Entry]:
        raise NotImplementedError  # entries.Store.entries

    # -- writing -------------------------------------------------------------------------------
    def stage(self, key: str, engine: Path, sha: str | None) -> Staged | None:
        """Copy `engine` into `tmp/` for its publish, before the build's end has decided to publish it: the copy, its
        hash and its fsync run beside the build's evidence instead of after it (issue 31). None when nothing was
        staged (the store cannot be written, the copy failed, or it read other bytes than `sha`): `publish` then copies
        as it always did and says why it cannot. Whoever stages hands the result to `publish` or `unstage`."""
        try:
            key = self.checked_key(key)
            self._writable()
        except OSError:
            return None
        tmp = self.root / "tmp" / tmp_name("publish", key)
        try:
            self._make_tmp(tmp)
            got, size = self._copy_engine(engine, tmp)
        except OSError:
            if os.path.lexists(tmp):
                self.discard(tmp)
            return None
        staged = Staged(tmp, engine, got, size)
        if sha is not None and got != sha:
            self.unstage(staged)
            return None
        return staged

    def unstage(self, staged: Staged | None) -> None:
        """A staged copy no publish took (the build's end did not publish, or published otherwise): removed."""
        if staged is not None and os.path.lexists(staged.tmp):
            self.discard(staged.tmp)

    def _make_tmp(self, tmp: Path) -> None:
        fs.ensure_folder(tmp, within=self.root)
        self.fit(tmp, folder=True)  # a team's store: the other accounts may evict or quarantine it later

    def _writable(self) -> None:
        if self.mode != "read_write":
            raise OSError(errno.EROFS, "the store is read-only (mode = read)")
        try:
            self.check()
        except StoreUnusable as exc:
            raise OSError(errno.EPERM, f"{exc.code} {exc}") from exc
        if self.unwritable is not None:
            raise OSError(errno.EROFS, self.unwritable)

    def publish(
        self,
        key: str,
        parts: dict[str, Any],
        engine: Path,
        build: dict[str, Any],
        sha: str | None,
        push: bool = True,
        staged: Staged | None = None,
    ) -> Entry:
        """Store `engine` under `key`. A no-op when the key is stored with these bytes; with other bytes (a
        `--rebuild`) the entry is replaced and `replaced` says what it held. `sha`: the engine's hash as the worker
        wrote it; a copy that reads other bytes (the output changed meanwhile) is not stored. Raises OSError (a full
        disk, a read-only store, a store refused by `check`). `push`: send it on to the remote store (False: a farm
        node sent it already). `staged`: this engine's copy `stage` made, taken when it is of `engine` and holds `sha`
        (else removed, and the engine copied here); removed in any case when it is not moved in."""
        try:
            return self._publish(key, parts, engine, build, sha, push, staged)
        finally:
            self.unstage(staged)  # moved in: nothing is left of it here

    def _publish(
        self,
        key: str,
        parts: dict[str, Any],
        engine: Path,
        build: dict[str, Any],
        sha: str | None,
        push: bool,
        staged: Staged | None,
    ) -> Entry:
        key = self.checked_key(key)
        self.replaced = None
        self._writable()
        if staged is not None and (staged.source != engine or sha is None or staged.sha256 != sha):
            staged = None  # of other bytes than the build's end verified: copied again below (`publish` removes it)
        replacing: dict[str, Any] | None = None
        try:
            existing = self.get(key, remote=False)
        except NotTrusted as exc:
            existing, replacing = None, {"notUsed": str(exc)}  # whole perhaps, but not ours to trust: replaced
        except Refused as exc:
            existing, replacing = None, {"damaged": str(exc)}  # quarantined already: nothing to move aside
        if existing is not None:
            if sha is not None and existing.sha256 == sha:
                self.mark_used(key)
                if push:
                    self.upload.skipped("the local store held this engine already: nothing is sent")
                return existing
            replacing = {"sha256": existing.sha256, "size": existing.size, "buildId": existing.build.get("buildId")}
        if staged is not None:
            tmp = staged.tmp
        else:
            tmp = self.root / "tmp" / tmp_name("publish", key)
            self._make_tmp(tmp)
        try:
            record = self._write_entry(tmp, key, parts, engine, build, sha, staged)
            if existing is None or existing.sha256 != record["engine"]["sha256"]:
                self._move_in(tmp, key, replacing)
        finally:
            if os.path.lexists(tmp):
                self.discard(tmp)  # not moved in: the same bytes were stored already, or another process won
        self.mark_used(key)
        self.evict(keep=key)
        try:
            stored = self.get(key, remote=False)
        except Refused as exc:
            raise OSError(errno.EEXIST, f"the store holds an entry of this key that is not used: {exc}") from exc
        entry = stored or Entry(key, entry_folder(self.root, key), record)
        if push:
            self._pushed(entry)
        return entry

    def _pushed(self, entry: Entry) -> None:
        if self.remote_url is None:
            self.upload.skipped("the store has no remote store")
            return
        from trtls.store.remote import push_entry

        push_entry(self, entry)

    def _copy_engine(self, engine: Path, tmp: Path) -> tuple[str, int]:
        """`engine` copied to `tmp/engine` (fsynced, atomic): the sha256 and size of the bytes the copy holds."""
        with (
            fs.open_regular(engine, limit=None, follow=False) as src,
            fs.atomic_writer(
                tmp / "engine", kind=Kind.store_entry, within=self.root, mode=shared_modes(self.root)[1]
            ) as dst,
        ):
            return copy_hashing(src, dst, "publish")

    def _write_entry(
        self,
        tmp: Path,
        key: str,
        parts: dict[str, Any],
        engine: Path,
        build: dict[str, Any],
        sha: str | None,
        staged: Staged | None = None,
    ) -> dict[str, Any]:
        file_mode = shared_modes(self.root)[1]
        if staged is not None:  # copied, hashed and fsynced already, of these very bytes (`publish` checked)
            got, size = staged.sha256, staged.size
        else:
            got, size = self._copy_engine(engine, tmp)
            if sha is not None and got != sha:
                raise OSError(errno.EIO, f"the engine changed while it was copied ({got[:12]}… ≠ {sha[:12]}…)")
        record = {
            "format": ENTRY_FORMAT,
            "key": key,
            "parts": parts,
            "engine": {"sha256": got, "size": size},
            "build": build,
            "createdAt": time.time(),
        }
        secret = self.secret()
        if secret is not None:
            record["signature"] = sign(record, secret)
        text = json.dumps(record, indent=1, default=str)
        fs.atomic_write_text(tmp / "entry.json", text, kind=Kind.store_entry, within=self.root, mode=file_mode)
        return record

    def _move_in(self, tmp: Path, key: str, replacing: dict[str, Any] | None) -> None:
        """Rename the written entry into entries/: over nothing, or (other bytes, an entry not trusted) after moving
        the entry it replaces aside. Another process that published the key first wins (its entry is whole too);
        a folder there that is not a whole entry (a damaged leftover quarantine could not move) is moved aside and
        the rename tried once more."""
        dest = entry_folder(self.root, key)
        if replacing is not None and "damaged" not in replacing:
            self._set_aside(dest, key, missing_ok=False)
        self.replaced = replacing
        try:
            rename(tmp, dest, kind=Kind.store_entry, within=self.root, replace=False)
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
            try:
                there = self.get(key, remote=False)
            except Refused as refused:
                there, self.replaced = None, {"damaged": str(refused)}
            if there is not None:
                self.replaced = None  # another process published the same key first
                return
            self._set_aside(dest, key, missing_ok=True)
            rename(tmp, dest, kind=Kind.store_entry, within=self.root, replace=False)

    def _set_aside(self, dest: Path, key: str, missing_ok: bool) -> None:
        """Move the entry at `dest` out of entries/ (into tmp/, then removed): at once, whole."""
        trash = self.root / "tmp" / tmp_name("replaced", key)
        try:
            rename(dest, trash, kind=Kind.store_entry, within=self.root, replace=False)
        except FileNotFoundError:
            if not missing_ok:
                raise
            return
        self.discard(trash)

    def evict(self, keep: str | None = None, max_size: int | None = None) -> list[Entry]:
        """Remove least recently used entries until the store fits its bound (quarantined entries count, and go
        first); `keep` is never evicted. Only in a folder marked as a store; only entries really removed are
        returned."""
        bound = max_size if max_size is not None else self.max_size
        if bound is None or not self.writable or self.sweep_refusal() is not None:
            return []
        entries = sorted(self.entries(), key=lambda e: self.last_used(e.key))
        total = sum(e.size for e in entries) + sum(q.size for q in self.quarantined())
        total -= sum(q.size for q in self.prune_quarantine(older_than_s=None, over=total - bound))
        evicted = []
        for e in entries:
            if total <= bound:
                break
            if e.key == keep or not self.remove(e.key):
                continue
            total -= e.size
            evicted.append(e)
        return evicted

    def over_bound(self, bound: int) -> int:
        """How many bytes the entries and the quarantined entries hold above `bound` (≤ 0: it fits)."""
        return sum(e.size for e in self.entries()) + sum(q.size for q in self.quarantined()) - bound
