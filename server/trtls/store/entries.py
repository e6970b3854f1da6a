"""The store on disk: immutable entries, written whole or not at all, verified every time one is used.

    <store>/.trtls-owned                the store mark (fs.store_root): trtls made this folder a store
    <store>/entries/<key>/engine        the engine's bytes
    <store>/entries/<key>/entry.json    the key, the key's parts, the engine's sha256 + size, the producing build
    <store>/used/<key>                  empty; its mtime is the entry's last use (LRU) — the entry itself never changes
    <store>/locks/<key>.lock            flock'ed by the one process building that key (store/lock.py)
    <store>/quarantine/<key>-<time>-<pid>/  an entry that failed verification, moved aside with its WHY, never used
                                        again; `trtls store gc` prunes it after a week (sooner over the bound)
    <store>/tmp/tmp-…                   entries being written (a publish is: write here, fsync, rename into entries/)

A publish renames a complete, fsynced folder into `entries/`, so a reader sees a whole entry or none; a restore
copies the engine to a temp file beside the output while hashing it, and renames it over the output only when the
hash is the entry's. Every use checks what is cheap to check (the record, and the engine file's type and size by one
`lstat`, no hashing): a damaged entry is quarantined there, so a build rebuilds it, a publish of its key replaces it
and `store ls` does not list it; `store ls --verify` hashes every engine. Hard links are never used: a later
in-place write to the output (a tool that opens it `r+b`) would change the store's bytes too. An entry's files are
read only when they are regular files (never through a link, never a FIFO or a device) of the recorded size, owned
and written as the store's `trust` allows.

A publish of a key the store holds with other bytes replaces the entry (a `--rebuild`, ccache's recache): the
next build of the key restores what was built last, never the engine it was rebuilt to replace."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from trtls import fs
from trtls.core.paths import UnsafeWrite
from trtls.fs import Kind, rename
from trtls.fs.store_root import shared_modes, trust_problem
from trtls.store.copying import EntryUnreadable, copy_hashing, hash_reading
from trtls.store.folder import NotTrusted, Refused, RestoreFailed, StoreFolder, StoreUnusable, tmp_name
from trtls.store.key import is_key, key_of_parts
from trtls.store.signing import sign, signed_by
from trtls.store.up_to_date import output_holds

__all__ = ["ENTRY_FORMAT", "Entry", "NotTrusted", "Refused", "RestoreFailed", "Store", "StoreUnusable"]

ENTRY_FORMAT = "trtls.store-entry/1"
RECORD_LIMIT = 16 * 1024 * 1024  # an entry.json: the key's parts and the build record (a few KiB in practice)


@dataclass(frozen=True)
class Entry:
    key: str
    folder: Path
    record: dict[str, Any]

    @property
    def engine(self) -> Path:
        return self.folder / "engine"

    @property
    def sha256(self) -> str:
        return str(self.record["engine"]["sha256"])

    @property
    def size(self) -> int:
        return int(self.record["engine"]["size"])

    @property
    def build(self) -> dict[str, Any]:
        return self.record.get("build") or {}


class Store(StoreFolder):
    replaced: dict[str, Any] | None = None  # what the last publish replaced (the evidence says so)

    @classmethod
    def from_config(cls, config: Any) -> Store:
        """The store a `store.config.StoreConfig` names, with its trust and its recipe's folder."""
        return cls(config.path, config.mode, config.max_size, trust=config.trust, recipe_dir=config.recipe_dir,
                   signing_key_file=config.signing_key_file, remote=config.remote)  # fmt: skip

    # -- reading -------------------------------------------------------------------------------
    def get(self, key: str) -> Entry | None:
        """The entry of `key` if its record holds together (recorded key = its parts' key = its folder's name) and
        its folder and record are real, regular and trusted; a damaged entry is quarantined (Refused)."""
        key = self.checked_key(key)
        folder = self.root / "entries" / key
        try:
            st = os.lstat(folder)
        except FileNotFoundError:
            if not self._fetched(key):
                return None
            st = os.lstat(folder)
        except OSError as exc:
            raise NotTrusted(f"store entry {key[:12]} cannot be read: {exc.strerror}") from exc
        if not stat.S_ISDIR(st.st_mode):
            raise self.damaged(
                folder,
                "the entry is a symlink or a file, not a folder trtls wrote",
                f"store entry {key[:12]} is a symlink or not a folder: not used, nothing it names was read",
            )
        self._trusted(folder, st, key)
        try:
            with fs.open_regular(folder / "entry.json", limit=RECORD_LIMIT, follow=False) as fh:
                self._trusted(folder / "entry.json", os.fstat(fh.fileno()), key)
                record = json.loads(fh.read(RECORD_LIMIT + 1))
        except PermissionError as exc:
            raise NotTrusted(f"store entry {key[:12]}'s record cannot be read: {exc.strerror}") from exc
        except FileNotFoundError:
            if not os.path.lexists(folder):
                return None  # evicted (renamed away whole) between the look and the read
            raise self.damaged(
                folder, "entry.json is missing", f"store entry {key[:12]} has no record (entry.json)"
            ) from None
        except (OSError, ValueError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            said = f"store entry {key[:12]} has an unreadable record ({why})"
            raise self.damaged(folder, f"unreadable entry.json: {why}", said) from exc
        if (
            not isinstance(record, dict)
            or record.get("format") != ENTRY_FORMAT
            or record.get("key") != key
            or key_of_parts(record.get("parts") or {}) != key
            or not _engine_fields(record)
        ):
            said = f"store entry {key[:12]}'s recorded key does not match its content"
            raise self.damaged(folder, "its recorded key does not match its content", said)
        self._signed(record, key)
        entry = Entry(key, folder, record)
        damage = self._engine_problem(entry)
        if damage is not None:
            try:
                again = os.lstat(folder)
            except FileNotFoundError:
                return None  # evicted (renamed away whole) meanwhile
            if (again.st_ino, again.st_dev) != (st.st_ino, st.st_dev):
                return self.get(key)  # replaced meanwhile (a --rebuild's publish): judge the new entry
            raise self.damaged(folder, damage, f"store entry {key[:12]}'s {damage}")
        return entry

    def _engine_problem(self, entry: Entry) -> str | None:
        """Why the entry's engine file cannot be the one its record names — missing, not a regular file (a link, a
        FIFO, a device), or not the recorded size — by one lstat, nothing read; None when it may be (a restore still
        hashes it). One that others could have written is NotTrusted."""
        try:
            st = os.lstat(entry.engine)
        except FileNotFoundError:
            return "engine file is missing"
        except OSError as exc:
            raise NotTrusted(f"store entry {entry.key[:12]}'s engine cannot be read: {exc.strerror}") from exc
        if not stat.S_ISREG(st.st_mode):
            return "engine is a symlink or not a regular file"
        if st.st_size != entry.size:
            return f"engine is {st.st_size} bytes, not the {entry.size} its record says"
        self._trusted(entry.engine, st, entry.key)
        return None

    def damaged(self, folder: Path, why: str, said: str) -> Refused:
        """The Refused of a damaged entry, moved to quarantine/ first (`why` in its WHY): `said` and whether it was
        moved (a store this process does not write leaves it in place: a writer's next use quarantines it)."""
        if self.quarantine(folder, why):
            return Refused(f"{said}; quarantined")
        if not self.writable:
            return Refused(f"{said}; not used, left in place (this store is read-only here)")
        return Refused(f"{said}; not used (it could not be moved to quarantine/)")

    def _trusted(self, path: Path, st: os.stat_result, key: str) -> None:
        why = trust_problem(path, st, self.trust)
        if why is not None:
            raise NotTrusted(f"store entry {key[:12]} is not used: {why}")

    def _signed(self, record: dict[str, Any], key: str) -> None:
        try:
            secret = self.secret()
        except OSError as exc:
            raise NotTrusted(f"store entry {key[:12]} is not used: the signing key {exc.strerror or exc}") from exc
        if secret is not None and not signed_by(record, secret):
            raise NotTrusted(f"store entry {key[:12]} is not used: not signed with the team's key")

    def entries(self) -> list[Entry]:
        """The whole, trusted entries (a damaged one met here is quarantined)."""
        return self.scan()[0]

    def scan(self) -> tuple[list[Entry], list[tuple[str, Refused]]]:
        """(the whole, trusted entries; each refused one with why): a damaged one is quarantined, one not trusted
        (NotTrusted) is left in place."""
        try:
            names = sorted(os.listdir(self.root / "entries"))
        except OSError:
            return [], []
        out, refused = [], []
        for name in filter(is_key, names):
            try:
                e = self.get(name)
            except Refused as exc:
                refused.append((name, exc))
                continue
            if e is not None:
                out.append(e)
        return out, refused

    def verify(self, entry: Entry) -> None:
        """Hash the entry's engine against its record (`store ls --verify`); Refused (quarantined) when the bytes
        are not the recorded ones or cannot be read, NotTrusted when this account may not read them."""
        with self._engine(entry) as src:
            try:
                sha, _ = hash_reading(src)
            except EntryUnreadable as exc:
                said = f"store entry {entry.key[:12]}'s engine: {exc.strerror}"
                raise self.damaged(entry.folder, f"engine: {exc.strerror}", said) from None
        if sha != entry.sha256:
            raise self.damaged(
                entry.folder,
                f"engine sha256 {sha[:12]}… is not the recorded {entry.sha256[:12]}…",
                f"store entry {entry.key[:12]}'s engine bytes do not match its sha256",
            )

    @contextlib.contextmanager
    def _engine(self, entry: Entry) -> Iterator[BinaryIO]:
        """The entry's engine, open: a regular file (never a link, a FIFO or a device) of the recorded size, owned
        as `trust` allows. A missing or wrong one quarantines the entry (Refused)."""
        with contextlib.ExitStack() as stack:
            try:
                src = stack.enter_context(fs.open_regular(entry.engine, limit=None, follow=False, expected=entry.size))
            except PermissionError as exc:
                raise NotTrusted(f"store entry {entry.key[:12]}'s engine cannot be read: {exc.strerror}") from exc
            except OSError as exc:
                said = f"store entry {entry.key[:12]}'s engine: {exc.strerror}"
                raise self.damaged(entry.folder, f"engine: {exc.strerror}", said) from exc
            self._trusted(entry.engine, os.fstat(src.fileno()), entry.key)
            yield src

    def restore(
        self, entry: Entry, output: Path, tag: str, within: str | os.PathLike[str], state_dir: Path | None = None
    ) -> bool:
        """Make `output` identical to the entry: False when it already is (nothing written), True when restored
        through the door (temp created O_EXCL | O_NOFOLLOW in the output's real folder inside `within`, hashed while
        copied, fsynced, renamed there; never through a symlink: UnsafeWrite). A hash that is not the entry's
        quarantines the entry (Refused); an output that cannot be written is a RestoreFailed (TRT412/TRT405).
        Either way `output` is untouched. `state_dir`: the recipe's `.trtls`, whose digest cache knows the output."""
        self.checked_key(entry.key)
        if output_holds(output, entry, state_dir):
            self.mark_used(entry.key)
            return False
        with self._engine(entry) as src:
            try:
                fs.ensure_folder(output.parent, within=within)
                temp = fs.temp_path_for(output, tag).name
                with fs.atomic_writer(output, kind=Kind.engine_output, within=within, temp_name=temp) as dst:
                    sha, _ = copy_hashing(src, dst, "restore")
                    if sha != entry.sha256:
                        raise _Mismatch(sha)  # leaves the block: the writer removes its temp, output untouched
            except _Mismatch as bad:
                raise self.damaged(
                    entry.folder,
                    f"engine sha256 {bad.sha[:12]}… is not the recorded {entry.sha256[:12]}…",
                    f"store entry {entry.key[:12]}'s engine bytes do not match its sha256",
                ) from None
            except EntryUnreadable as exc:
                said = f"store entry {entry.key[:12]}'s engine: {exc.strerror}"
                raise self.damaged(entry.folder, f"engine: {exc.strerror}", said) from None
            except UnsafeWrite:
                raise
            except OSError as exc:
                code = "TRT412" if os.path.lexists(output) else "TRT405"
                why = f"the engine could not be written there: {exc.strerror or exc}; the output is as it was"
                raise RestoreFailed(code, exc.errno or errno.EIO, why, output) from exc
        self.mark_used(entry.key)
        return True

    # -- writing -------------------------------------------------------------------------------
    def publish(self, key: str, parts: dict[str, Any], engine: Path, build: dict[str, Any], sha: str | None) -> Entry:
        """Store `engine` under `key`. A no-op when the key is stored with these bytes; with other bytes (a
        `--rebuild`) the entry is replaced and `replaced` says what it held. `sha`: the engine's hash as the worker
        wrote it; a copy that reads other bytes (the output changed meanwhile) is not stored. Raises OSError (a full
        disk, a read-only store, a store refused by `check`)."""
        key = self.checked_key(key)
        self.replaced = None
        if self.mode != "read_write":
            raise OSError(errno.EROFS, "the store is read-only (mode = read)")
        try:
            self.check()
        except StoreUnusable as exc:
            raise OSError(errno.EPERM, f"{exc.code} {exc}") from exc
        if self.unwritable is not None:
            raise OSError(errno.EROFS, self.unwritable)
        replacing: dict[str, Any] | None = None
        try:
            existing = self.get(key)
        except NotTrusted as exc:
            existing, replacing = None, {"notUsed": str(exc)}  # whole perhaps, but not ours to trust: replaced
        except Refused as exc:
            existing, replacing = None, {"damaged": str(exc)}  # quarantined already: nothing to move aside
        if existing is not None:
            if sha is not None and existing.sha256 == sha:
                self.mark_used(key)
                return existing
            replacing = {"sha256": existing.sha256, "size": existing.size, "buildId": existing.build.get("buildId")}
        tmp = self.root / "tmp" / tmp_name("publish", key)
        fs.ensure_folder(tmp, within=self.root)
        self.fit(tmp, folder=True)  # a team's store: the other accounts may evict or quarantine it later
        try:
            record = self._write_entry(tmp, key, parts, engine, build, sha)
            if existing is None or existing.sha256 != record["engine"]["sha256"]:
                self._move_in(tmp, key, replacing)
        finally:
            if os.path.lexists(tmp):
                self.discard(tmp)  # not moved in: the same bytes were stored already, or another process won
        self.mark_used(key)
        self.evict(keep=key)
        try:
            stored = self.get(key)
        except Refused as exc:
            raise OSError(errno.EEXIST, f"the store holds an entry of this key that is not used: {exc}") from exc
        entry = stored or Entry(key, self.root / "entries" / key, record)
        self._pushed(entry)
        return entry

    # -- a remote store (store/remote.py): asked on a local miss, sent every publish -----------
    def _fetched(self, key: str) -> bool:
        """Whether the remote store held `key` and it is now a local entry (verified as a local one is)."""
        if self.remote_url is None:
            return False
        from trtls.store.remote import fetch_entry

        return fetch_entry(self, key)

    def _pushed(self, entry: Entry) -> None:
        if self.remote_url is None:
            return
        from trtls.store.remote import push_entry

        push_entry(self, entry)

    def _write_entry(
        self, tmp: Path, key: str, parts: dict[str, Any], engine: Path, build: dict[str, Any], sha: str | None
    ) -> dict[str, Any]:
        file_mode = shared_modes(self.root)[1]
        with (
            fs.open_regular(engine, limit=None, follow=False) as src,
            fs.atomic_writer(tmp / "engine", kind=Kind.store_entry, within=self.root, mode=file_mode) as dst,
        ):
            got, size = copy_hashing(src, dst, "publish")
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
        dest = self.root / "entries" / key
        if replacing is not None and "damaged" not in replacing:
            self._set_aside(dest, key, missing_ok=False)
        self.replaced = replacing
        try:
            rename(tmp, dest, kind=Kind.store_entry, within=self.root, replace=False)
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
            try:
                there = self.get(key)
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


class _Mismatch(Exception):
    def __init__(self, sha: str):
        super().__init__(sha)
        self.sha = sha


def _engine_fields(record: dict[str, Any]) -> bool:
    engine = record.get("engine")
    if not isinstance(engine, dict):
        return False
    size = engine.get("size")
    return isinstance(engine.get("sha256"), str) and type(size) is int and size >= 0
