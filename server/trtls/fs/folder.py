"""Open a folder by descriptor, judged against the folder a write must stay in.

`open_folder(folder, within)`: the folder's real path must be inside `within`'s real path; it is then opened
from `within` one component at a time with O_NOFOLLOW|O_DIRECTORY, so a component swapped for a symlink after the
judgement fails the open (ELOOP/ENOTDIR) instead of leading the write elsewhere. Every create, rename and unlink of
the door then happens relative to that descriptor.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from trtls.core.paths import UnsafeWrite, inside, real

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
DIR_FLAGS = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC


def _refuse(err: int, why: str, path: object) -> UnsafeWrite:
    return UnsafeWrite(err, why, str(path))


def own_file(st: os.stat_result, path: object, label: str) -> None:
    """A file changed in place (a lock's holder line, a log appended to, a stream, a touched mark, a mode) must be a
    regular file with one name: through a hard link planted at its name trtls would change another file (a recipe
    linked at an output lock's name was truncated). A file trtls made has one name; a replace (a rename) never needs
    this: it gives the name a new file and leaves the other names' file as it was."""
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(errno.EINVAL, "is not a regular file", path)
    if st.st_nlink > 1:  # EINVAL, as a FIFO there: a caller that replaces a planted name does so for this one too
        raise _refuse(
            errno.EINVAL,
            f"has {st.st_nlink} names (a hard link): trtls changes a file in place ({label}) only when it has one "
            "name, so the file another name leads to is never changed (remove this name; trtls makes its own)",
            path,
        )


def _walk(root: Path, parts: tuple[str, ...], create: bool, mode: int) -> int:
    """A descriptor of root/parts..., each component opened without following a symlink (created when asked)."""
    fd = os.open(root, DIR_FLAGS)
    try:
        for part in parts:
            try:
                nfd = os.open(part, DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, mode, dir_fd=fd)
                    nfd = os.open(part, DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    raise OSError(exc.errno, exc.strerror, str(root / part)) from exc
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _refuse(exc.errno, "a folder on the way is a symlink or not a folder", root / part) from None
                raise OSError(exc.errno, exc.strerror, str(root / part)) from exc  # the whole path, not a bare name
            os.close(fd)
            fd = nfd
            root = root / part
    except BaseException:
        os.close(fd)
        raise
    return fd


def _judge(folder: str | os.PathLike[str], within: str | os.PathLike[str]) -> tuple[Path, tuple[str, ...]]:
    base = real(within)
    target = real(folder)
    if not inside(target, base):
        raise _refuse(errno.EXDEV, f"its real folder {target} is outside {base}", folder)
    return base, target.relative_to(base).parts


@contextlib.contextmanager
def open_folder(folder: str | os.PathLike[str], within: str | os.PathLike[str]) -> Iterator[int]:
    """A descriptor of `folder` (which must exist), judged inside `within` and opened without following links."""
    base, parts = _judge(folder, within)
    fd = _walk(base, parts, create=False, mode=0o755)
    try:
        yield fd
    finally:
        os.close(fd)


def ensure_folder(
    folder: str | os.PathLike[str], *, within: str | os.PathLike[str], mode: int = 0o755, mark: str | None = None
) -> Path:
    """Create `folder` (and its missing parents) inside `within`, never through a symlink; `mark`: write the
    OWNED_MARK file with this text in it, so later sweeps know trtls made the folder. Returns the real path."""
    from trtls.fs.kinds import OWNED_MARK

    base = real(within)
    path = Path(folder)
    # the parts that exist are judged by their real path; those that do not are created one by one below them
    existing = path
    missing: list[str] = []
    while not os.path.lexists(existing) and existing != existing.parent:
        missing.insert(0, existing.name)
        existing = existing.parent
    if missing and any(p in ("..", ".") for p in missing):
        raise _refuse(errno.EINVAL, "a folder to create is named . or ..", folder)
    target = real(existing).joinpath(*missing)
    if not inside(target, base):
        raise _refuse(errno.EXDEV, f"its real folder {target} is outside {base}", folder)
    # `within` itself may not exist yet (an output folder `allow_outside` let out): walk from its nearest existing
    # folder, creating `within` and what lies below it, each component without following a link
    anchor = base
    while not os.path.lexists(anchor) and anchor != anchor.parent:
        anchor = anchor.parent
    judged_base, parts = _judge(existing, anchor)
    fd = _walk(judged_base, (*parts, *missing), create=True, mode=mode)
    try:
        if mark is not None:
            flags = os.O_WRONLY | os.O_CREAT | _NOFOLLOW | _CLOEXEC
            with contextlib.suppress(FileExistsError):
                mfd = os.open(OWNED_MARK, flags, 0o644, dir_fd=fd)
                try:
                    if os.fstat(mfd).st_size == 0:
                        os.write(mfd, mark.encode() + b"\n")
                finally:
                    os.close(mfd)
    finally:
        os.close(fd)
    return real(judged_base.joinpath(*parts, *missing))


def is_owned(folder_fd: int) -> bool:
    """Whether the open folder carries trtls's OWNED_MARK (a regular file, not a link)."""
    from trtls.fs.kinds import OWNED_MARK

    try:
        st = os.stat(OWNED_MARK, dir_fd=folder_fd, follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode)
