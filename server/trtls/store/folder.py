"""The store's folder, apart from what its entries hold: whether it may be used (`check`), the names trtls makes and
removes in it (use times, quarantine and its pruning, eviction, leftovers in `tmp/`), and the errors every store
operation raises.

Every write, rename and delete goes through `trtls.fs` inside the store's own real folder; a key becomes a path only
when it is 64 hex digits; sweeps run only in a folder marked as a store and take only names trtls makes there.

A `read_write` store this account cannot write (another account's folder, mode 0755; an immutable one) still serves
what it holds: `check` does not refuse it but sets `unwritable` (a TRT331 note, also in `notes`) and the store is read
for this process — hits restore, a publish raises OSError(EROFS) with that note, use times and quarantine write
nothing. `mode` stays as configured (the evidence says what the recipe asked for)."""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from trtls import fs
from trtls.core.terminal_text import terminal_safe
from trtls.fs import Kind, rename, touch
from trtls.fs.kill import process_alive
from trtls.fs.store_root import (
    STORE_FOLDERS,
    content_problem,
    env_trust,
    fit_mode,
    is_store,
    make_store,
    placement_problem,
    shared_modes,
    trust_problem,
)
from trtls.store.key import is_key
from trtls.store.layout import entry_folder
from trtls.store.signing import key_file, read_key


class StoreUnusable(Exception):
    """The store folder cannot be used as configured (not a folder, not writable, not a place for a store, writable
    by others): a located error."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


class Refused(Exception):
    """An entry failed verification (bytes, key, its files, who can write them): it is not used (and, when it is
    damaged, it was quarantined)."""


class NotTrusted(Refused):
    """An entry that may be whole but that someone this store does not trust could have written (its files'
    owner or mode, a missing or wrong team signature): not used, not quarantined; a publish replaces it."""


class RestoreFailed(OSError):
    """The output could not be written (an immutable file or folder, a read-only mount, a full disk); the output is
    as it was. `code`: TRT412 (the output file exists and cannot be replaced) or TRT405 (its folder cannot be
    written); `filename` is the output."""

    def __init__(self, code: str, err: int, message: str, path: object):
        super().__init__(err, message, str(path))
        self.code = code


QUARANTINE_KEEP_S = 7 * 24 * 3600  # `trtls store gc` prunes quarantined entries older than this
FUTURE_SKEW_S = 24 * 3600  # a use time further ahead than this is not one (Folder.last_used)
QUARANTINED = re.compile(r"([0-9a-f]{64})-([0-9]{8}-[0-9]{6})-([0-9]+)")  # `<key>-YYYYmmdd-HHMMSS-<pid>`
NOT_WRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)  # a store this account cannot write: served as read


@dataclass(frozen=True)
class Quarantined:
    """An entry moved aside (`quarantine/<key>-<time>-<pid>/`): when, how large, and why (its WHY file)."""

    key: str
    path: Path
    at: float  # when it was quarantined (from its name)
    size: int


def tmp_name(what: str, key: str) -> str:
    """A name in `<store>/tmp`: `tmp-<what>-<key>-<pid>-<ns>` (the pid tells a sweep whether its writer lives)."""
    return f"tmp-{what}-{key}-{os.getpid()}-{time.monotonic_ns()}"


class StoreFolder:
    def __init__(
        self,
        root: Path,
        mode: str = "read_write",
        max_size: int | None = None,
        *,
        trust: str | None = None,
        recipe_dir: Path | None = None,
        signing_key_file: str | os.PathLike[str] | None = None,
        remote: str | None = None,
    ):
        """`trust` (user | group) and `signing_key_file` default to TRTLS_STORE_TRUST and TRTLS_STORE_KEY_FILE."""
        self.root = Path(root)
        self.mode = mode
        self.max_size = max_size
        self.trust = trust or env_trust()
        self.recipe_dir = recipe_dir
        self.signing_key_file = key_file(signing_key_file)
        self._secret: bytes | None = None
        self.remote_url = remote  # a remote store (store/remote.py), opened at its first use
        self.notes: list[str] = []  # what this store said while it served a build (a remote's miss or error)
        # why this read_write store cannot be written by this account (a TRT331 note), set by `check`: it serves
        # hits, publishes nothing and writes no use time or quarantine (`writable`)
        self.unwritable: str | None = None
        # why the last entry this process could not move aside was left in place, located (`quarantine`, `remove`)
        self.left_in_place: list[str] = []

    @property
    def writable(self) -> bool:
        """Whether this process writes the store: `mode = "read_write"` and not found unwritable by `check`."""
        return self.mode == "read_write" and self.unwritable is None

    def secret(self) -> bytes | None:
        """The team's signing key, when the store has one (read once; OSError when it cannot be used)."""
        if self.signing_key_file is None:
            return None
        if self._secret is None:
            self._secret = read_key(self.signing_key_file)
        return self._secret

    def checked_key(self, key: object) -> str:
        """`key` when it is an engine key; Refused (nothing read or moved) when a record carried something else."""
        if not is_key(key):
            shown = terminal_safe(str(key)[:80])
            raise Refused(f"{shown!r} is not an engine key (64 hex digits): nothing in the store was used")
        return str(key)

    # -- may it be used? -------------------------------------------------------------------------
    def check(self) -> None:
        """Raise StoreUnusable when the folder cannot serve its mode (a missing read-only store is an empty one):
        TRT330 not a folder, TRT339 not a place for a store, TRT340 writable by others, TRT331 cannot be created
        (under a file). A read-write store is created (and marked) here; one this account cannot write is served as
        read (`unwritable`, a TRT331 note), not refused: its engines are reused, none is published."""
        if os.path.lexists(self.root) and not self.root.is_dir():
            raise StoreUnusable("TRT330", f"the store path {self.root} is not a folder")
        why = placement_problem(self.root, self.recipe_dir) or content_problem(self.root)
        if why is not None:
            raise StoreUnusable("TRT339", f"the store path cannot be used: {why}")
        self.check_folders()
        try:
            self.secret()
        except OSError as exc:
            why = f"its signing key {self.signing_key_file} cannot be used: {exc.strerror or exc}"
            raise StoreUnusable("TRT340", f"the store is not trusted: {why}") from exc
        if self.mode == "read":
            return
        try:
            make_store(self.root)
        except OSError as exc:
            if exc.errno not in NOT_WRITABLE:  # under a file, a folder of another kind: no store can be there
                where = f"{exc.filename}: " if exc.filename and exc.filename != str(self.root) else ""
                why = f"the store folder {self.root} cannot be written: {where}{exc.strerror}"  # the part refused
                raise StoreUnusable("TRT331", why) from exc
            self._not_writable(Path(exc.filename) if exc.filename else self.root)
            return
        for sub in ("entries", "tmp", "used", "locks"):
            if not os.access(self.root / sub, os.W_OK):
                self._not_writable(self.root / sub)
                return

    def _not_writable(self, folder: Path) -> None:
        """Serve this read_write store as read for this process, and say so once (`notes`, `unwritable`)."""
        if self.unwritable is None:
            self.unwritable = (
                f"TRT331 the store folder {folder}{owner_of(folder)} is not writable by this user: engines are reused "
                "from it, none is published"
            )
            self.notes.append(self.unwritable)

    def check_folders(self) -> None:
        """The root and each store folder: real folders (an `entries` or `tmp` swapped for a link is refused: nothing
        is read or swept through it), trusted. What `check` and `trtls store ls|gc` judge before any entry."""
        for path in (self.root, *(self.root / sub for sub in STORE_FOLDERS)):
            try:
                st = os.stat(path) if path == self.root else os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISDIR(st.st_mode):
                raise StoreUnusable("TRT339", f"the store's {path.name} is a symlink or not a folder: {path}")
            why = trust_problem(path, st, self.trust)
            if why is not None:
                raise StoreUnusable("TRT340", f"the store is not trusted: {why}")

    def sweep_refusal(self) -> str | None:
        """Why nothing may be removed here (not a folder marked as a store, or not a place for one), or None."""
        if not is_store(self.root):
            return f"{self.root} is not marked as a trtls engine store: nothing is removed there"
        return placement_problem(self.root, self.recipe_dir)

    # -- use times -------------------------------------------------------------------------------
    def last_used(self, key: str) -> float:
        """When `key` was last used; 0 for never, and for a time over FUTURE_SKEW_S ahead of this clock (planted:
        machines sharing a store differ by minutes, not days), which would keep its entry from ever going first."""
        try:
            st = os.lstat(self.root / "used" / self.checked_key(key))
        except (OSError, Refused):
            return 0.0
        return st.st_mtime if stat.S_ISREG(st.st_mode) and st.st_mtime <= time.time() + FUTURE_SKEW_S else 0.0

    def mark_used(self, key: str) -> None:
        """Mark `key` used now (`used/<key>`, never through a link: a symlink, a second name of another file or a
        FIFO planted there is removed, not followed, and a use-time file of the store's own made in its place)."""
        if not self.writable:
            return  # a read-only store is never written, not even its use times
        used = self.root / "used" / self.checked_key(key)
        try:
            touch(used, kind=Kind.store_entry, within=self.root)
        except OSError as exc:
            # a symlink (ELOOP), a second name of another file (EINVAL: the door refuses it), a FIFO (ENXIO)
            if exc.errno not in (errno.ELOOP, errno.EINVAL, errno.ENXIO):
                return
            with contextlib.suppress(OSError):
                fs.remove_file(used, kind=Kind.store_entry, within=self.root)
                touch(used, kind=Kind.store_entry, within=self.root)
        self.fit(used, folder=False)

    def fit(self, path: Path, folder: bool) -> None:
        """Apply the store's own mode to what this process just made there (`fs.store_root.shared_modes`)."""
        modes = shared_modes(self.root)
        if modes != (0o755, 0o644):
            fit_mode(path, modes[0] if folder else modes[1], self.root)

    # -- moving aside and removing ---------------------------------------------------------------
    def quarantine(self, folder: Path, why: str) -> bool:
        """Move a damaged entry aside (`quarantine/<key>-<time>-<pid>/` with a WHY file); whether it was moved. An
        entry that is a symlink or a file is removed (the link itself; what it names is never read or written) and
        its WHY kept alone."""
        if not self.writable or not is_key(folder.name):
            return False  # a read-only store is refused, not changed: its owner fixes it
        dest = self.root / "quarantine" / f"{folder.name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        try:
            if stat.S_ISDIR(os.lstat(folder).st_mode):
                rename(folder, dest, kind=Kind.store_entry, within=self.root, replace=False)
            else:
                fs.remove_file(folder, kind=Kind.store_entry, within=self.root)
                fs.ensure_folder(dest, within=self.root)
                self.fit(dest, folder=True)
                why += f" (entries/{folder.name} was removed; what it pointed to was not touched)"
        except OSError as exc:
            self.left_in_place.append(_not_moved(folder, exc))
            return False
        with contextlib.suppress(OSError):  # moved: the entry is out of use even if its WHY cannot be written
            mode = shared_modes(self.root)[1]
            fs.atomic_write_text(dest / "WHY", why + "\n", kind=Kind.store_entry, within=self.root, mode=mode)
        return True

    def remove(self, key: str) -> bool:
        """Remove an entry (renamed into tmp/ first: gone from entries/ at once, a restore holding its engine open
        still reads it), its use time and its unheld lock file. False when it was not removed (gone, or not ours)."""
        key = self.checked_key(key)
        trash = self.root / "tmp" / tmp_name("evicted", key)
        try:
            rename(entry_folder(self.root, key), trash, kind=Kind.store_entry, within=self.root, replace=False)
        except FileNotFoundError:
            return False
        except OSError as exc:
            self.left_in_place.append(_not_moved(entry_folder(self.root, key), exc))
            return False
        self.discard(trash)
        with contextlib.suppress(OSError):
            fs.remove_file(self.root / "used" / key, kind=Kind.store_entry, within=self.root)
        with contextlib.suppress(OSError):  # and its lock file, unless a build of the key holds it now
            fs.remove_unheld_lock(self.root / "locks" / f"{key}.lock", kind=Kind.store_lock, within=self.root)
        return True

    def discard(self, trash: Path) -> None:
        """Remove a folder of ours in tmp/ (a replaced or evicted entry); a leftover is swept later (`clean_tmp`)."""
        with contextlib.suppress(OSError):
            fs.remove_tree(trash, kind=Kind.store_entry, within=self.root)

    def clean_tmp(self, older_than_s: float = 3600) -> int:
        """Remove what a killed publish or eviction left in tmp/ (never inside entries/): only names trtls makes
        there (`tmp-…`), whose writer (the pid in the name) is gone or that are older than `older_than_s`; only in a
        folder marked as a store, never through a link (a `tmp` that is a symlink is left alone)."""
        tmp = self.root / "tmp"
        if self.unwritable is not None or self.sweep_refusal() is not None or not stat.S_ISDIR(_lstat_mode(tmp)):
            return 0
        n = 0
        now = time.time()
        for name in os.listdir(tmp):
            if not name.startswith("tmp-") or not Kind.store_entry.may_delete(name):
                continue  # not a name trtls makes in tmp/: someone else's, left alone
            try:
                st = os.lstat(tmp / name)
                if _writer_alive(name) and now - st.st_mtime <= older_than_s:
                    continue
                remove = fs.remove_tree if stat.S_ISDIR(st.st_mode) else fs.remove_file
                if remove(tmp / name, kind=Kind.store_entry, within=self.root):
                    n += 1
            except OSError:
                continue
        return n

    # -- quarantine: counted and pruned --------------------------------------------------------
    def quarantined(self) -> list[Quarantined]:
        """The entries moved aside, oldest first: only folders of the names `quarantine` makes, never through a
        link (a `quarantine` that is a symlink lists nothing)."""
        folder = self.root / "quarantine"
        if not stat.S_ISDIR(_lstat_mode(folder)):
            return []
        try:
            names = os.listdir(folder)
        except OSError:
            return []
        out = []
        for name in names:
            m = QUARANTINED.fullmatch(name)
            if m is None or not stat.S_ISDIR(_lstat_mode(folder / name)):
                continue  # not a name trtls makes there: someone else's, neither counted nor removed
            try:
                at = time.mktime(time.strptime(m.group(2), "%Y%m%d-%H%M%S"))
            except (ValueError, OverflowError):
                continue
            out.append(Quarantined(m.group(1), folder / name, at, _tree_size(folder / name)))
        return sorted(out, key=lambda q: (q.at, q.path.name))

    def prune_quarantine(self, older_than_s: float | None = QUARANTINE_KEEP_S, over: int = 0) -> list[Quarantined]:
        """Remove quarantined entries older than `older_than_s`, then — while the store is `over` bytes above its
        bound — the oldest of the others too (what a bound needs room for goes before a whole entry does). Only in a
        folder marked as a store that this process writes; only what was really removed is returned."""
        if not self.writable or self.sweep_refusal() is not None:
            return []
        now = time.time()
        pruned = []
        for q in self.quarantined():
            if not (older_than_s is not None and now - q.at > older_than_s) and over <= 0:
                continue
            try:
                removed = fs.remove_tree(q.path, kind=Kind.store_entry, within=self.root)
            except OSError:
                removed = False
            if removed:
                pruned.append(q)
                over -= q.size
        return pruned


def _tree_size(folder: Path) -> int:
    """The bytes the files under `folder` hold (links not followed, not counted)."""
    total = 0
    for base, _, files in os.walk(folder):
        for name in files:
            try:
                st = os.lstat(os.path.join(base, name))
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
    return total


def owner_of(path: Path) -> str:
    """` (owner alice, uid N, mode 0755)` for a message (` (owner uid N, …)` for a uid no account has), or nothing
    when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return ""
    try:
        who = f"{pwd.getpwuid(st.st_uid).pw_name}, uid {st.st_uid}"
    except KeyError:
        who = f"uid {st.st_uid}"
    return f" (owner {who}, mode {stat.S_IMODE(st.st_mode):04o})"


def _not_moved(folder: Path, exc: OSError) -> str:
    """Why an entry folder could not be moved aside, located: its path, the error, its owner and mode (another account's
    entry made before trtls applied the store's mode is not group-writable, and a folder is moved only by whoever may
    write it)."""
    return f"{folder} could not be moved: {exc.strerror or exc}{owner_of(folder)}"


def _lstat_mode(path: Path) -> int:
    try:
        return os.lstat(path).st_mode
    except OSError:
        return 0


def _writer_alive(name: str) -> bool:
    """`tmp-<what>-<key>-<pid>-<ns>`: is that pid still running? (A name without one counts as alive: age decides.)"""
    parts = name.split("-")
    if len(parts) < 5 or not parts[-2].isdigit():
        return True
    return process_alive(int(parts[-2]))
