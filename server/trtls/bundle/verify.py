"""Bundle verification: header fields, one-pass digests, the sidecar, `verify_bundle`.

Native bundles carry no checksums, so trtls keeps two records (gate 3, "bundle and manifest"):

* bundles trtls writes get a `trtls` object in the header: the sha256 of each section and the
  provenance (checkpoint revision, checkpoint files digest, build config hash, builder version);
* every promoted bundle (ours or foreign) gets a sidecar `<bundle>.trtls.json` with the whole-file
  sha256 and size and each section's sha256. The whole-file digest cannot live inside the file it hashes.

`verify_bundle` is the full acceptance check: the container (`bundle_format.read_bundle`'s checks), the
header fields, and every recorded digest against one sequential read of the file. Separate from the
format because it is the only reader that hashes, and from writing because promotion and inspection
reuse `_verify`'s whole result (digests, sidecar), not just its verdict.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from trtls.bundle.format import (
    CHECK_FIELD_MISSING,
    CHECK_FIELD_TYPE,
    CHECK_FILE_DIGEST,
    CHECK_IO,
    CHECK_SECTION_DIGEST,
    CHECK_SIDECAR,
    CHECK_TRTLS_BLOCK,
    CHECK_TRUNCATED,
    CHUNK,
    MAX_HEADER,
    MAX_SIDECAR,
    OPTIONAL_FIELDS,
    REQUIRED_FIELDS,
    SIDECAR_FORMAT,
    Bundle,
    BundleError,
    BundleProblem,
    Section,
    _clip,
    _is_int,
    _open_regular,
    _parse_container,
    _parse_json_object,
    sidecar_path,
)
from trtls.bundle.optimized import optimized_problems

_HEX64 = re.compile(r"[0-9a-f]{64}")


def _optimized_version_ok(header: dict[str, Any], name: str) -> bool:
    """TRTMC's optimized bundles record `trt_version: ""` (their artifacts carry their own versions)."""
    from trtls.bundle.format import OPTIMIZED_PREFIX

    sections = header.get("sections")
    return (
        name == "trt_version"
        and isinstance(sections, dict)
        and any(str(k).startswith(OPTIMIZED_PREFIX) for k in sections)
    )


def _field_problems(header: dict[str, Any]) -> list[BundleProblem]:
    problems = []
    for name, types in REQUIRED_FIELDS.items():
        if name == "sections":
            continue  # the container parse already judged the table
        if name not in header:
            problems.append(BundleProblem(CHECK_FIELD_MISSING, f"required header field '{name}' is missing"))
        elif not isinstance(header[name], types) or (header[name] == "" and not _optimized_version_ok(header, name)):
            problems.append(
                BundleProblem(
                    CHECK_FIELD_TYPE,
                    f"header field '{name}' must be a non-empty string, got {type(header[name]).__name__}",
                )
            )
    for name, types in OPTIONAL_FIELDS.items():
        if name in header and (not isinstance(header[name], types) or isinstance(header[name], bool)):
            wanted = " or ".join(
                "null" if t is type(None) else {"str": "string", "dict": "object", "int": "integer"}[t.__name__]
                for t in types
            )
            problems.append(
                BundleProblem(
                    CHECK_FIELD_TYPE, f"header field '{name}' must be {wanted}, got {type(header[name]).__name__}"
                )
            )
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
    if (
        not isinstance(data.get("file_sha256"), str)
        or not _HEX64.fullmatch(data["file_sha256"])
        or not _is_int(data.get("size"))
    ):
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
    # A TRTMC optimized bundle's descriptor and its recomputed artifact-tree digest (trtls.bundle.optimized).
    try:
        problems += optimized_problems(bundle, section_sha)
    except BundleError as exc:
        problems += exc.problems
    except OSError as exc:
        problems.append(BundleProblem(CHECK_IO, f"cannot read {path}: {exc}"))

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
            problems.append(
                BundleProblem(CHECK_FILE_DIGEST, f"file is {size} bytes; the sidecar recorded {sidecar['size']}")
            )
        if sidecar["file_sha256"] != file_sha:
            problems.append(
                BundleProblem(
                    CHECK_FILE_DIGEST, f"file sha256 {file_sha} differs from the sidecar's {sidecar['file_sha256']}"
                )
            )
        problems += _compare_sections(sidecar["section_sha256"], section_sha, bundle, "the sidecar")
    return result


def _compare_sections(
    recorded: Mapping[str, str], actual: Mapping[str, str], bundle: Bundle, source: str
) -> list[BundleProblem]:
    problems = []
    for name, digest in recorded.items():
        if name not in actual:
            problems.append(
                BundleProblem(
                    CHECK_SECTION_DIGEST,
                    f"{source} has a digest for section {_clip(name)}, which the bundle lacks",
                    section=name,
                )
            )
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
            problems.append(
                BundleProblem(CHECK_SECTION_DIGEST, f"section {_clip(name)} has no digest in {source}", section=name)
            )
    return problems


def verify_bundle(path: str | os.PathLike[str], *, max_header: int = MAX_HEADER) -> list[BundleProblem]:
    """Every problem found (empty = the bundle passes gate 3's container check). Never raises for bad input."""
    return _verify(Path(path), max_header).problems
