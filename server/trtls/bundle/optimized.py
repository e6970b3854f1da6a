"""A TensorRT Model Connect *optimized* bundle's descriptor, `optimized_runtime.json`, checked as TRTMC's host checks
it, and its artifact-tree digest recomputed (re-stated from TRTMC's documented format, not its code).

The descriptor has exactly `DESCRIPTOR_KEYS` (its `runtime` exactly `RUNTIME_KEYS`, its `artifact` exactly
`ARTIFACT_KEYS`), `schema_version` 2, `factory_abi` 1 and the header's `model_id`. `artifact.tree_sha256` is the
sha256 over the artifact tree: for each directory in sorted order `"directory\\0" + path + "\\0"`, then for each file
(a section named `optimized_runtime_artifacts/<path>`) in sorted path order
`"file\\0" + path + "\\0" + decimal size + "\\0"` and the file's raw 32-byte sha256. `optimized_problems` recomputes
it from the section digests of verification's one read, so a changed artifact, one added or one removed fails
verification.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from trtls.bundle.format import OPTIMIZED_PREFIX, Bundle, BundleProblem, _clip, _is_int, _parse_json_object

CHECK_OPTIMIZED = "bundle.optimized_runtime"  # optimized_runtime.json unsound or its tree digest differs

DESCRIPTOR_SECTION = "optimized_runtime.json"
DESCRIPTOR_SCHEMA_VERSION = 2
FACTORY_ABI = 1
DESCRIPTOR_KEYS = frozenset(
    {
        "schema_version",
        "implementation_id",
        "model_id",
        "profile_id",
        "runtime_library",
        "factory_abi",
        "implementation_metadata_section",
        "runtime",
        "artifact",
    }
)
RUNTIME_KEYS = frozenset({"name", "version", "commit"})
ARTIFACT_KEYS = frozenset({"section_prefix", "directories", "file_count", "total_size", "tree_sha256"})
MAX_DESCRIPTOR = 16 * 1024 * 1024


def artifact_tree_sha256(directories: list[str], files: Mapping[str, tuple[int, bytes]]) -> str:
    """The artifact-tree digest; `files` maps relative path → (size, raw 32-byte sha256)."""
    h = hashlib.sha256()
    for d in sorted(directories, key=lambda s: s.encode("utf-8")):
        h.update(b"directory\0" + d.encode("utf-8") + b"\0")
    for rel in sorted(files, key=lambda s: s.encode("utf-8")):
        size, digest = files[rel]
        h.update(b"file\0" + rel.encode("utf-8") + b"\0" + str(size).encode("ascii") + b"\0" + digest)
    return h.hexdigest()


def _key_set_problem(obj: Any, wanted: frozenset[str], where: str) -> str | None:
    if not isinstance(obj, dict):
        return f"{where} is not an object"
    extra, missing = sorted(set(obj) - wanted), sorted(wanted - set(obj))
    if not extra and not missing:
        return None
    parts = ([f"unexpected {', '.join(map(_clip, extra))}"] if extra else []) + (
        [f"missing {', '.join(missing)}"] if missing else []
    )
    return f"{where} must have exactly the keys {', '.join(sorted(wanted))}: " + "; ".join(parts)


def _descriptor_problems(desc: dict[str, Any], bundle: Bundle, section_sha256: Mapping[str, str]) -> list[str]:
    problems: list[str] = []
    if not _is_int(desc["schema_version"]) or desc["schema_version"] != DESCRIPTOR_SCHEMA_VERSION:
        problems.append(f"schema_version is {desc['schema_version']!r}, expected {DESCRIPTOR_SCHEMA_VERSION}")
    if not _is_int(desc["factory_abi"]) or desc["factory_abi"] != FACTORY_ABI:
        problems.append(f"factory_abi is {desc['factory_abi']!r}, expected {FACTORY_ABI}")
    if desc["model_id"] != bundle.header.get("model_id"):
        problems.append(
            f"model_id {_clip(str(desc['model_id']))} differs from the header's "
            f"{_clip(str(bundle.header.get('model_id')))}"
        )
    art = desc["artifact"]
    if art["section_prefix"] != OPTIMIZED_PREFIX.rstrip("/"):
        return problems + [
            f"artifact.section_prefix is {_clip(str(art['section_prefix']))}, expected {OPTIMIZED_PREFIX.rstrip('/')!r}"
        ]
    dirs = art["directories"]
    if not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs):
        return problems + ["artifact.directories must be a list of strings"]
    files = {
        name[len(OPTIMIZED_PREFIX) :]: (s.size, bytes.fromhex(section_sha256[name]))
        for name, s in bundle.sections.items()
        if name.startswith(OPTIMIZED_PREFIX)
    }
    total = sum(size for size, _ in files.values())
    if art["file_count"] != len(files) or art["total_size"] != total:
        problems.append(
            f"artifact records {art['file_count']!r} files of {art['total_size']!r} bytes; the bundle has {len(files)} "
            f"sections under {OPTIMIZED_PREFIX} of {total} bytes"
        )
    actual = artifact_tree_sha256(dirs, files)
    if art["tree_sha256"] != actual:
        problems.append(
            f"artifact.tree_sha256 {_clip(str(art['tree_sha256']), 64)} differs from the recomputed {actual}"
        )
    return problems


def optimized_problems(bundle: Bundle, section_sha256: Mapping[str, str]) -> list[BundleProblem]:
    """Every problem of an optimized bundle's descriptor and artifact tree; empty for a native bundle (no
    `optimized_runtime.json`). `section_sha256` is each section's hex sha256 (verification's one read)."""
    section = bundle.sections.get(DESCRIPTOR_SECTION)
    if section is None:
        return []

    def bad(message: str) -> list[BundleProblem]:
        return [BundleProblem(CHECK_OPTIMIZED, message, offset=section.start, section=DESCRIPTOR_SECTION)]

    if section.size > MAX_DESCRIPTOR:
        return bad(f"{DESCRIPTOR_SECTION} is {section.size} bytes, over {MAX_DESCRIPTOR}")
    try:
        desc = _parse_json_object(bundle.read_section(DESCRIPTOR_SECTION))
    except ValueError as exc:
        return bad(f"{DESCRIPTOR_SECTION} is not valid JSON: {exc}")
    why = _key_set_problem(desc, DESCRIPTOR_KEYS, DESCRIPTOR_SECTION)
    if why is None:
        why = _key_set_problem(desc["runtime"], RUNTIME_KEYS, f"{DESCRIPTOR_SECTION} runtime")
    if why is None:
        why = _key_set_problem(desc["artifact"], ARTIFACT_KEYS, f"{DESCRIPTOR_SECTION} artifact")
    if why is not None:
        return bad(why)
    problems = _descriptor_problems(desc, bundle, section_sha256)
    return bad(f"{DESCRIPTOR_SECTION}: " + "; ".join(problems)) if problems else []
