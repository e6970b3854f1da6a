"""Deleting and renaming: only names trtls makes, only inside the folder the caller must stay in, never through a
link.

`remove_file` unlinks one name (a symlink at the name is unlinked itself; what it points to is never touched).
`remove_tree` removes a folder by descriptor (`shutil.rmtree(dir_fd=…)`): a symlink met inside is unlinked, never
followed, and a root that is a link is refused. `owned=True` additionally requires the folder the name is removed
*from* to carry trtls's OWNED_MARK, so a sweep of `<store>/tmp` never runs in a folder trtls did not make.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from trtls.core.paths import UnsafeWrite
from trtls.fs.folder import is_owned, open_folder
from trtls.fs.kinds import Kind
from trtls.fs.write import refuse_non_engine


def _check_name(path: str | os.PathLike[str], kind: Kind) -> tuple[Path, str]:
    target = Path(path)
    if not kind.may_delete(target.name):
        raise UnsafeWrite(errno.EPERM, f"is not a name trtls makes for a {kind.label}; it is left alone", str(path))
    return target.parent if str(target.parent) else Path("."), target.name


def _check_owned(folder_fd: int, owned: bool, path: object) -> None:
    if owned and not is_owned(folder_fd):
        raise UnsafeWrite(errno.EPERM, "its folder was not made by trtls; nothing is deleted there", str(path))


def _remove(path: str | os.PathLike[str], kind: Kind, within: str | os.PathLike[str], owned: bool, tree: bool) -> bool:
    """The one delete: name checked, folder opened by descriptor inside `within` (and owned when asked), the final
    entry lstat'ed; a file or link is unlinked, a folder removed by descriptor. False when it was already gone."""
    folder, name = _check_name(path, kind)
    try:
        with open_folder(folder, within) as folder_fd:
            _check_owned(folder_fd, owned, path)
            try:
                st = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
            except FileNotFoundError:
                return False
            if not tree:
                if stat.S_ISDIR(st.st_mode):
                    raise UnsafeWrite(errno.EISDIR, "is a folder", str(path))
                os.unlink(name, dir_fd=folder_fd)
                return True
            if stat.S_ISLNK(st.st_mode):
                raise UnsafeWrite(errno.ELOOP, "is a symlink; trtls never deletes through one", str(path))
            if not stat.S_ISDIR(st.st_mode):
                raise UnsafeWrite(errno.ENOTDIR, "is not a folder", str(path))
            import shutil  # here: a build's worker imports this module and removes no folder (shutil brings bz2, lzma)

            shutil.rmtree(name, dir_fd=folder_fd)
            return True
    except FileNotFoundError:
        return False


def remove_file(
    path: str | os.PathLike[str], *, kind: Kind, within: str | os.PathLike[str], owned: bool = False
) -> bool:
    """Unlink `path` (a file or a symlink, never a folder). False when it was already gone."""
    return _remove(path, kind, within, owned, tree=False)


def remove_tree(
    path: str | os.PathLike[str], *, kind: Kind, within: str | os.PathLike[str], owned: bool = False
) -> bool:
    """Remove the folder `path` and everything in it, by descriptor. False when it was already gone; UnsafeWrite
    when `path` is a symlink or not a folder (nothing removed)."""
    return _remove(path, kind, within, owned, tree=True)


def rename(
    source: str | os.PathLike[str],
    target: str | os.PathLike[str],
    *,
    kind: Kind,
    within: str | os.PathLike[str],
    replace: bool = True,
) -> None:
    """Move `source` to `target`, both inside `within`, by folder descriptors (a folder swapped meanwhile is
    refused). The source must be a name trtls makes for `kind` and not a symlink; `replace=False` refuses an
    existing target."""
    src_folder, src_name = _check_name(source, kind)
    dst = Path(target)
    if dst.name in ("", ".", ".."):
        raise UnsafeWrite(errno.EISDIR, "not a file name", str(target))
    with open_folder(src_folder, within) as sfd, open_folder(dst.parent, within) as dfd:
        st = os.stat(src_name, dir_fd=sfd, follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            raise UnsafeWrite(errno.ELOOP, "is a symlink; trtls never moves one", str(source))
        try:
            dst_st = os.stat(dst.name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            dst_st = None
        if dst_st is not None and (not replace or stat.S_ISLNK(dst_st.st_mode)):
            raise UnsafeWrite(errno.EEXIST, "already exists (or is a symlink); not replaced", str(target))
        if dst_st is not None and kind.replace == "engine":
            refuse_non_engine(dfd, dst.name, target)  # the kind's replace rule, as every write of it obeys
        try:
            os.rename(src_name, dst.name, src_dir_fd=sfd, dst_dir_fd=dfd)
        except OSError as exc:  # by descriptor the error names a bare name: say the whole path that was moved
            raise OSError(exc.errno, exc.strerror, str(source), None, str(target)) from exc
        for fd in {sfd, dfd}:
            try:
                os.fsync(fd)
            except OSError:
                pass
