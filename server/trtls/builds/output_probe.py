"""Before a build spends its time: can the engine be put where it must go? The probe tests what the final rename needs.

Creating a file in the output's folder (`artifacts.output_unwritable`, TRT405) is not enough: an existing engine that
is immutable or append-only (`chattr +i` / `+a`) lets the folder accept new files but refuses the rename over it —
only after the whole build. So the probe also reads the target's inode flags (`FS_IOC_GETFLAGS`, what `lsattr` reads)
and renames a probe file over another probe file in the real folder (a filesystem that refuses rename-over fails
here). Nothing the user owns is opened for writing: the target is opened read-only, without following a symlink.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
from pathlib import Path

from trtls.builds.artifacts import output_unwritable
from trtls.core.atomic import TEMP_MARK

FS_IOC_GETFLAGS = 0x80086601  # _IOR('f', 1, long) on 64-bit Linux; the kernel reads and writes an int
FS_IMMUTABLE_FL = 0x00000010
FS_APPEND_FL = 0x00000020


def inode_flags(path: Path) -> int | None:
    """The file's inode flags (`lsattr`), or None when the filesystem or platform cannot say."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        raw = fcntl.ioctl(fd, FS_IOC_GETFLAGS, b"\0" * 8)
    except OSError:
        return None  # ENOTTY / EOPNOTSUPP: no such flags on this filesystem
    finally:
        os.close(fd)
    return int(struct.unpack("i", raw[:4])[0])


def target_unreplaceable(output: Path) -> str | None:
    """Why the existing engine at `output` could not be renamed over; None when it can (or there is none)."""
    try:
        os.lstat(output)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot examine {output}: {exc.strerror or exc}"
    if not os.path.isdir(output) and (flags := inode_flags(output)) is not None:
        if flags & FS_IMMUTABLE_FL:
            return f"the existing {output} is immutable (chattr +i): the rename over it would fail after the build"
        if flags & FS_APPEND_FL:
            return f"the existing {output} is append-only (chattr +a): the rename over it would fail after the build"
    return None


def rename_over_fails(folder: Path, name: str, build_id: str) -> str | None:
    """Rename one probe file over another in `folder` (what the engine's commit does); None when it works."""
    first = folder / f"{name}{TEMP_MARK}{build_id}.probe-a"
    second = folder / f"{name}{TEMP_MARK}{build_id}.probe-b"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    try:
        for p in (first, second):
            os.close(os.open(p, flags, 0o600))
        os.replace(first, second)
    except OSError as exc:
        return f"a rename over an existing file fails in {folder}: {exc.strerror or exc}"
    finally:
        for p in (first, second):
            with contextlib.suppress(OSError):
                os.unlink(p)
    return None


def output_problem(output: Path, build_id: str) -> tuple[str, str] | None:
    """(code, why) when the engine could not be committed to `output`; None when the probe passed."""
    why = output_unwritable(output, build_id)
    if why is not None:
        return "TRT405", why
    why = rename_over_fails(output.parent, output.name, build_id) or target_unreplaceable(output)
    if why is not None:
        return "TRT412", why
    return None
