"""The TensorRT Model Connect `.bundle` container: read, verify, write, promote, inspect.

Layout (little-endian)::

    0   8 bytes   magic  b"BUNDLE\\x01\\x00"
    8   u64       N = length of the JSON header in bytes (at most 100 MiB)
    16  N bytes   JSON header (UTF-8 object)
    16+N          payload: binary sections; header["sections"] = {name: {"offset", "size"}},
                  offsets counted from the payload start (the first byte after the header)

Native bundles carry no checksums, so trtls adds two records (gate 3, "bundle and manifest"):

* bundles trtls writes get a `trtls` object in the header: the sha256 of each section and the
  provenance (checkpoint revision, checkpoint files digest, build config hash, builder version);
* every promoted bundle (ours or foreign) gets a sidecar `<bundle>.trtls.json` with the whole-file
  sha256 and size and each section's sha256. The whole-file digest cannot live inside the file it hashes.

Required header fields (`REQUIRED_FIELDS`): `model_id`, `model_type`, `trt_version` (non-empty strings)
and `sections` (object). Optional fields are type-checked only when present; unknown fields are allowed
(the preview format will grow). `read_bundle` guarantees the container is safe to use (magic, header,
section table: every section inside the file, no overlaps, no path-like names); `verify_bundle` is the
full acceptance check (that, plus header fields and every recorded digest).

Hostile input is the normal case here: a malformed file yields `BundleProblem`s / a `BundleError`, never
another exception, never a read sized by an unchecked header value, never a path built from a section name.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
import struct
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO, Union

from trtls.core.atomic import atomic_write_text, atomic_writer

MAGIC = b"BUNDLE\x01\x00"
PREAMBLE_SIZE = len(MAGIC) + 8  # magic + u64 header length
MAX_HEADER = 100 * 1024 * 1024  # the format's own cap
MAX_SIDECAR = 100 * 1024 * 1024
SECTION_ALIGN = 64  # trtls aligns section starts so engines can be mapped/read without copying
CHUNK = 1024 * 1024  # streaming unit: hashing never holds more than this of a section in memory
SIDECAR_SUFFIX = ".trtls.json"
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

# Stable check ids (tests, the gate-3 report and docs/diagnostics.md key on these).
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

_HEX64 = re.compile(r"[0-9a-f]{64}")
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


@dataclass(frozen=True)
class BundleDigests:
    file_sha256: str
    size: int
    section_sha256: dict[str, str]
    sidecar: Path


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
    """Open for reading without blocking (a FIFO would hang a plain open) and only if it is a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise BundleError([BundleProblem(CHECK_IO, f"cannot open {path}: {exc.strerror or exc}")]) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise BundleError([BundleProblem(CHECK_IO, f"{path} is not a regular file")])
        f = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with f:
        yield f


def _iter_range(f: BinaryIO, start: int, size: int, chunk: int) -> Iterator[bytes]:
    f.seek(start)
    left = size
    while left > 0:
        part = f.read(min(chunk, left))
        if not part:  # the file shrank under us
            raise BundleError([BundleProblem(CHECK_TRUNCATED, "file ended inside a section", offset=start + size - left)])
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
        return json.loads(text, object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 at header byte {exc.start}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{exc.msg} at header byte {exc.pos}") from None


def _name_problem(name: str) -> str | None:
    """Why a section name could be mistaken for a path (None if it is a plain name)."""
    if name == "":
        return "is empty"
    if len(name) > MAX_SECTION_NAME:
        return f"is longer than {MAX_SECTION_NAME} characters"
    if "\x00" in name:
        return "contains NUL"
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


def _parse_container(path: Path, f: BinaryIO, file_size: int, max_header: int) -> tuple[Bundle | None, list[BundleProblem]]:
    """Check the container; return the Bundle only if its section table is safe to use."""
    if file_size < PREAMBLE_SIZE:
        return None, [BundleProblem(CHECK_TRUNCATED, f"file is {file_size} bytes; the preamble alone is {PREAMBLE_SIZE}", offset=file_size)]
    preamble = f.read(PREAMBLE_SIZE)
    if len(preamble) < PREAMBLE_SIZE:
        return None, [BundleProblem(CHECK_TRUNCATED, "file ended inside the preamble", offset=len(preamble))]
    if preamble[:8] != MAGIC:
        return None, [BundleProblem(CHECK_MAGIC, f"magic is {preamble[:8]!r}, expected {MAGIC!r}", offset=0)]
    (header_len,) = struct.unpack("<Q", preamble[8:])
    if header_len > max_header:
        return None, [BundleProblem(CHECK_HEADER_CAP, f"header length {header_len} exceeds the cap of {max_header} bytes", offset=8)]
    if PREAMBLE_SIZE + header_len > file_size:
        return None, [
            BundleProblem(
                CHECK_HEADER_LENGTH,
                f"header length {header_len} runs past the end of the file ({file_size} bytes; header would end at byte {PREAMBLE_SIZE + header_len})",
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
        return None, [BundleProblem(CHECK_HEADER_OBJECT, f"header is a JSON {type(header).__name__}, expected an object", offset=PREAMBLE_SIZE)]

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
            problems.append(BundleProblem(CHECK_SECTION_NAME, f"section name {shown} {why}; names must not look like paths", section=name))
        if not isinstance(entry, dict) or not _is_int(entry.get("offset")) or not _is_int(entry.get("size")):
            problems.append(BundleProblem(CHECK_SECTIONS_TABLE, f"section {shown} must be {{\"offset\": int, \"size\": int}}", section=name))
            continue
        offset, size = entry["offset"], entry["size"]
        if offset < 0 or size < 0:
            problems.append(BundleProblem(CHECK_SECTION_BOUNDS, f"section {shown} has negative offset {offset} or size {size}", section=name))
            continue
        start = payload_start + offset
        if start + size > file_size:
            problems.append(
                BundleProblem(
                    CHECK_SECTION_BOUNDS,
                    f"section {shown} (offset {offset}, size {size}) ends at byte {start + size}, past the end of the file ({file_size} bytes)",
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
                    f"sections {_clip(reach.name)} [{reach.start}, {reach.end}) and {_clip(s.name)} [{s.start}, {s.end}) overlap",
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


# ----------------------------------------------------------------------------------------- verification


def _field_problems(header: dict[str, Any]) -> list[BundleProblem]:
    problems = []
    for name, types in REQUIRED_FIELDS.items():
        if name == "sections":
            continue  # the container parse already judged the table
        if name not in header:
            problems.append(BundleProblem(CHECK_FIELD_MISSING, f"required header field '{name}' is missing"))
        elif not isinstance(header[name], types) or header[name] == "":
            problems.append(BundleProblem(CHECK_FIELD_TYPE, f"header field '{name}' must be a non-empty string, got {type(header[name]).__name__}"))
    for name, types in OPTIONAL_FIELDS.items():
        if name in header and (not isinstance(header[name], types) or isinstance(header[name], bool)):
            wanted = " or ".join("null" if t is type(None) else {"str": "string", "dict": "object", "int": "integer"}[t.__name__] for t in types)
            problems.append(BundleProblem(CHECK_FIELD_TYPE, f"header field '{name}' must be {wanted}, got {type(header[name]).__name__}"))
    return problems


def _digest_map(value: Any, where: str, check: str) -> tuple[dict[str, str], list[BundleProblem]]:
    if not isinstance(value, dict) or not all(isinstance(v, str) and _HEX64.fullmatch(v) for v in value.values()):
        return {}, [BundleProblem(check, f"{where} must map section names to lowercase hex sha256 digests")]
    return value, []


def _hash_pass(f: BinaryIO, file_size: int, sections: list[Section]) -> tuple[str, dict[str, str]]:
    """One sequential read: the whole-file sha256 and every section's, in bounded memory."""
    file_hash = hashlib.sha256()
    hashers = {s.name: hashlib.sha256() for s in sections}
    ordered = sorted(sections, key=lambda s: s.start)
    f.seek(0)
    pos = 0
    first_open = 0  # sections before this index end at or before `pos`
    while pos < file_size:
        block = f.read(min(CHUNK, file_size - pos))
        if not block:
            raise BundleError([BundleProblem(CHECK_TRUNCATED, "file shrank while it was being hashed", offset=pos)])
        file_hash.update(block)
        block_end = pos + len(block)
        i = first_open
        while i < len(ordered) and ordered[i].start < block_end:
            s = ordered[i]
            lo, hi = max(s.start, pos), min(s.end, block_end)
            if lo < hi:
                hashers[s.name].update(block[lo - pos : hi - pos])
            i += 1
        while first_open < len(ordered) and ordered[first_open].end <= block_end:
            first_open += 1
        pos = block_end
    return file_hash.hexdigest(), {name: h.hexdigest() for name, h in hashers.items()}


def _read_sidecar(path: Path) -> tuple[dict[str, Any] | None, list[BundleProblem]]:
    side = sidecar_path(path)
    if not side.exists():
        return None, []
    try:
        with _open_regular(side) as f:
            raw = f.read(MAX_SIDECAR + 1)
    except BundleError as exc:
        return None, [BundleProblem(CHECK_SIDECAR, f"sidecar {side.name}: {p.message}") for p in exc.problems]
    except OSError as exc:
        return None, [BundleProblem(CHECK_SIDECAR, f"cannot read sidecar {side.name}: {exc}")]
    if len(raw) > MAX_SIDECAR:
        return None, [BundleProblem(CHECK_SIDECAR, f"sidecar {side.name} is larger than {MAX_SIDECAR} bytes")]
    try:
        data = _parse_json_object(raw)
    except ValueError as exc:
        return None, [BundleProblem(CHECK_SIDECAR, f"sidecar {side.name} is not valid JSON: {exc}")]
    if not isinstance(data, dict) or data.get("format") != SIDECAR_FORMAT:
        return None, [BundleProblem(CHECK_SIDECAR, f"sidecar {side.name} is not a {SIDECAR_FORMAT} record")]
    if not isinstance(data.get("file_sha256"), str) or not _HEX64.fullmatch(data["file_sha256"]) or not _is_int(data.get("size")):
        return None, [BundleProblem(CHECK_SIDECAR, f"sidecar {side.name} lacks a valid file_sha256/size")]
    sections, problems = _digest_map(data.get("section_sha256"), f"sidecar {side.name} section_sha256", CHECK_SIDECAR)
    if problems:
        return None, problems
    return data, []


@dataclass
class _Verification:
    bundle: Bundle | None
    problems: list[BundleProblem]
    file_size: int | None = None
    file_sha256: str | None = None
    section_sha256: dict[str, str] = field(default_factory=dict)
    sidecar: dict[str, Any] | None = None


def _verify(path: Path, max_header: int, *, use_sidecar: bool = True) -> _Verification:
    try:
        with _open_regular(path) as f:
            size = os.fstat(f.fileno()).st_size
            bundle, problems = _parse_container(path, f, size, max_header)
            if bundle is None:
                return _Verification(None, problems, size)
            problems = _field_problems(bundle.header)
            file_sha, section_sha = _hash_pass(f, size, list(bundle.sections.values()))
    except BundleError as exc:
        return _Verification(None, exc.problems)
    except OSError as exc:  # an I/O error mid-read (device gone, permissions changed)
        return _Verification(None, [BundleProblem(CHECK_IO, f"cannot read {path}: {exc}")])
    result = _Verification(bundle, problems, size, file_sha, section_sha)

    block = bundle.header.get("trtls")
    if isinstance(block, dict):
        recorded, bad = _digest_map(block.get("section_sha256"), "header trtls.section_sha256", CHECK_TRTLS_BLOCK)
        problems += bad
        if not bad:
            problems += _compare_sections(recorded, section_sha, bundle, "the header's trtls record")

    sidecar, bad = _read_sidecar(path) if use_sidecar else (None, [])
    problems += bad
    result.sidecar = sidecar
    if sidecar is not None:
        if sidecar["size"] != size:
            problems.append(BundleProblem(CHECK_FILE_DIGEST, f"file is {size} bytes; the sidecar recorded {sidecar['size']}"))
        if sidecar["file_sha256"] != file_sha:
            problems.append(BundleProblem(CHECK_FILE_DIGEST, f"file sha256 {file_sha} differs from the sidecar's {sidecar['file_sha256']}"))
        problems += _compare_sections(sidecar["section_sha256"], section_sha, bundle, "the sidecar")
    return result


def _compare_sections(recorded: Mapping[str, str], actual: Mapping[str, str], bundle: Bundle, source: str) -> list[BundleProblem]:
    problems = []
    for name, digest in recorded.items():
        if name not in actual:
            problems.append(BundleProblem(CHECK_SECTION_DIGEST, f"{source} has a digest for section {_clip(name)}, which the bundle lacks", section=name))
        elif actual[name] != digest:
            s = bundle.sections[name]
            problems.append(
                BundleProblem(
                    CHECK_SECTION_DIGEST,
                    f"section {_clip(name)} sha256 {actual[name]} differs from {source}'s {digest}",
                    offset=s.start,
                    section=name,
                )
            )
    for name in actual:
        if name not in recorded:
            problems.append(BundleProblem(CHECK_SECTION_DIGEST, f"section {_clip(name)} has no digest in {source}", section=name))
    return problems


def verify_bundle(path: str | os.PathLike[str], *, max_header: int = MAX_HEADER) -> list[BundleProblem]:
    """Every problem found (empty = the bundle passes gate 3's container check). Never raises for bad input."""
    return _verify(Path(path), max_header).problems


# ---------------------------------------------------------------------------------------------- writing

SectionSource = Union[bytes, bytearray, memoryview, "os.PathLike[str]", Iterable[bytes]]


@dataclass
class _Staged:
    """One section ready to write: its size and sha256 are known before the header is written."""

    name: str
    size: int
    sha256: str
    data: bytes | memoryview | None = None  # in-memory content, or
    file: Path | BinaryIO | None = None  # content streamed from a file (a caller's, or our spool)


def _stage(name: str, source: Any, spool_dir: Path, stack: contextlib.ExitStack) -> _Staged:
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = memoryview(source).cast("B")
        return _Staged(name, data.nbytes, hashlib.sha256(data).hexdigest(), data=data)
    if isinstance(source, os.PathLike):
        h, size = hashlib.sha256(), 0
        with open(source, "rb") as f:
            while part := f.read(CHUNK):
                h.update(part)
                size += len(part)
        return _Staged(name, size, h.hexdigest(), file=Path(source))
    if isinstance(source, Iterable) and not isinstance(source, (str, Mapping)):
        # Unknown length: spool to an anonymous file beside the target (same filesystem, no name to leak).
        spool = stack.enter_context(tempfile.TemporaryFile(dir=spool_dir))
        h, size = hashlib.sha256(), 0
        for part in source:
            h.update(part)
            spool.write(part)
            size += len(part)
        return _Staged(name, size, h.hexdigest(), file=spool)
    raise TypeError(f"section {name!r}: expected bytes, a path or an iterable of bytes, got {type(source).__name__}")


def _copy_staged(staged: _Staged, out: BinaryIO, file_hash: Any) -> None:
    if staged.data is not None:
        out.write(staged.data)
        file_hash.update(staged.data)
        return
    check = hashlib.sha256()
    with contextlib.ExitStack() as stack:
        src = staged.file
        if isinstance(src, Path):
            src = stack.enter_context(open(src, "rb"))
        else:
            src.seek(0)
        left = staged.size
        while left > 0:
            part = src.read(min(CHUNK, left))
            if not part:
                break
            out.write(part)
            file_hash.update(part)
            check.update(part)
            left -= len(part)
    # A source file that changed between hashing and copying would make the recorded digest a lie.
    if left or check.hexdigest() != staged.sha256:
        raise BundleError([BundleProblem(CHECK_SECTION_DIGEST, f"section {_clip(staged.name)} changed while the bundle was being written", section=staged.name)])


def _check_writable_header(header: Mapping[str, Any], names: Iterable[str]) -> None:
    problems = []
    for owned in ("sections", "trtls"):
        if owned in header:
            problems.append(BundleProblem(CHECK_HEADER_OBJECT, f"header must not set '{owned}': write_bundle fills it in"))
    probe = dict(header, sections={})
    problems += _field_problems(probe)
    for name in names:
        if not isinstance(name, str):
            problems.append(BundleProblem(CHECK_SECTION_NAME, f"section name {name!r} is not a string"))
        elif why := _name_problem(name):
            problems.append(BundleProblem(CHECK_SECTION_NAME, f"section name {_clip(name)} {why}", section=name))
    if problems:
        raise BundleError(problems)


def write_bundle(
    path: str | os.PathLike[str],
    header: Mapping[str, Any],
    sections: Mapping[str, SectionSource],
    *,
    provenance: Mapping[str, Any] | None = None,
) -> BundleDigests:
    """Write a bundle atomically, then its sidecar; return the digests recorded.

    `sections` values may be bytes, a path (streamed, never loaded whole) or an iterable of byte chunks.
    `provenance` is stored under header["trtls"]["provenance"]; suggested keys: checkpoint_id,
    checkpoint_revision, checkpoint_files_sha256, build_config_hash, builder, builder_version.
    The header gets no timestamp from here, so the same inputs give a byte-identical bundle.
    If anything fails, the previous file at `path` (if any) is left untouched and no temp file remains.
    """
    target = Path(path)
    _check_writable_header(header, sections.keys())
    with contextlib.ExitStack() as stack:
        staged = [_stage(name, source, target.parent, stack) for name, source in sections.items()]

        table: dict[str, dict[str, int]] = {}
        cursor = 0
        for s in staged:
            cursor += -cursor % SECTION_ALIGN
            table[s.name] = {"offset": cursor, "size": s.size}
            cursor += s.size
        section_sha = {s.name: s.sha256 for s in staged}
        full_header = dict(header)
        full_header["sections"] = table
        full_header["trtls"] = {
            "format": TRTLS_BLOCK_FORMAT,
            "section_sha256": section_sha,
            "provenance": dict(provenance) if provenance is not None else None,
        }
        try:
            header_bytes = json.dumps(full_header, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise BundleError([BundleProblem(CHECK_HEADER_JSON, f"header or provenance is not JSON-serializable: {exc}")]) from None
        if len(header_bytes) > MAX_HEADER:
            raise BundleError([BundleProblem(CHECK_HEADER_CAP, f"header would be {len(header_bytes)} bytes, over the {MAX_HEADER}-byte cap")])

        file_hash = hashlib.sha256()
        written = 0
        with atomic_writer(target) as out:
            for part in (MAGIC, struct.pack("<Q", len(header_bytes)), header_bytes):
                out.write(part)
                file_hash.update(part)
                written += len(part)
            payload_pos = 0
            for s in staged:
                pad = table[s.name]["offset"] - payload_pos
                out.write(b"\x00" * pad)
                file_hash.update(b"\x00" * pad)
                _copy_staged(s, out, file_hash)
                payload_pos = table[s.name]["offset"] + s.size
            written += payload_pos

    digests = BundleDigests(file_hash.hexdigest(), written, section_sha, sidecar_path(target))
    _write_sidecar(target, digests, origin="trtls", provenance=full_header["trtls"]["provenance"])
    return digests


def _write_sidecar(target: Path, digests: BundleDigests, *, origin: str, provenance: Any) -> dict[str, Any]:
    record = {
        "format": SIDECAR_FORMAT,
        "bundle": target.name,  # for people reading the file; the sidecar is found by its own name
        "origin": origin,  # "trtls" (we wrote it) or "foreign" (promoted as found)
        "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "size": digests.size,
        "file_sha256": digests.file_sha256,
        "section_sha256": digests.section_sha256,
        "provenance": provenance,
    }
    atomic_write_text(digests.sidecar, json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    return record


def promote_foreign(path: str | os.PathLike[str], *, replace: bool = False) -> dict[str, Any]:
    """Record the digests of a bundle trtls did not write (native `trtmc build` output) in its sidecar.

    Refuses (BundleError) a bundle that fails verification. An existing sidecar that disagrees with the
    file is itself a verification failure, so re-promoting a changed bundle needs `replace=True`.
    Returns the sidecar record written.
    """
    target = Path(path)
    result = _verify(target, MAX_HEADER, use_sidecar=not replace)
    problems = result.problems
    if problems or result.bundle is None or result.file_sha256 is None or result.file_size is None:
        raise BundleError(problems or [BundleProblem(CHECK_IO, f"cannot verify {target}")])
    origin = "trtls" if isinstance(result.bundle.header.get("trtls"), dict) else "foreign"
    provenance = result.bundle.header["trtls"].get("provenance") if origin == "trtls" else None
    digests = BundleDigests(result.file_sha256, result.file_size, result.section_sha256, sidecar_path(target))
    return _write_sidecar(target, digests, origin=origin, provenance=provenance)


# --------------------------------------------------------------------------------------------- inspect


def inspect_json(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Everything `trtls bundle inspect --json` shows; never raises for bad input (problems say why)."""
    p = Path(path)
    result = _verify(p, MAX_HEADER)
    out: dict[str, Any] = {
        "path": str(p),
        "size": result.file_size,
        "file_sha256": result.file_sha256,
        "ok": not result.problems,
        "problems": [asdict(pr) for pr in result.problems],
        "header": None,
        "sections": [],
        "trtls": None,
        "sidecar": result.sidecar,
    }
    if result.bundle is None:
        return out
    header = dict(result.bundle.header)
    header.pop("sections", None)
    out["trtls"] = header.pop("trtls", None)
    out["header"] = header
    out["payload_start"] = result.bundle.payload_start
    out["sections"] = [
        {"name": s.name, "offset": s.offset, "size": s.size, "start": s.start, "sha256": result.section_sha256.get(s.name)}
        for s in result.bundle.sections.values()
    ]
    return out


def _is_bidi_control(code: int) -> bool:
    return 0x202A <= code <= 0x202E or 0x2066 <= code <= 0x2069 or code in (0x200E, 0x200F, 0x061C)


def _terminal_safe(text: str) -> str:
    """Escape what a header could use to forge terminal output (control characters, ANSI escapes,
    bidi overrides) or to crash printing (lone surrogates); newlines we put in stay."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch == "\n" or (code >= 0x20 and code != 0x7F and not 0x80 <= code < 0xA0 and not 0xD800 <= code <= 0xDFFF and not _is_bidi_control(code)):
            out.append(ch)
        else:
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
    return "".join(out)


def inspect_text(path: str | os.PathLike[str]) -> str:
    """Human-readable report: header fields, sections, digests, provenance, verification verdict."""
    info = inspect_json(path)
    lines = [f"bundle   {info['path']}"]
    if info["size"] is not None:
        lines.append(f"size     {info['size']} bytes")
    if info["file_sha256"]:
        lines.append(f"sha256   {info['file_sha256']}")
    if info["header"] is not None:
        lines.append("header")
        for key, value in info["header"].items():
            lines.append(f"  {key:<17} {json.dumps(value, ensure_ascii=False)}")
        lines.append(f"sections (payload starts at byte {info['payload_start']})")
        if not info["sections"]:
            lines.append("  (none)")
        width = max((len(s["name"]) for s in info["sections"]), default=0)
        for s in info["sections"]:
            lines.append(f"  {s['name']:<{width}}  offset {s['offset']:>12}  size {s['size']:>12}  sha256 {s['sha256']}")
    trtls_block = info["trtls"]
    if isinstance(trtls_block, dict):
        lines.append("provenance (header trtls record)")
        prov = trtls_block.get("provenance")
        if isinstance(prov, dict) and prov:
            lines += [f"  {k:<24} {json.dumps(v, ensure_ascii=False)}" for k, v in prov.items()]
        else:
            lines.append("  (none recorded)")
    else:
        lines.append("provenance: none in the header (not written by trtls)")
    side = info["sidecar"]
    if side:
        lines.append(f"sidecar  {Path(info['path']).name}{SIDECAR_SUFFIX}: origin {json.dumps(side.get('origin'))}, recorded {json.dumps(side.get('recorded_at'))}")
    else:
        lines.append("sidecar  none (digests not recorded; run promotion to record them)")
    if info["ok"]:
        lines.append("verify   OK")
    else:
        lines.append(f"verify   FAILED ({len(info['problems'])} problem(s))")
        lines += [f"  {BundleProblem(**pr)}" for pr in info["problems"]]
    return _terminal_safe("\n".join(lines) + "\n")
