"""The `.bundle` container format and its safe reader: layout, limits, check ids, `read_bundle`.

Layout (little-endian)::

    0   8 bytes   magic  b"BUNDLE\\x01\\x00"
    8   u64       N = length of the JSON header in bytes (at most 100 MiB)
    16  N bytes   JSON header (UTF-8 object)
    16+N          payload: binary sections; header["sections"] = {name: {"offset", "size"}},
                  offsets counted from the payload start (the first byte after the header)

Required header fields (`REQUIRED_FIELDS`): `model_id`, `model_type`, `trt_version` (non-empty strings)
and `sections` (object). Optional fields are type-checked only when present; unknown fields are allowed
(the preview format will grow). `read_bundle` guarantees the container is safe to use (magic, header,
section table: every section inside the file, no overlaps, no path-like names); the header fields and
digests are judged by `bundle_verify`.

This module is what every other bundle module builds on (the constants, the problem types, the
hostile-input-safe file and JSON primitives), so it is kept free of hashing, writing and reporting.
Hostile input is the normal case here: a malformed file yields `BundleProblem`s / a `BundleError`, never
another exception, never a read sized by an unchecked header value, never a path built from a section name.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from trtls.core.paths import BUNDLE_SIDECAR_SUFFIX
from trtls.fs import open_regular
from trtls.fs.read import refuse_lone_surrogates

MAGIC = b"BUNDLE\x01\x00"
PREAMBLE_SIZE = len(MAGIC) + 8  # magic + u64 header length
MAX_HEADER = 100 * 1024 * 1024  # the format's own cap
MAX_SIDECAR = 100 * 1024 * 1024
SECTION_ALIGN = 64  # trtls aligns section starts so engines can be mapped/read without copying
CHUNK = 1024 * 1024  # streaming unit: hashing never holds more than this of a section in memory
SIDECAR_SUFFIX = BUNDLE_SIDECAR_SUFFIX  # spelled once, in core.paths (the recipe check reads sidecars too)
SIDECAR_FORMAT = "trtls.bundle-sidecar/1"
TRTLS_BLOCK_FORMAT = "trtls.bundle/1"
MAX_SECTION_NAME = 255

REQUIRED_FIELDS: dict[str, tuple[type, ...]] = {
    "model_id": (str,),
    "model_type": (str,),
    "trt_version": (str,),
    "sections": (dict,),
}
OPTIONAL_FIELDS: dict[str, tuple[type, ...]] = {
    "family": (str,),
    "trt_abi": (str, int),
    "gpu_name": (str,),
    "created_at": (str,),
    "precision": (str,),
    "quantization": (str, dict, type(None)),
    "runtime_strategy": (str,),
    "io_map": (dict, type(None)),
    "trtls": (dict,),
}

# Stable check ids (tests, the gate-3 report and docs/codes/gate-bundle.md key on these).
CHECK_IO = "bundle.io"  # cannot open/read, or not a regular file
CHECK_TRUNCATED = "bundle.truncated"  # shorter than the 16-byte preamble
CHECK_MAGIC = "bundle.magic"
CHECK_HEADER_LENGTH = "bundle.header_length"  # header runs past the end of the file
CHECK_HEADER_CAP = "bundle.header_cap"  # header longer than the cap
CHECK_HEADER_JSON = "bundle.header_json"  # not UTF-8 JSON (incl. duplicate keys, NaN, absurd nesting)
CHECK_HEADER_OBJECT = "bundle.header_object"  # JSON but not an object
CHECK_FIELD_MISSING = "bundle.field_missing"
CHECK_FIELD_TYPE = "bundle.field_type"
CHECK_SECTIONS_TABLE = "bundle.sections_table"  # an entry is not {"offset": int, "size": int}
CHECK_SECTION_BOUNDS = "bundle.section_bounds"  # negative, or past the end of the file
CHECK_SECTION_OVERLAP = "bundle.section_overlap"
CHECK_SECTION_NAME = "bundle.section_name"  # looks like a path
CHECK_TRTLS_BLOCK = "bundle.trtls_block"  # the header's `trtls` record is malformed or incomplete
CHECK_SECTION_DIGEST = "bundle.section_digest"
CHECK_FILE_DIGEST = "bundle.file_digest"
CHECK_SIDECAR = "bundle.sidecar"  # sidecar unreadable or malformed

_DRIVE = re.compile(r"^[A-Za-z]:")


@dataclass(frozen=True)
class BundleProblem:
    check: str
    message: str
    offset: int | None = None  # absolute byte offset in the file, where one applies
    section: str | None = None

    def __str__(self) -> str:
        where = f" (byte {self.offset})" if self.offset is not None else ""
        return f"[{self.check}] {self.message}{where}"


class BundleError(Exception):
    """The one exception malformed input may raise; `problems` says everything that was found."""

    def __init__(self, problems: list[BundleProblem]):
        self.problems = problems
        super().__init__("; ".join(str(p) for p in problems[:5]) + (" …" if len(problems) > 5 else ""))


@dataclass(frozen=True)
class Section:
    name: str
    offset: int  # relative to the payload start, as stored
    size: int
    start: int  # absolute position in the file

    @property
    def end(self) -> int:
        return self.start + self.size


@dataclass
class Bundle:
    """A bundle whose container was checked: every `Section` lies inside the file, none overlap."""

    path: Path
    header: dict[str, Any]
    sections: dict[str, Section]  # in file order
    payload_start: int
    file_size: int

    def iter_section(self, name: str, chunk: int = CHUNK) -> Iterator[bytes]:
        section = self.sections[name]  # KeyError for unknown names: a caller bug, not bad input
        with _open_regular(self.path) as f:
            yield from _iter_range(f, section.start, section.size, chunk)

    def read_section(self, name: str) -> bytes:
        """The whole section in memory; use `iter_section` for engine-sized sections."""
        return b"".join(self.iter_section(name))

    def section_sha256(self, name: str) -> str:
        h = hashlib.sha256()
        for part in self.iter_section(name):
            h.update(part)
        return h.hexdigest()


def sidecar_path(path: str | os.PathLike[str]) -> Path:
    p = Path(path)
    return p.with_name(p.name + SIDECAR_SUFFIX)


# ---------------------------------------------------------------------------------------------- reading


def _clip(name: str, limit: int = 60) -> str:
    """A section name fit for a message (names come from untrusted headers and may be megabytes long)."""
    return repr(name if len(name) <= limit else name[:limit] + "…")


@contextlib.contextmanager
def _open_regular(path: Path) -> Iterator[BinaryIO]:
    """Open for reading through the door (`fs.open_regular`: a FIFO would hang a plain open, a device never ends):
    only a regular file; a bundle the user points at may be a symlink to one."""
    with contextlib.ExitStack() as stack:
        try:
            f = stack.enter_context(open_regular(path, limit=None, follow=True))
        except OSError as exc:
            if exc.errno in (errno.EINVAL, errno.EISDIR):
                raise BundleError([BundleProblem(CHECK_IO, f"{path} is not a regular file")]) from None
            raise BundleError([BundleProblem(CHECK_IO, f"cannot open {path}: {exc.strerror or exc}")]) from None
        yield f


def _iter_range(f: BinaryIO, start: int, size: int, chunk: int) -> Iterator[bytes]:
    f.seek(start)
    left = size
    while left > 0:
        part = f.read(min(chunk, left))
        if not part:  # the file shrank under us
            raise BundleError(
                [BundleProblem(CHECK_TRUNCATED, "file ended inside a section", offset=start + size - left)]
            )
        left -= len(part)
        yield part


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Two readers that keep different copies of a duplicated key would see different bundles.
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {_clip(key)}")
        out[key] = value
    return out


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parse_json_object(raw: bytes) -> Any:
    """json.loads that refuses duplicate keys and NaN/Infinity; every parse failure becomes ValueError."""
    try:
        text = raw.decode("utf-8")
        parsed = json.loads(text, object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant)
        return refuse_lone_surrogates(raw, parsed)  # a section named "cfg\ud800" crashed verify and promote
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 at header byte {exc.start}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{exc.msg} at header byte {exc.pos}") from None


# TensorRT Model Connect's optimized bundles name each artifact file by its relative path under this prefix. Such a
# name is accepted only as a plain relative path (no '..', no absolute path, no backslash, no empty, '.' or dot-led
# segment); it is still never used to build a path.
OPTIMIZED_PREFIX = "optimized_runtime_artifacts/"


def _relative_name_problem(rel: str) -> str | None:
    if rel == "" or rel.startswith("/"):
        return "names no relative path after the optimized_runtime_artifacts/ prefix"
    if "\\" in rel:
        return "contains a backslash"
    for part in rel.split("/"):
        if part in ("", ".", ".."):
            return "contains an empty, '.' or '..' path segment" if part != ".." else "contains '..'"
        if part.startswith("."):
            return "has a path segment that starts with '.'"
    return None


# A sentence-transformers module's file (`1_Pooling/config.json`): a TRTMC-format bundle (`bundle_format = "trtmc"`)
# carries it under the name the checkpoint gives it. One folder level, the folder named `<index>_<Module>`; the same
# plain-relative-path rules as above; never used to build a path.
ST_MODULE_FILE = re.compile(r"^\d+_[A-Za-z][A-Za-z0-9_]*/[A-Za-z0-9_][A-Za-z0-9_.-]*$")


def _name_problem(name: str) -> str | None:
    """Why a section name could be mistaken for a path (None if it is a plain name, a plain relative path under
    OPTIMIZED_PREFIX, or a sentence-transformers module file, ST_MODULE_FILE)."""
    if name == "":
        return "is empty"
    if len(name) > MAX_SECTION_NAME:
        return f"is longer than {MAX_SECTION_NAME} characters"
    if "\x00" in name:
        return "contains NUL"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        return "contains a control character"
    if name.startswith(OPTIMIZED_PREFIX):
        return _relative_name_problem(name[len(OPTIMIZED_PREFIX) :])
    if ST_MODULE_FILE.match(name):
        return _relative_name_problem(name)
    if "/" in name or "\\" in name:
        return "contains a path separator"
    if ".." in name:
        return "contains '..'"
    if name.startswith("."):
        return "starts with '.'"
    if _DRIVE.match(name):
        return "starts with a drive letter"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        return "contains a control character"
    return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _parse_container(
    path: Path, f: BinaryIO, file_size: int, max_header: int
) -> tuple[Bundle | None, list[BundleProblem]]:
    """Check the container; return the Bundle only if its section table is safe to use."""
    if file_size < PREAMBLE_SIZE:
        return None, [
            BundleProblem(
                CHECK_TRUNCATED, f"file is {file_size} bytes; the preamble alone is {PREAMBLE_SIZE}", offset=file_size
            )
        ]
    preamble = f.read(PREAMBLE_SIZE)
    if len(preamble) < PREAMBLE_SIZE:
        return None, [BundleProblem(CHECK_TRUNCATED, "file ended inside the preamble", offset=len(preamble))]
    if preamble[:8] != MAGIC:
        return None, [BundleProblem(CHECK_MAGIC, f"magic is {preamble[:8]!r}, expected {MAGIC!r}", offset=0)]
    (header_len,) = struct.unpack("<Q", preamble[8:])
    if header_len > max_header:
        return None, [
            BundleProblem(
                CHECK_HEADER_CAP, f"header length {header_len} exceeds the cap of {max_header} bytes", offset=8
            )
        ]
    if PREAMBLE_SIZE + header_len > file_size:
        return None, [
            BundleProblem(
                CHECK_HEADER_LENGTH,
                f"header length {header_len} runs past the end of the file ({file_size} bytes; header would end at "
                f"byte {PREAMBLE_SIZE + header_len})",
                offset=8,
            )
        ]
    raw = f.read(header_len)  # bounded by the cap and the real file size, checked above
    if len(raw) < header_len:
        return None, [BundleProblem(CHECK_TRUNCATED, "file ended inside the header", offset=PREAMBLE_SIZE + len(raw))]
    try:
        header = _parse_json_object(raw)
    except ValueError as exc:
        return None, [BundleProblem(CHECK_HEADER_JSON, f"header is not valid JSON: {exc}", offset=PREAMBLE_SIZE)]
    if not isinstance(header, dict):
        return None, [
            BundleProblem(
                CHECK_HEADER_OBJECT,
                f"header is a JSON {type(header).__name__}, expected an object",
                offset=PREAMBLE_SIZE,
            )
        ]

    payload_start = PREAMBLE_SIZE + header_len
    problems: list[BundleProblem] = []
    table = header.get("sections")
    if table is None:
        problems.append(BundleProblem(CHECK_FIELD_MISSING, "header has no 'sections' table"))
        return None, problems
    if not isinstance(table, dict):
        problems.append(BundleProblem(CHECK_FIELD_TYPE, f"'sections' is a {type(table).__name__}, expected an object"))
        return None, problems

    sections: list[Section] = []
    for name, entry in table.items():
        shown = _clip(name)
        why = _name_problem(name)
        if why:
            problems.append(
                BundleProblem(
                    CHECK_SECTION_NAME, f"section name {shown} {why}; names must not look like paths", section=name
                )
            )
        if not isinstance(entry, dict) or not _is_int(entry.get("offset")) or not _is_int(entry.get("size")):
            problems.append(
                BundleProblem(
                    CHECK_SECTIONS_TABLE, f'section {shown} must be {{"offset": int, "size": int}}', section=name
                )
            )
            continue
        offset, size = entry["offset"], entry["size"]
        if offset < 0 or size < 0:
            problems.append(
                BundleProblem(
                    CHECK_SECTION_BOUNDS, f"section {shown} has negative offset {offset} or size {size}", section=name
                )
            )
            continue
        start = payload_start + offset
        if start + size > file_size:
            problems.append(
                BundleProblem(
                    CHECK_SECTION_BOUNDS,
                    f"section {shown} (offset {offset}, size {size}) ends at byte {start + size}, past the end of the "
                    f"file ({file_size} bytes)",
                    offset=start,
                    section=name,
                )
            )
            continue
        sections.append(Section(name, offset, size, start))

    sections.sort(key=lambda s: (s.start, s.end))
    reach: Section | None = None  # the non-empty section seen so far that ends last
    for s in sections:
        if not s.size:
            continue  # zero-size sections occupy no bytes and overlap nothing
        if reach is not None and s.start < reach.end:
            problems.append(
                BundleProblem(
                    CHECK_SECTION_OVERLAP,
                    f"sections {_clip(reach.name)} [{reach.start}, {reach.end}) and {_clip(s.name)} [{s.start}, "
                    f"{s.end}) overlap",
                    offset=s.start,
                    section=s.name,
                )
            )
        if reach is None or s.end > reach.end:
            reach = s
    if problems:
        return None, problems
    return Bundle(path, header, {s.name: s for s in sections}, payload_start, file_size), []


def read_bundle(path: str | os.PathLike[str], *, max_header: int = MAX_HEADER) -> Bundle:
    """Parse and check the container; raise `BundleError` if its section table cannot be trusted."""
    p = Path(path)
    with _open_regular(p) as f:
        bundle, problems = _parse_container(p, f, os.fstat(f.fileno()).st_size, max_header)
    if bundle is None:
        raise BundleError(problems)
    return bundle
