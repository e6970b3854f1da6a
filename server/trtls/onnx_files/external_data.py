"""Where an ONNX model's external data lives, and why a file it names cannot be read, said plainly.

A tensor stored outside the model names a `location` relative to the model's folder (as the model is named, not
its real folder: TensorRT's parser and onnx both join the location to the path they were given). The location may
be a symlink — a Hugging Face cache keeps `snapshots/<rev>/weights.bin -> ../../blobs/<sha>` — and that is fine
while the file it leads to stays inside the model's own tree: the model's folder, or in a Hugging Face cache the
model's repository folder (`models--org--name`, which holds both `snapshots/` and `blobs/`). A location that leads
anywhere else (`/etc/shadow`, another user's home), a symlink loop, a FIFO or a device is reported with the reason
instead of being read (a FIFO would hang the key's hash; a link out of the tree reads what the model's author
chose, not what the user shipped).
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from trtls.core.paths import inside, real
from trtls.fs.models import data_root

# 2: every tensor the model can reference (attributes, sparse, subgraphs, functions); 3: a message written in parts
# (a second `graph`, a Constant's `value` twice) read as their merge, a tag in its long form seen by the byte filters
READER_VERSION = 3


@dataclass(frozen=True)
class ExternalData:
    tensor: str
    location: str  # relative to the model's folder
    offset: int
    length: int | None
    where: str = ""  # which tensor of the model reads it: "initializer 'w' in node 'if0' (If) › then_branch"

    @property
    def described(self) -> str:
        return self.where or f"tensor {self.tensor!r}"


def locate(model: str | os.PathLike[str], location: str) -> tuple[Path, str | None]:
    """The file `location` names beside `model` (as named, links not followed) and why it cannot be read, or
    None when it can: a regular file whose real path stays inside `data_root(model)`. Never raises."""
    named = Path(os.path.abspath(model)).parent / location
    if not location or "\0" in location or Path(location).is_absolute() or ".." in Path(location).parts:
        return named, "leaves the model's folder"
    try:
        st = os.stat(named)
    except OSError as exc:
        return named, _unreadable(named, exc)
    resolved = real(named)
    root = data_root(model)
    if not inside(resolved, root):
        return named, (
            f"is a symlink to {resolved}, outside the model's folder {root}; trtls reads external data only inside "
            "the model's own tree (or its Hugging Face cache repository)"
        )
    if not stat.S_ISREG(st.st_mode):
        what = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file (a FIFO, a device or a socket)"
        return named, f"is {what}"
    return named, None


def _unreadable(named: Path, exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "is a symlink loop (too many levels of symbolic links)"
    if exc.errno == errno.ENOENT and os.path.lexists(named):
        try:
            return f"is a symlink to {os.readlink(named)}, which does not exist"
        except OSError:
            return "is a dangling symlink"
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return "missing"
    return f"cannot be read ({exc.strerror})"


def external_problems(model: Path, external: tuple[ExternalData, ...]) -> list[str]:
    """Missing, unreadable, out-of-tree or too-short external data files, each naming the tensor that reads it
    (what TensorRT's parser would fail on, or what trtls refuses to read, said plainly)."""
    needed: dict[str, tuple[int, ExternalData, int]] = {}  # location: (bytes needed, a reader, how many read it)
    for ext in external:
        end = ext.offset + (ext.length or 0)
        prior = needed.get(ext.location)
        if prior is None:
            needed[ext.location] = (end, ext, 1)
        else:
            needed[ext.location] = (max(end, prior[0]), ext if end > prior[0] else prior[1], prior[2] + 1)
    problems: list[str] = []
    for location, (end, ext, readers) in needed.items():
        others = f" and {readers - 1} other tensor{'s' if readers > 2 else ''}" if readers > 1 else ""
        named, why = locate(model, location)
        if why is not None:
            subject = f"location {location!r}" if why.startswith("leaves") else f"file {named}"
            problems.append(f"external data {subject} {why} (read by {ext.described}{others})")
            continue
        try:
            size = os.stat(named).st_size
        except OSError as exc:
            problems.append(f"external data file {named} {_unreadable(named, exc)} (read by {ext.described}{others})")
            continue
        if size < end:
            problems.append(f"external data file {named} is {size} bytes; {ext.described} needs {end}")
    return problems
