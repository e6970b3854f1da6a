"""What a checkpoint file *is*, judged by its bytes and never by its name, and without running anything.

* `find_pickle(path)`: a pickle stream at byte 0 (any protocol; protocol 0/1 confirmed by disassembling the opcodes
  with `pickletools.genops`, which parses and never executes), the same behind gzip/zlib/bz2/xz compression
  (joblib's compressed dumps), or inside a zip container (PyTorch's `.pt`/`.bin`/`.ckpt` zip format keeps
  `archive/data.pkl`) — whatever the file is called. `scaler.joblib`, `weights.dat` and `model.bin` are all found.
* `safetensors_problems(path)`: the header validated without loading any weight: the 8-byte length, JSON object,
  every tensor with a known dtype, a shape of non-negative integers, `data_offsets` whose span is exactly
  dtype size × elements, inside the data region, no two tensors overlapping and no byte of the region left
  uncovered (the safetensors format's own rules, which its loader enforces with an exception).

Each problem names the file, the tensor and the byte offsets, so gate 1 and `trtls route build` report it as a
located finding instead of dying on the loader's exception.
"""

from __future__ import annotations

import bz2
import io
import lzma
import os
import pickletools
import struct
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from trtls.fs import open_regular, parse_json

SNIFF_BYTES = 64 * 1024  # protocol 0/1 pickles are confirmed on this much of the stream
MAX_ZIP_MEMBERS = 100_000
MAX_SAFETENSORS_HEADER = 100 * 1024 * 1024
# safetensors dtypes → bits per element (the format's Dtype enum)
SAFETENSORS_DTYPE_BITS = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "F64": 64,
    "I64": 64,
    "U64": 64,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "C64": 64,
}
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
_PROTO0_FIRST = set(b"(}]cIFSVNLXJKMTUGdlpt")  # opcodes a protocol 0/1 pickle commonly starts with


@dataclass(frozen=True)
class PickleFound:
    where: str  # "byte 0", "gzip stream", "zip member archive/data.pkl"
    protocol: int | None

    def __str__(self) -> str:
        proto = f"protocol {self.protocol}" if self.protocol is not None else "protocol 0/1"
        return f"pickle ({proto}) at {self.where}"


def _pickle_at_start(head: bytes) -> int | None | bool:
    """The protocol of a pickle starting at `head[0]` (None = protocol 0/1), or False when it is not one."""
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return head[1]
    if not head or head[0] not in _PROTO0_FIRST:
        return False
    count = 0
    try:
        for op, _, _ in pickletools.genops(io.BytesIO(head)):  # disassembles; never executes
            count += 1
            if op.name == "STOP":
                return None
    except Exception:  # an invalid opcode, or the sample ended mid-stream
        pass
    # a stream longer than the sample: many valid opcodes up to its end is a pickle, not text that starts like one
    return None if len(head) >= SNIFF_BYTES and count >= 32 else False


def _decompressed_head(head: bytes, path: Path) -> tuple[str, bytes] | None:
    """(compression, first bytes of the decompressed stream) for gzip / zlib / bz2 / xz, else None."""
    try:
        if head[:2] == b"\x1f\x8b":
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            return "gzip stream", d.decompress(_read(path, SNIFF_BYTES), SNIFF_BYTES)
        if len(head) >= 2 and head[0] == 0x78 and (head[0] * 256 + head[1]) % 31 == 0:
            return "zlib stream", zlib.decompressobj().decompress(_read(path, SNIFF_BYTES), SNIFF_BYTES)
        if head[:3] == b"BZh":
            return "bz2 stream", bz2.BZ2Decompressor().decompress(_read(path, SNIFF_BYTES), SNIFF_BYTES)
        if head[:6] == b"\xfd7zXZ\x00":
            return "xz stream", lzma.LZMADecompressor().decompress(_read(path, SNIFF_BYTES), SNIFF_BYTES)
    except (zlib.error, OSError, EOFError, lzma.LZMAError, ValueError):
        return None
    return None


def _read(path: Path, n: int) -> bytes:
    """The first `n` bytes of a checkpoint file (a regular file only: a FIFO or a device is refused, not read)."""
    with open_regular(path, limit=None, follow=True) as f:
        return f.read(n)


_DECOMPRESSORS: dict[int, Callable[[], Any]] = {
    zipfile.ZIP_DEFLATED: lambda: zlib.decompressobj(-zlib.MAX_WBITS),  # raw deflate, as zip stores it
    zipfile.ZIP_BZIP2: bz2.BZ2Decompressor,
}


def _member_head(f: BinaryIO, info: zipfile.ZipInfo, n: int) -> bytes:
    """The first `n` bytes of a zip member, read from its local header's data (stored, deflate or bzip2) without
    inflating the rest: a multi-gigabyte tensor member costs one chunk. Other methods and encryption raise."""
    if info.flag_bits & 0x1:
        raise RuntimeError(f"{info.filename} is encrypted")
    f.seek(info.header_offset)
    local = f.read(30)
    if len(local) < 30 or local[:4] != b"PK\x03\x04":
        raise zipfile.BadZipFile(f"no local header for {info.filename}")
    name_len, extra_len = struct.unpack("<HH", local[26:30])
    f.seek(info.header_offset + 30 + name_len + extra_len)
    left = info.compress_size
    if info.compress_type == zipfile.ZIP_STORED:
        return f.read(min(n, left))
    make = _DECOMPRESSORS.get(info.compress_type)
    if make is None:
        raise NotImplementedError(f"compression method {info.compress_type}")
    d, out = make(), b""
    while left > 0 and len(out) < n:
        part = f.read(min(SNIFF_BYTES, left))
        if not part:
            break
        left -= len(part)
        out += d.decompress(part, n - len(out))
    return out[:n]


def _zip_pickle(path: Path) -> PickleFound | None:
    try:
        with open_regular(path, limit=None, follow=True) as f, zipfile.ZipFile(f) as z:
            infos = z.infolist()[:MAX_ZIP_MEMBERS]
            for info in infos:
                if info.is_dir():
                    continue
                if info.filename.endswith((".pkl", ".pickle")):
                    return PickleFound(f"zip member {info.filename}", None)
                got = _pickle_at_start(_member_head(f, info, SNIFF_BYTES))
                if got is not False:
                    return PickleFound(f"zip member {info.filename}", got if isinstance(got, int) else None)
    except (zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError, EOFError, zlib.error):
        return None
    return None


def find_pickle(path: str | Path) -> PickleFound | None:
    """A pickle stream in `path` (see the module doc), or None. Reads bytes; never unpickles."""
    p = Path(path)
    head = _read(p, SNIFF_BYTES)
    got = _pickle_at_start(head)
    if got is not False:
        return PickleFound("byte 0", got if isinstance(got, int) else None)
    if head[:4] in _ZIP_MAGIC:
        return _zip_pickle(p)
    inner = _decompressed_head(head, p)
    if inner is not None:
        kind, data = inner
        got = _pickle_at_start(data)
        if got is not False:
            return PickleFound(kind, got if isinstance(got, int) else None)
    return None


# ------------------------------------------------------------------------------------------ safetensors


@dataclass(frozen=True)
class SafetensorsTensor:
    name: str
    dtype: str
    shape: tuple[int, ...]
    start: int  # offset in the data region (after 8 + header length)
    end: int


def read_safetensors_header(path: str | Path) -> tuple[int, dict[str, SafetensorsTensor], list[str]]:
    """(data region start, tensors, problems). Reads the header only; problems name tensor and offsets."""
    p = Path(path)
    problems: list[str] = []
    tensors: dict[str, SafetensorsTensor] = {}
    try:
        with open_regular(p, limit=None, follow=True) as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(8)
            if len(head) < 8:
                return 0, {}, [f"{p.name}: shorter than the 8-byte header length ({len(head)} bytes)"]
            (n,) = struct.unpack("<Q", head)
            if n > MAX_SAFETENSORS_HEADER or 8 + n > size:
                return 0, {}, [f"{p.name}: header length {n} runs past the file ({size} bytes)"]
            header = parse_json(f.read(n).decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return 0, {}, [f"{p.name}: unreadable header: {exc}"]
    if not isinstance(header, dict):
        return 0, {}, [f"{p.name}: header is not a JSON object"]
    data_start = 8 + n
    data_size = size - data_start
    for name, info in header.items():
        if name == "__metadata__":
            if not isinstance(info, dict) or not all(isinstance(v, str) for v in info.values()):
                problems.append(f"{p.name}: __metadata__ must map strings to strings")
            continue
        where = f"{p.name}: tensor {name!r}"
        if not isinstance(info, dict):
            problems.append(f"{where}: entry is not an object")
            continue
        dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if dtype not in SAFETENSORS_DTYPE_BITS:
            problems.append(f"{where}: unknown dtype {dtype!r}")
            continue
        if not (
            isinstance(shape, list) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)
        ):
            problems.append(f"{where}: shape {shape!r} is not a list of non-negative integers")
            continue
        if not (
            isinstance(offsets, list)
            and len(offsets) == 2
            and all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
            and 0 <= offsets[0] <= offsets[1]
        ):
            problems.append(f"{where}: data_offsets {offsets!r} are not [start, end] with 0 <= start <= end")
            continue
        elements = 1
        for d in shape:
            elements *= d
        bits = elements * SAFETENSORS_DTYPE_BITS[dtype]
        span = offsets[1] - offsets[0]
        if bits % 8 or bits // 8 != span:
            problems.append(
                f"{where}: {dtype} × shape {shape} is {bits / 8:g} bytes but data_offsets {offsets} span {span}"
            )
        if offsets[1] > data_size:
            problems.append(
                f"{where}: data_offsets {offsets} end past the data region ({data_size} bytes, file byte {size})"
            )
        tensors[name] = SafetensorsTensor(name, dtype, tuple(shape), offsets[0], offsets[1])
    ordered = sorted(tensors.values(), key=lambda t: (t.start, t.end))
    cursor, last = 0, None  # the furthest end so far, and the tensor that reaches it
    for t in ordered:
        if last is not None and t.start < cursor and t.end > t.start:
            problems.append(
                f"{p.name}: tensors {last.name!r} [{last.start}, {last.end}) and {t.name!r} [{t.start}, {t.end}) "
                "overlap"
            )
        elif t.start > cursor:
            problems.append(f"{p.name}: bytes [{cursor}, {t.start}) of the data region belong to no tensor")
        if t.end >= cursor:
            cursor, last = t.end, t
    if not problems and cursor != data_size:
        problems.append(f"{p.name}: tensor data ends at byte {data_start + cursor} but the file has {size} bytes")
    return data_start, tensors, problems


def safetensors_problems(path: str | Path) -> list[str]:
    """Every problem of a .safetensors header (see the module doc); [] when it is sound."""
    return read_safetensors_header(path)[2]
