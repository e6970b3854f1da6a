"""A file's or folder's inode flags (`chattr +i`): set and cleared through the door, never through a symlink.

Only the acceptance scenarios use this (an output folder made unwritable even for root). It used to run the `chattr`
command on a path: a name swapped for a link between the check and the command changed whatever the link named, and a
`subprocess` argv was a way around the door the AST walk did not see. Here the target is opened O_NOFOLLOW under its
judged folder's descriptor (`fs.folder.open_folder`) and the flag is changed with the same ioctl chattr uses, on that
descriptor.
"""

from __future__ import annotations

import array
import errno
import fcntl
import os
import stat
import struct

from trtls.core.paths import UnsafeWrite
from trtls.fs.folder import _CLOEXEC, _NOFOLLOW, open_folder, own_file
from trtls.fs.kinds import Kind

_LONG = struct.calcsize("l")  # the ioctl numbers encode sizeof(long), though the kernel reads an int
FS_IOC_GETFLAGS = (2 << 30) | (_LONG << 16) | (ord("f") << 8) | 1
FS_IOC_SETFLAGS = (1 << 30) | (_LONG << 16) | (ord("f") << 8) | 2
FS_IMMUTABLE_FL = 0x10
_REFUSED = {errno.EPERM, errno.EACCES, errno.ENOTTY, errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS}


def set_immutable(path: str | os.PathLike[str], on: bool, *, kind: Kind, within: str | os.PathLike[str]) -> bool:
    """`chattr +i` (`on`) or `chattr -i` on the file or folder `path` inside `within`. True when the flag is now as
    asked; False when this account or this filesystem cannot set it (not root, tmpfs, overlay). A symlink at `path`
    is refused (UnsafeWrite), never followed; a file must be this account's with one name only."""
    from pathlib import Path

    target = Path(path)
    with open_folder(target.parent, within) as folder_fd:
        try:
            fd = os.open(target.name, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC, dir_fd=folder_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafeWrite(
                    errno.ELOOP, "is a symlink; trtls never changes a flag through one", str(path)
                ) from None
            raise type(exc)(exc.errno, exc.strerror, str(path)) from None
    try:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode):
            own_file(st, path, kind.label)
        elif not stat.S_ISDIR(st.st_mode):
            raise UnsafeWrite(errno.EINVAL, "is not a regular file or a folder", str(path))
        flags = array.array("i", [0])
        try:
            fcntl.ioctl(fd, FS_IOC_GETFLAGS, flags, True)
            wanted = flags[0] | FS_IMMUTABLE_FL if on else flags[0] & ~FS_IMMUTABLE_FL
            if wanted != flags[0]:
                flags[0] = wanted
                fcntl.ioctl(fd, FS_IOC_SETFLAGS, flags, True)
        except OSError as exc:
            if exc.errno in _REFUSED:
                return False
            raise
        return True
    finally:
        os.close(fd)
