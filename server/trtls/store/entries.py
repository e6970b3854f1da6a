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
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from trtls import fs
from trtls.core.paths import UnsafeWrite
from trtls.fs import Kind, parse_json
from trtls.fs.store_root import trust_problem
from trtls.store.copying import EntryUnreadable, copy_hashing, hash_reading
from trtls.store.entry_record import ENTRY_FORMAT, RECORD_LIMIT, Entry, engine_fields
from trtls.store.folder import NotTrusted, Refused, RestoreFailed, StoreUnusable
from trtls.store.key import is_key, key_of_parts
from trtls.store.layout import ENTRIES, entry_folder
from trtls.store.publishing import PublishingFolder
from trtls.store.signing import signed_by
from trtls.store.up_to_date import output_holds

__all__ = ["ENTRY_FORMAT", "Entry", "LeftInPlace", "NotTrusted", "Refused", "RestoreFailed", "Store", "StoreUnusable"]


class Store(PublishingFolder):
    """A store folder, read and verified on every use (this module) and published to (store/publishing.py)."""

    @classmethod
    def from_config(cls, config: Any) -> Store:
        """The store a `store.config.StoreConfig` names, with its trust and its recipe's folder."""
        return cls(
            config.path,
            config.mode,
            config.max_size,
            trust=config.trust,
            recipe_dir=config.recipe_dir,
            signing_key_file=config.signing_key_file,
            remote=config.remote,
        )

    @classmethod
    def read_only(cls, config: Any) -> Store:
        """The store a `StoreConfig` names, opened to be asked only (`reader`)."""
        return cls.from_config(config).reader()

    def reader(self) -> Store:
        """This store's folder as `mode = "read"` with no remote: asking it whether a key is there quarantines,
        marks and fetches nothing."""
        return Store(
            self.root,
            "read",
            self.max_size,
            trust=self.trust,
            recipe_dir=self.recipe_dir,
            signing_key_file=self.signing_key_file,
        )

    # -- reading -------------------------------------------------------------------------------
    def get(self, key: str, remote: bool = True) -> Entry | None:
        """The entry of `key` if its record holds together (recorded key = its parts' key = its folder's name) and
        its folder and record are real, regular and trusted; a damaged entry is quarantined (Refused). A local miss
        asks the remote store unless `remote` is False (a publish looks only here: what another machine pushed
        meanwhile is not fetched to be replaced)."""
        key = self.checked_key(key)
        folder = entry_folder(self.root, key)
        try:
            st = os.lstat(folder)
        except FileNotFoundError:
            if not remote or not self._fetched(key):
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
                record = parse_json(fh.read(RECORD_LIMIT + 1))
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
            or not engine_fields(record)
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
                return self.get(key, remote)  # replaced meanwhile (a --rebuild's publish): judge the new entry
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
        moved. One left in place (a store this process does not write: a writer's next use quarantines it; one that
        cannot be moved: an immutable folder, another account's) is a LeftInPlace: every build of its key rebuilds,
        and a publish cannot replace it either, so it is said as what it is (TRT342) with what ends it."""
        if self.quarantine(folder, why):
            return Refused(f"{said}; quarantined")
        if not self.writable:
            return LeftInPlace(
                f"{said}; not used, left in place (this store is read-only here): every build of this key rebuilds "
                "the engine until a build that writes the store moves it to quarantine/"
            )
        where = f": {self.left_in_place[-1]}" if self.left_in_place else ""
        return LeftInPlace(
            f"{said}; not used, and it could not be moved to quarantine/{where}: every build of this key rebuilds "
            f"the engine (and cannot store it) until {folder} is removed by hand"
        )

    def _trusted(self, path: Path, st: os.stat_result, key: str) -> None:
        why = trust_problem(path, st, self.trust)
        if why is not None:
            raise NotTrusted(f"store entry {key[:12]} is not used: {why}")

    def _signed(self, record: dict[str, Any], key: str) -> None:
        try:
            secret = self.secret()
        except OSError as exc:
            why = f"its signing key {self.signing_key_file} cannot be used: {exc.strerror or exc}"
            raise NotTrusted(f"store entry {key[:12]} is not used: {why}") from exc
        if secret is not None and not signed_by(record, secret):
            raise NotTrusted(f"store entry {key[:12]} is not used: not signed with the team's key")

    def entries(self) -> list[Entry]:
        """The whole, trusted entries (a damaged one met here is quarantined)."""
        return self.scan()[0]

    def scan(self) -> tuple[list[Entry], list[tuple[str, Refused]]]:
        """(the whole, trusted entries; each refused one with why): a damaged one is quarantined, one not trusted
        (NotTrusted) is left in place."""
        try:
            names = sorted(os.listdir(self.root / ENTRIES))
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
                why = f"the engine could not be written there: {exc.strerror or exc}"  # callers say the rest
                raise RestoreFailed(code, exc.errno or errno.EIO, why, output) from exc
        self.mark_used(entry.key)
        return True

    # -- a remote store (store/remote.py): asked on a local miss, sent every publish -----------
    def _fetched(self, key: str) -> bool:
        """Whether the remote store held `key` and it is now a local entry (verified as a local one is)."""
        if self.remote_url is None:
            return False
        from trtls.store.remote import fetch_entry

        return fetch_entry(self, key)


class LeftInPlace(Refused):
    """A damaged entry that stays in entries/ (not quarantined): said once per build as TRT342, listed by `store ls`
    (exit 1) until it is removed."""


class _Mismatch(Exception):
    def __init__(self, sha: str):
        super().__init__(sha)
        self.sha = sha
