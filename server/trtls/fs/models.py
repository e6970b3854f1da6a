"""Models, arrays and weights a user, a recipe or a record names, read through the door (`fs.read.open_regular`).

`onnx.load(path)`, `np.load(path)` and safetensors' `load_file(path)` open the path themselves: a FIFO named as a
model hangs them, a symlink to `/dev/zero` fills memory, and the error that does come is a library's traceback. Here
each file is opened by `open_regular` (regular files only, refused before a byte is read) and the library is given
the bytes or the open file. A model's external data is read the same way, file by file, from the folder the model
is named in (as `onnx.load` and TensorRT's parser join a location to it): links are followed while the file stays
inside the model's own tree (`data_root`: a Hugging Face cache keeps `weights.bin -> ../../blobs/<sha>`, which
onnx >= 1.18 itself refuses to read), an absolute location or one with `..` is refused, and a file shorter than a
tensor's offset and length is said, not read short.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trtls.core.paths import UnsafeWrite, real
from trtls.fs.read import open_regular, read_bytes

if TYPE_CHECKING:
    import numpy as np
    import onnx

ONNX_LIMIT = 2 << 30  # protobuf's own bound on one message: no ONNX model file is larger (weights go external)


class NotAnArchive(ValueError):
    """A file named as a NumPy .npz that is not a zip archive (np.load would read it as a pickle or one array)."""


def data_root(model: str | os.PathLike[str]) -> Path:
    """The folder an external data file's real path must stay inside: the model's real folder, or, for a model
    inside a Hugging Face cache snapshot (`<repo>/snapshots/<rev>/…` beside `<repo>/blobs`), the repository's."""
    folder = Path(os.path.abspath(model)).parent
    parts = folder.parts
    for index in range(len(parts) - 2, 0, -1):
        if parts[index] == "snapshots" and os.path.isdir(Path(*parts[:index], "blobs")):
            return real(Path(*parts[:index]))
    return real(folder)


def load_onnx(path: str | os.PathLike[str], *, external_data: bool = True) -> onnx.ModelProto:
    """`onnx.load(path)` through the door: the model file and (with `external_data`) each external data file it
    names are regular files, read bounded. OSError (an `UnsafeWrite` for a FIFO, a device, a location outside the
    model's folder) or what onnx raises for bytes that are not a model."""
    import onnx

    model = onnx.load_model_from_string(read_bytes(path, limit=ONNX_LIMIT, follow=True))
    if external_data:
        load_external_data(model, path)
    return model


def load_external_data(model: onnx.ModelProto, path: str | os.PathLike[str]) -> None:
    """`onnx.external_data_helper.load_external_data_for_model` for the model named `path`, each file opened by
    `open_regular` inside `data_root(path)`."""
    from onnx import TensorProto
    from onnx.external_data_helper import ExternalDataInfo, _get_all_tensors, uses_external_data

    base_dir, root = Path(path).parent, data_root(path)
    for tensor in _get_all_tensors(model):
        if not uses_external_data(tensor):
            continue
        info = ExternalDataInfo(tensor)
        location = str(info.location or "")
        if not location or "\0" in location or Path(location).is_absolute() or ".." in Path(location).parts:
            raise UnsafeWrite(
                errno.EXDEV,
                f"names external data {location!r} for tensor {tensor.name!r} outside the model's folder",
                str(base_dir),
            )
        named = Path(base_dir) / location
        offset, length = int(info.offset or 0), int(info.length or 0)
        with open_regular(named, limit=None, follow=True, within=root) as fh:
            size = os.fstat(fh.fileno()).st_size
            if offset + length > size or offset > size:
                raise UnsafeWrite(
                    errno.EINVAL,
                    f"is {size} bytes, shorter than tensor {tensor.name!r} needs (offset {offset}, length {length})",
                    str(named),
                )
            fh.seek(offset)
            tensor.raw_data = fh.read(length) if length else fh.read()
        tensor.data_location = TensorProto.DEFAULT
        del tensor.external_data[:]


def require_regular(path: str | os.PathLike[str]) -> None:
    """For a library that must be given the model's path itself — TensorRT's parser (`parse_from_file`), ONNX
    Runtime (`InferenceSession(path)`) and ModelOpt (`convert_to_mixed_precision(onnx_path=…)`) resolve external data
    relative to it: refuse a FIFO, a device or a folder named as the model before the library opens it (an OSError
    with the path and why, instead of a hang or memory filled by /dev/zero). The library opens the name again after
    this; a caller that can take the model's bytes uses `load_onnx`, which has no such gap. `tests/test_one_door.py`
    fails on a `parse_from_file`, an `InferenceSession` or a `convert_to_mixed_precision` of a path in a function
    that does not call this first."""
    with open_regular(path, limit=None, follow=True):
        pass


def load_npz(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """The arrays of a NumPy .npz by name, never unpickled (a hostile .npz cannot run code), from a regular file
    only. NotAnArchive for a file that is not a zip archive; OSError, ValueError or zipfile.BadZipFile for one that
    cannot be read."""
    import zipfile

    import numpy as np

    with open_regular(path, limit=None, follow=True) as fh:
        if not zipfile.is_zipfile(fh):
            raise NotAnArchive("it is not an .npz archive")
        fh.seek(0)
        _bounded_npz(fh)
        fh.seek(0)
        with np.load(fh, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}


MAX_NPZ_ARRAYS_BYTES = 1 << 30  # the arrays of one inputs file, uncompressed: a model's inputs, never a disk's worth


def _bounded_npz(fh: Any) -> None:
    """Refuse, before any array is decompressed or allocated, an .npz whose members hold more than
    MAX_NPZ_ARRAYS_BYTES uncompressed (1 MB of deflated zeros was 1 GiB in memory) or whose array header claims more
    bytes than its member holds (a 268-byte file whose header said (100000, 100000) asked for 37 GiB). Zip's own
    reader stops each member at its declared size, so these two numbers bound what the load can use."""
    import zipfile

    import numpy as np

    with zipfile.ZipFile(fh) as archive:
        members = archive.infolist()
        total = sum(info.file_size for info in members)
        if total > MAX_NPZ_ARRAYS_BYTES:
            raise ValueError(f"its arrays hold {total:,} bytes uncompressed, more than {MAX_NPZ_ARRAYS_BYTES:,}")
        for info in members:
            if not info.filename.endswith(".npy"):
                continue
            with archive.open(info) as member:
                version = np.lib.format.read_magic(member)
                read_header = (
                    np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                )
                shape, _, dtype = read_header(member)
                claimed = int(np.prod(shape, dtype=object)) * dtype.itemsize
                if claimed > info.file_size:
                    raise ValueError(
                        f"array {info.filename!r} claims {claimed:,} bytes (shape {tuple(shape)}) in a member of "
                        f"{info.file_size:,}"
                    )


def load_safetensors(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """safetensors' `load_file(path)` on the regular file `open_regular` opened (mapped through its /proc name, so
    the file judged is the file read; read whole where there is no /proc)."""
    from safetensors.numpy import load, load_file

    with open_regular(path, limit=None, follow=True) as fh:
        proc = f"/proc/self/fd/{fh.fileno()}"
        if os.path.exists(proc):
            return dict(load_file(proc))
        return dict(load(fh.read()))
