"""Where an engine store may be, and who may have written it (issue 27): `[store] path` judged like any write.

A store is a folder trtls writes into and sweeps (`store gc` removes old names in `<store>/tmp`, eviction removes
entries), so its place is judged before anything is created or removed there:

* never the file system's root, a system folder (`/etc`, `/usr`, … and anything in them) or a standard top-level
  folder itself (`/home`, `/tmp`, `/var`, …; `/srv/trtls-store` or `/data` are fine), never a home folder or a
  folder above one, never a `.trtls` folder (evidence), never the recipe's folder
  or a folder above it, never a folder holding a file the recipe reads or writes (a model folder, an output folder);
* never a non-empty folder trtls did not make a store: a store root carries the store mark (`OWNED_MARK` whose text
  is `STORE_MARK`), written when trtls creates it. A store an older trtls made (all five folders it made at once,
  nothing else, and in them only names a store makes) is recognised and marked; a user's folder with a `tmp/` or
  `stats/` of its own is not;
* never a folder or file that others can write, unless the recipe says whom it trusts (`trust = "group"`): with the
  default trust (`user`) every store folder and entry file must belong to this user (or root) and be writable by
  its owner only; with `group`, the group may write it too. A world-writable one is always refused: anyone could
  forge an engine every consumer then runs.

Stdlib, `core.paths` and the door only, so the recipe check (`core.store_table`) and the store share it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path

from trtls.core.paths import UnsafeWrite, inside, real
from trtls.fs.folder import ensure_folder
from trtls.fs.kinds import OWNED_MARK, Kind
from trtls.fs.read import read_text
from trtls.fs.write import chmod

STORE_MARK = "trtls engine store"  # the first line of a store root's OWNED_MARK file
STORE_FOLDERS = ("entries", "used", "locks", "quarantine", "tmp", "stats")  # stats: store/stats.py
LEGACY = ("entries", "used", "locks", "quarantine", "tmp")  # what a store made before the mark always held
_HAS_KEY = re.compile(r"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")  # every name a store puts in its folders has its key
TRUST = ("user", "group")
SYSTEM = tuple(
    Path(p)
    for p in (
        "/bin",
        "/boot",
        "/dev",
        "/etc",
        "/lib",
        "/lib32",
        "/lib64",
        "/libx32",
        "/proc",
        "/run",
        "/sbin",
        "/sys",
        "/usr",
    )
)  # nothing inside these
TOP = tuple(Path(p) for p in ("/", "/home", "/media", "/mnt", "/opt", "/root", "/srv", "/tmp", "/var"))  # not these


def placement_problem(root: Path, recipe_dir: Path | None = None, protected: Iterable[Path] = ()) -> str | None:
    """Why `root` (judged by its real path) can never be a store, or None. `protected`: files the recipe reads or
    writes (a store never holds one)."""
    target = real(root)
    if target in TOP:
        return f"{target} is the file system's root or one of its standard folders"
    if any(inside(target, s) for s in SYSTEM):
        return f"{target} is a system folder"
    if ".trtls" in target.parts:
        return f"{target} is inside a .trtls folder (trtls's evidence)"
    home = real(Path.home())
    if inside(home, target):
        return f"{target} is the home folder {home}" if target == home else f"{target} holds the home folder {home}"
    if recipe_dir is not None:
        folder = real(recipe_dir)
        if inside(folder, target):
            return f"{target} is the recipe's folder" if target == folder else f"{target} holds the recipe's folder"
    for path in protected:
        if inside(real(path), target):
            return f"{target} holds {path}, a file of the recipe"
    return None


def is_store(root: Path) -> bool:
    """Whether `root` carries the store mark (a regular file, read without following a link)."""
    try:
        return read_text(Path(root) / OWNED_MARK, limit=4096, errors="replace").startswith(STORE_MARK)
    except OSError:
        return False


def content_problem(root: Path) -> str | None:
    """Why an existing folder is not a store trtls may use, or None (missing, empty, marked, or a store of an older
    trtls: only its own subfolders, real folders)."""
    try:
        st = os.lstat(root)
    except OSError:
        return None  # missing (or under a file): creating it says why it cannot be
    if stat.S_ISLNK(st.st_mode) and not Path(root).is_dir():
        return f"{root} is a symlink that does not lead to a folder"
    if not Path(root).is_dir():
        return f"{root} is not a folder"
    if is_store(root):
        return None
    try:
        names = os.listdir(root)
    except OSError as exc:
        return f"{root} cannot be listed: {exc.strerror}"
    if not names or _older_store(Path(root), names):
        return None
    return f"{root} is a folder trtls did not make a store (it holds {len(names)} other files and no store mark)"


def _older_store(root: Path, names: list[str]) -> bool:
    """Whether an unmarked folder is a store an older trtls made: every folder it made at once (LEGACY), real
    folders, nothing else beside them, and in each only names a store makes (each carries the entry's 64-hex key; a
    day's statistics file). A user's folder that merely has a `tmp/` or `stats/` of its own is not one: marking it
    would let `store gc` sweep the user's files there."""
    if not set(LEGACY) <= set(names) <= set(STORE_FOLDERS):
        return False
    for sub in names:
        try:
            if not stat.S_ISDIR(os.lstat(root / sub).st_mode):
                return False
            inside_names = os.listdir(root / sub)
        except OSError:
            return False
        made = Kind.store_stats.deletable.fullmatch if sub == "stats" else _HAS_KEY.search
        if not all(made(n) for n in inside_names):
            return False
    return True


def env_trust() -> str:
    """`TRTLS_STORE_TRUST` (user | group): whom a store named without a recipe's `trust` trusts; `user` when unset."""
    trust = os.environ.get("TRTLS_STORE_TRUST", "").strip().lower()
    return trust if trust in TRUST else "user"


def trust_problem(path: object, st: os.stat_result, trust: str) -> str | None:
    """Why a store folder or entry file with this stat is not trusted under `trust`, or None."""
    mode = st.st_mode
    if mode & stat.S_IWOTH:
        return f"{path} is writable by every user: anyone could forge an engine there"
    if trust == "group":
        return None
    if mode & stat.S_IWGRP:
        return (
            f"{path} is writable by its group (gid {st.st_gid}): any member could forge an engine there; "
            'set [store] trust = "group" if that group is trusted'
        )
    if st.st_uid not in (os.geteuid(), 0):
        return f'{path} belongs to another user (uid {st.st_uid}); set [store] trust = "group" to use it'
    return None


def root_problem(
    root: Path, recipe_dir: Path | None = None, protected: Iterable[Path] = (), trust: str = "user"
) -> str | None:
    """Every rule above for a store root as it is now (a missing root is judged by its place only)."""
    why = placement_problem(root, recipe_dir, protected) or content_problem(root)
    if why is not None or not os.path.isdir(root):
        return why
    for path in (Path(root), *(Path(root) / sub for sub in STORE_FOLDERS)):
        try:
            st = os.stat(path)
        except OSError:
            continue
        if (why := trust_problem(path, st, trust)) is not None:
            return why
    return None


def shared_modes(root: Path) -> tuple[int, int]:
    """(folder mode, file mode) for what trtls creates in the store: the store's own mode applied. A team's store
    (its root group-writable, `trust = "group"`) gets setgid, group-writable folders and group-writable files, so
    the other accounts of the group can lock, mark use, quarantine and evict what this one made under any umask."""
    try:
        group = os.stat(root).st_mode & stat.S_IWGRP
    except OSError:
        group = 0
    return (0o2775, 0o664) if group else (0o755, 0o644)


def fit_mode(path: Path, mode: int, within: Path) -> None:
    """Give a file or folder this process just made the store's mode (the umask took group write away); one of
    another account is left as it is (only its owner may change it)."""
    try:
        st = os.lstat(path)
    except OSError:
        return
    if st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) != mode and not stat.S_ISLNK(st.st_mode):
        with contextlib.suppress(OSError):
            chmod(path, mode, kind=Kind.store_entry, within=within)


def make_store(root: Path) -> Path:
    """Create (or complete) the store at `root`, the root marked as a store (a later sweep runs only in a marked
    store). Judge it with `root_problem` first. Returns the real root."""
    root = Path(root).absolute()
    anchor = root
    while not os.path.lexists(anchor) and anchor != anchor.parent:
        anchor = anchor.parent  # the deepest existing folder: the root's missing folders are created below it
    if not os.path.isdir(anchor):
        raise UnsafeWrite(errno.ENOTDIR, "is not a folder", str(anchor))
    marked = os.path.isdir(root) and is_store(root)  # another account's mark is not opened for writing again
    made = ensure_folder(root, within=anchor, mark=None if marked else STORE_MARK)
    if not is_store(made):  # an OWNED_MARK of another kind (a scratch folder) was there already
        raise UnsafeWrite(errno.EEXIST, "carries another trtls mark; it is not made a store", str(root))
    folder_mode, _ = shared_modes(made)
    for sub in STORE_FOLDERS:  # unmarked: they are the store's by the root's mark (a sweep checks the root)
        ensure_folder(made / sub, within=made)
        if folder_mode != 0o755:
            fit_mode(made / sub, folder_mode, made)
    return made
