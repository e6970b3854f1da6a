"""Writing bundles: staged sections, the atomic write, the sidecar, and promotion of foreign bundles.

`write_bundle` gives a bundle its header `trtls` record and a sidecar; `promote_foreign` records the
digests of a bundle trtls did not write, after verifying it. Both replace files only atomically (the
previous file stays whole if anything fails). Separate from reading and verification because only this
module creates files.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, Union

from trtls.bundle.format import (
    CHECK_HEADER_CAP,
    CHECK_HEADER_JSON,
    CHECK_HEADER_OBJECT,
    CHECK_IO,
    CHECK_SECTION_DIGEST,
    CHECK_SECTION_NAME,
    CHUNK,
    MAGIC,
    MAX_HEADER,
    SECTION_ALIGN,
    SIDECAR_FORMAT,
    TRTLS_BLOCK_FORMAT,
    BundleError,
    BundleProblem,
    _clip,
    _name_problem,
    sidecar_path,
)
from trtls.bundle.verify import _field_problems, _verify
from trtls.core.paths import real
from trtls.fs import Kind, atomic_write_text, atomic_writer, open_regular
from trtls.fs.capture import spool_file


@dataclass(frozen=True)
class BundleDigests:
    file_sha256: str
    size: int
    section_sha256: dict[str, str]
    sidecar: Path


SectionSource = Union[bytes, bytearray, memoryview, "os.PathLike[str]", Iterable[bytes]]


@dataclass
class _Staged:
    """One section ready to write: its size and sha256 are known before the header is written."""

    name: str
    size: int
    sha256: str
    data: bytes | memoryview | None = None  # in-memory content, or
    file: Path | BinaryIO | None = None  # content streamed from a file (a caller's, or our spool)


def _stage(
    name: str, source: Any, spool_dir: Path, within: Path, stack: contextlib.ExitStack, stop: Callable[[], None]
) -> _Staged:
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = memoryview(source).cast("B")
        return _Staged(name, data.nbytes, hashlib.sha256(data).hexdigest(), data=data)
    if isinstance(source, os.PathLike):
        h, size = hashlib.sha256(), 0
        with open_regular(source, limit=None, follow=True) as f:  # a model the caller names: a regular file only
            while part := f.read(CHUNK):
                stop()
                h.update(part)
                size += len(part)
        return _Staged(name, size, h.hexdigest(), file=Path(source))
    if isinstance(source, Iterable) and not isinstance(source, (str, Mapping)):
        # Unknown length: spool to an anonymous file beside the target (same filesystem, no name to leak).
        spool = stack.enter_context(spool_file(spool_dir, within=within))
        h, size = hashlib.sha256(), 0
        for part in source:
            stop()
            h.update(part)
            spool.write(part)
            size += len(part)
        return _Staged(name, size, h.hexdigest(), file=spool)
    raise TypeError(f"section {name!r}: expected bytes, a path or an iterable of bytes, got {type(source).__name__}")


def _copy_staged(staged: _Staged, out: BinaryIO, file_hash: Any, stop: Callable[[], None]) -> None:
    if staged.data is not None:
        out.write(staged.data)
        file_hash.update(staged.data)
        return
    check = hashlib.sha256()
    with contextlib.ExitStack() as stack:
        if staged.file is None:
            raise ValueError(f"section {staged.name!r} has neither bytes nor a file")
        src: BinaryIO
        if isinstance(staged.file, Path):
            src = stack.enter_context(open_regular(staged.file, limit=None, follow=True))
        else:
            src = staged.file
            src.seek(0)
        left = staged.size
        while left > 0:
            stop()
            part = src.read(min(CHUNK, left))
            if not part:
                break
            out.write(part)
            file_hash.update(part)
            check.update(part)
            left -= len(part)
    # A source file that changed between hashing and copying would make the recorded digest a lie.
    if left or check.hexdigest() != staged.sha256:
        raise BundleError(
            [
                BundleProblem(
                    CHECK_SECTION_DIGEST,
                    f"section {_clip(staged.name)} changed while the bundle was being written",
                    section=staged.name,
                )
            ]
        )


def _check_writable_header(header: Mapping[str, Any], names: Iterable[str]) -> None:
    problems = []
    for owned in ("sections", "trtls"):
        if owned in header:
            problems.append(
                BundleProblem(CHECK_HEADER_OBJECT, f"header must not set '{owned}': write_bundle fills it in")
            )
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
    within: str | os.PathLike[str] | None = None,
    stop: Callable[[], None] = lambda: None,
) -> BundleDigests:
    """Write a bundle atomically, then its sidecar; return the digests recorded.

    `within`: the folder the bundle, its sidecar and the spool must stay in (a route build passes the folder the
    path policy judged for its bundle); None: the bundle's own real folder, judged now. Written through the door
    (`trtls.fs`): never through a symlink, inside `within` at the moment of the write.

    `sections` values may be bytes, a path (streamed, never loaded whole) or an iterable of byte chunks.
    `provenance` is stored under header["trtls"]["provenance"]; suggested keys: checkpoint_id,
    checkpoint_revision, checkpoint_files_sha256, build_config_hash, builder, builder_version.
    The header gets no timestamp from here, so the same inputs give a byte-identical bundle.
    If anything fails, the previous file at `path` (if any) is left untouched and no temp file remains.
    `stop()` is called between chunks and once more before the rename: what it raises stops the write so (a route
    build's stop: no bundle, never a partial one).
    """
    target = Path(path)
    root = Path(within) if within is not None else real(target.parent)
    _check_writable_header(header, sections.keys())
    with contextlib.ExitStack() as stack:
        staged = [_stage(name, source, target.parent, root, stack, stop) for name, source in sections.items()]

        table: dict[str, dict[str, int]] = {}
        cursor = 0
        for s in staged:
            cursor += -cursor % SECTION_ALIGN
            table[s.name] = {"offset": cursor, "size": s.size}
            cursor += s.size
        section_sha = {s.name: s.sha256 for s in staged}
        # Every top-level field before any nested object, and trtls's own record last: TRTMC's header reader takes
        # the first occurrence of a key anywhere in the JSON (trtls.bundle.trtmc, gate 3's TRT711), so a top-level
        # field written after a nested copy would be read from the copy.
        full_header = {k: v for k, v in header.items() if not isinstance(v, (dict, list))}
        full_header.update((k, v) for k, v in header.items() if isinstance(v, (dict, list)))
        full_header["sections"] = table
        full_header["trtls"] = {
            "format": TRTLS_BLOCK_FORMAT,
            "section_sha256": section_sha,
            "provenance": dict(provenance) if provenance is not None else None,
        }
        try:
            header_bytes = json.dumps(full_header, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode(
                "utf-8"
            )
        except (TypeError, ValueError) as exc:
            raise BundleError(
                [BundleProblem(CHECK_HEADER_JSON, f"header or provenance is not JSON-serializable: {exc}")]
            ) from None
        if len(header_bytes) > MAX_HEADER:
            raise BundleError(
                [
                    BundleProblem(
                        CHECK_HEADER_CAP, f"header would be {len(header_bytes)} bytes, over the {MAX_HEADER}-byte cap"
                    )
                ]
            )

        file_hash = hashlib.sha256()
        written = 0
        with atomic_writer(target, kind=Kind.route_artefact, within=root) as out:
            for part in (MAGIC, struct.pack("<Q", len(header_bytes)), header_bytes):
                out.write(part)
                file_hash.update(part)
                written += len(part)
            payload_pos = 0
            for s in staged:
                pad = table[s.name]["offset"] - payload_pos
                out.write(b"\x00" * pad)
                file_hash.update(b"\x00" * pad)
                _copy_staged(s, out, file_hash, stop)
                payload_pos = table[s.name]["offset"] + s.size
            stop()  # the last moment a stop leaves no bundle: the rename follows
            written += payload_pos

    digests = BundleDigests(file_hash.hexdigest(), written, section_sha, sidecar_path(target))
    _write_sidecar(target, digests, root, origin="trtls", provenance=full_header["trtls"]["provenance"])
    return digests


def _write_sidecar(
    target: Path, digests: BundleDigests, within: Path, *, origin: str, provenance: Any
) -> dict[str, Any]:
    record = {
        "format": SIDECAR_FORMAT,
        "bundle": target.name,  # for people reading the file; the sidecar is found by its own name
        "origin": origin,  # "trtls" (we wrote it) or "foreign" (promoted as found)
        "recorded_at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "size": digests.size,
        "file_sha256": digests.file_sha256,
        "section_sha256": digests.section_sha256,
        "provenance": provenance,
    }
    text = json.dumps(record, indent=2, ensure_ascii=False) + "\n"
    atomic_write_text(digests.sidecar, text, kind=Kind.route_artefact, within=within)
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
    return _write_sidecar(target, digests, real(target.parent), origin=origin, provenance=provenance)
