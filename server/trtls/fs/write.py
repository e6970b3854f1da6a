"""Creating and replacing files: atomic, by descriptor, inside the folder the write must stay in.

A write is: the target's real folder judged inside `within` and opened component by component without following a
link (`fs.folder.open_folder`); a temp file created there O_EXCL|O_NOFOLLOW, written, fsynced; the final name
checked again (a symlink planted meanwhile is refused, never replaced); the temp renamed over the name inside
the same folder descriptor; the folder fsynced. A reader sees the old file or the whole new one.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from trtls.core.paths import UnsafeWrite
from trtls.fs.folder import _CLOEXEC, _NOFOLLOW, open_folder, own_file
from trtls.fs.kinds import ENGINE_HEAD, TEMP_MARK, Kind, engine_replace_refusal

DEFAULT_MODE = 0o644  # mkstemp makes 0600; published artifacts are readable like any file the user writes


def temp_path_for(target: Path, tag: str) -> Path:
    """The temp file a build writes beside `target` before renaming it over (tag = build id)."""
    return target.with_name(f"{target.name}{TEMP_MARK}{tag}")


def fsync_dir(folder: str | os.PathLike[str]) -> None:
    """Flush a folder's entries (a rename is only durable once its folder is synced). Read-only: no door needed."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def _split(path: str | os.PathLike[str]) -> tuple[Path, str]:
    target = Path(path)
    if target.name in ("", ".", ".."):
        raise UnsafeWrite(errno.EISDIR, "not a file name", str(target))
    return target.parent if str(target.parent) else Path("."), target.name


def _final_is_link(folder_fd: int, name: str) -> str | None:
    """The link text when `name` in the folder is a symlink, else None."""
    try:
        st = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return os.readlink(name, dir_fd=folder_fd)
    return None


def _named(exc: OSError, path: str | os.PathLike[str]) -> OSError:
    """`exc` naming the whole path the caller asked to write (an UnsafeWrite stays what it is)."""
    if isinstance(exc, UnsafeWrite):
        return exc
    return OSError(exc.errno, exc.strerror, str(path))


def _create_temp(folder_fd: int, name: str, temp_name: str | None, mode: int) -> tuple[int, str]:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
    if temp_name is not None:
        return os.open(temp_name, flags, mode, dir_fd=folder_fd), temp_name
    while True:
        candidate = f".{name[:120]}.{os.urandom(4).hex()}.tmp"  # secrets.token_hex(4), without `secrets`
        try:
            return os.open(candidate, flags, mode, dir_fd=folder_fd), candidate
        except FileExistsError:
            continue


@contextlib.contextmanager
def atomic_writer(
    path: str | os.PathLike[str],
    *,
    kind: Kind,
    within: str | os.PathLike[str],
    mode: int = DEFAULT_MODE,
    temp_name: str | None = None,
    may_replace: object = None,
    unchanged: bytes | None = None,
) -> Iterator[BinaryIO]:
    """Yield a binary file that replaces `path` when the block ends without an exception (on an exception the temp
    file is removed and `path` is untouched). `may_replace(head: bytes) -> bool`: asked with the first 4 KiB of an
    existing regular file before it is replaced (a `-o` report replaces only a report trtls wrote). `unchanged`:
    the bytes the caller read and edited (b"" for a file that was not there) — a file of the user's that trtls edits
    is replaced only while it still holds them, compared and renamed under a lock on its folder, so an edit made
    meanwhile (another `trtls import`, an editor's save) is never lost: refused, nothing written."""
    folder, name = _split(path)
    with open_folder(folder, within) as folder_fd:
        link = _final_is_link(folder_fd, name)
        if link is not None:
            raise UnsafeWrite(errno.ELOOP, f"is a symlink (to {link}); trtls never writes through one", str(path))
        _check_replace(folder_fd, name, kind, may_replace, path)
        try:
            fd, tmp = _create_temp(folder_fd, name, temp_name, mode)
        except OSError as exc:  # by descriptor the error names a bare temp name: say the file being written
            raise _named(exc, path) from exc
        try:
            with os.fdopen(fd, "wb") as out:
                os.fchmod(out.fileno(), mode)  # creation mode is masked by umask; published files keep `mode`
                yield out
                out.flush()
                os.fsync(out.fileno())
            if _final_is_link(folder_fd, name) is not None:  # planted while the file was written
                raise UnsafeWrite(errno.ELOOP, "became a symlink while it was written", str(path))
            if unchanged is not None:  # released when the folder's descriptor closes, after the rename
                with contextlib.suppress(OSError):  # NFS emulates flock with write locks: a folder's fd has none
                    fcntl.flock(folder_fd, fcntl.LOCK_EX)  # there the comparison alone stands (a narrow window)
                if _head(folder_fd, name, len(unchanged) + 1) != unchanged:  # one more: a file grown since
                    raise UnsafeWrite(
                        errno.ESTALE, "changed while trtls was writing it; nothing written (run it again)", str(path)
                    )
            if kind.replace == "engine":  # judged again at the rename: a file put there while the engine was written
                refuse_non_engine(folder_fd, name, path)
            try:
                os.replace(tmp, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
            except OSError as exc:
                raise _named(exc, path) from exc
        except BaseException as exc:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=folder_fd)
            if isinstance(exc, OSError) and not exc.filename:  # a write, flush or fsync (a full disk): say where
                raise _named(exc, path) from exc
            raise
        with contextlib.suppress(OSError):
            os.fsync(folder_fd)


def _check_replace(folder_fd: int, name: str, kind: Kind, may_replace: object, path: object) -> None:
    try:
        st = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        raise UnsafeWrite(errno.EISDIR, "is a folder; trtls replaces files only", str(path))
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeWrite(errno.EINVAL, "is not a regular file (a FIFO, a device or a socket)", str(path))
    if kind.replace == "no":
        raise UnsafeWrite(errno.EEXIST, f"already exists; a {kind.label} never replaces a file", str(path))
    if kind in (Kind.report, Kind.generated) and not st.st_mode & stat.S_IWUSR:
        # a rename replaces a file whatever its mode (and root writes any): a user's read-only file says "keep me"
        raise UnsafeWrite(
            errno.EACCES, "is read-only; trtls does not replace it (make it writable or choose another path)", str(path)
        )
    if kind.replace == "engine":
        refuse_non_engine(folder_fd, name, path)
    if kind.replace == "format" or may_replace is not None:
        head = _head(folder_fd, name, 4096) or b""
        ok = may_replace(head) if callable(may_replace) else st.st_size == 0
        if not ok:
            raise UnsafeWrite(
                errno.EEXIST,
                f"already exists and is not a {kind.label} trtls wrote; trtls does not replace it "
                "(remove it yourself or choose another path)",
                str(path),
            )


def _head(folder_fd: int, name: str, size: int) -> bytes | None:
    """At most the first `size` bytes of the regular file `name` in the folder (b"" when there is none), None when it
    cannot be read (or is no regular file): what an existing target is, judged through the folder's descriptor."""
    try:
        fd = os.open(name, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | _CLOEXEC, dir_fd=folder_fd)
    except FileNotFoundError:
        return b""
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks, left = [], size
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def refuse_non_engine(folder_fd: int, name: str, path: object) -> None:
    """An engine output replaces only an engine or an empty file (`fs.kinds.engine_replace_refusal`, the one rule)."""
    why = engine_replace_refusal(_head(folder_fd, name, ENGINE_HEAD))
    if why is not None:
        raise UnsafeWrite(errno.EEXIST, why, str(path))


def atomic_write_bytes(
    path: str | os.PathLike[str],
    data: bytes | bytearray | memoryview | Iterable[bytes],
    *,
    kind: Kind,
    within: str | os.PathLike[str],
    mode: int = DEFAULT_MODE,
    temp_name: str | None = None,
    may_replace: object = None,
    unchanged: bytes | None = None,
) -> None:
    """Write `data` (bytes, or an iterable of byte chunks) to `path` atomically (`unchanged`: see atomic_writer)."""
    with atomic_writer(
        path, kind=kind, within=within, mode=mode, temp_name=temp_name, may_replace=may_replace, unchanged=unchanged
    ) as out:
        if isinstance(data, (bytes, bytearray, memoryview)):
            out.write(data)
        else:
            for chunk in data:
                out.write(chunk)


def atomic_write_text(
    path: str | os.PathLike[str],
    text: str,
    *,
    kind: Kind,
    within: str | os.PathLike[str],
    mode: int = DEFAULT_MODE,
    may_replace: object = None,
    unchanged: bytes | None = None,
) -> None:
    """Write `text` (UTF-8, no newline translation) to `path` atomically (`unchanged`: see atomic_writer)."""
    data = text.encode("utf-8")
    atomic_write_bytes(path, data, kind=kind, within=within, mode=mode, may_replace=may_replace, unchanged=unchanged)


def append_text(
    path: str | os.PathLike[str], text: str, *, kind: Kind, within: str | os.PathLike[str], mode: int = DEFAULT_MODE
) -> None:
    """Append to a log or ledger (created when missing), never through a symlink, never to a non-regular file."""
    folder, name = _split(path)
    with open_folder(folder, within) as folder_fd:
        fd = os.open(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW | _CLOEXEC, mode, dir_fd=folder_fd)
        try:
            own_file(os.fstat(fd), path, kind.label)
            os.write(fd, text.encode("utf-8"))
        except OSError as exc:
            raise _named(exc, path) from exc
        finally:
            os.close(fd)


def touch(path: str | os.PathLike[str], *, kind: Kind, within: str | os.PathLike[str]) -> None:
    """Create `path` empty or set its times to now; never through a symlink (a link at the name is refused)."""
    folder, name = _split(path)
    with open_folder(folder, within) as folder_fd:
        fd = os.open(
            name,
            os.O_WRONLY | os.O_CREAT | _NOFOLLOW | _CLOEXEC | getattr(os, "O_NONBLOCK", 0),
            0o644,
            dir_fd=folder_fd,
        )
        try:
            own_file(os.fstat(fd), path, kind.label)
            os.utime(fd)
        finally:
            os.close(fd)


def chmod(path: str | os.PathLike[str], mode: int, *, kind: Kind, within: str | os.PathLike[str]) -> None:
    """Change a file's or folder's mode, never through a symlink."""
    folder, name = _split(path)
    with open_folder(folder, within) as folder_fd:
        if _final_is_link(folder_fd, name) is not None:
            raise UnsafeWrite(errno.ELOOP, "is a symlink; trtls never changes a mode through one", str(path))
        st = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
        if not stat.S_ISDIR(st.st_mode):
            own_file(st, path, kind.label)  # a mode is the file's, not the name's: another name would change too
        os.chmod(name, mode, dir_fd=folder_fd)
