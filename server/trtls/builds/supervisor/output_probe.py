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
import stat
import struct
from pathlib import Path

from trtls.builds.artifacts import output_unwritable
from trtls.builds.roots import nearest_folder
from trtls.fs import Kind, atomic_write_bytes, open_regular, remove_file, rename
from trtls.fs.kinds import TEMP_MARK

FS_IOC_GETFLAGS = 0x80086601  # _IOR('f', 1, long) on 64-bit Linux; the kernel reads and writes an int
FS_IMMUTABLE_FL = 0x00000010
FS_APPEND_FL = 0x00000020


def inode_flags(path: Path) -> int | None:
    """The file's inode flags (`lsattr`), or None when the filesystem or platform cannot say (or `path` is not a
    regular file: a FIFO, a device or a symlink is never opened)."""
    try:
        with open_regular(path, limit=None) as fh:
            raw = fcntl.ioctl(fh.fileno(), FS_IOC_GETFLAGS, b"\0" * 8)
    except OSError:
        return None  # ENOTTY / EOPNOTSUPP: no such flags on this filesystem
    return int(struct.unpack("i", raw[:4])[0])


def target_unreplaceable(output: Path) -> str | None:
    """Why the existing engine at `output` could not be renamed over; None when it can (or there is none)."""
    try:
        st = os.lstat(output)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot examine {output}: {exc.strerror or exc}"
    if stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) or stat.S_ISSOCK(st.st_mode):
        # the commit refuses to rename over one (it is not an engine trtls wrote), but only after the whole build
        return f"{output} is not a regular file (a FIFO, a device or a socket): an engine is never written over one"
    if not os.path.isdir(output) and (flags := inode_flags(output)) is not None:
        if flags & FS_IMMUTABLE_FL:
            return f"the existing {output} is immutable (chattr +i): the rename over it would fail after the build"
        if flags & FS_APPEND_FL:
            return f"the existing {output} is append-only (chattr +a): the rename over it would fail after the build"
    return None


def rename_over_fails(folder: Path, name: str, build_id: str, within: Path | None = None) -> str | None:
    """Rename one probe file over another in `folder` (what the engine's commit does); None when it works.
    `within`: the folder the probe must stay in (the job's `write_root`)."""
    first = folder / f"{name}{TEMP_MARK}{build_id}.probe-a"
    second = folder / f"{name}{TEMP_MARK}{build_id}.probe-b"
    root = within if within is not None else nearest_folder(folder)
    try:
        for p in (first, second):
            atomic_write_bytes(p, b"", kind=Kind.engine_output, within=root)
        rename(first, second, kind=Kind.engine_output, within=root)
    except OSError as exc:
        return f"a rename over an existing file fails in {folder}: {exc.strerror or exc}"
    finally:
        for p in (first, second):
            with contextlib.suppress(OSError):
                remove_file(p, kind=Kind.engine_output, within=root)
    return None


def output_problem(output: Path, build_id: str, within: Path | None = None) -> tuple[str, str] | None:
    """(code, why) when the engine could not be committed to `output`; None when the probe passed. `within`: the
    job's `write_root` (by default the output's nearest existing folder)."""
    why = output_unwritable(output, build_id, within)
    if why is not None:
        return "TRT405", why
    why = rename_over_fails(output.parent, output.name, build_id, within) or target_unreplaceable(output)
    if why is not None:
        return "TRT412", why
    return None
