"""Real TensorRT Model Connect bundles (issue 20, section 5): optimized bundles' descriptor and artifact tree, the build
receipt beside a native bundle, and trtls's own header order.

The containers are written by this file's own TRTMC writer, re-implemented from TRTMC's documented format (magic,
u64 header length, JSON header whose `sections` offsets count from the payload start; an optimized bundle's
`optimized_runtime.json` and its artifact-tree digest), never a copy of TRTMC's code.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
from pathlib import Path

import pytest
from test_gate3 import built, gate3, root  # noqa: F401  (fixtures: one real route build for the module)
from test_route_build import COMMIT

from trtls.bundle import CHECK_SECTION_NAME, read_bundle, sidecar_path, verify_bundle, write_bundle
from trtls.bundle.optimized import CHECK_OPTIMIZED
from trtls.bundle.receipt import receipt_path
from trtls.gates.bundle.receipt_check import check_receipt

TRTMC_MAGIC = b"BUNDLE\x01\x00"
PREFIX = "optimized_runtime_artifacts"


def trtmc_container(header: dict, sections: list[tuple[str, bytes]]) -> bytes:
    """A bundle as TRTMC writes one: sections back to back after the header, offsets from the payload start."""
    table, payload = {}, b""
    for name, data in sections:
        table[name] = {"offset": len(payload), "size": len(data)}
        payload += data
    body = json.dumps({**header, "sections": table}, separators=(",", ":")).encode()
    return TRTMC_MAGIC + struct.pack("<Q", len(body)) + body + payload


def tree_digest(directories: list[str], files: dict[str, bytes]) -> str:
    """TRTMC's artifact-tree digest, from its documented rule (directories, then files, each in sorted order)."""
    h = hashlib.sha256()
    for d in sorted(directories):
        h.update(b"directory\0" + d.encode() + b"\0")
    for rel in sorted(files):
        h.update(b"file\0" + rel.encode() + b"\0" + str(len(files[rel])).encode() + b"\0")
        h.update(hashlib.sha256(files[rel]).digest())
    return h.hexdigest()


ARTIFACTS = {"libimpl.so": b"\x7fELF" + b"I" * 300, "weights/rank0.bin": b"W" * 1000, "weights/meta.json": b"{}"}


def descriptor(files: dict[str, bytes] = ARTIFACTS, dirs: tuple[str, ...] = ("weights",), **over) -> dict:
    d = {
        "schema_version": 2,
        "implementation_id": "acme-llm",
        "model_id": "Qwen/Qwen2.5-0.5B",
        "profile_id": "sm89-fp8",
        "runtime_library": "libimpl.so",
        "factory_abi": 1,
        "implementation_metadata_section": "implementation.json",
        "runtime": {"name": "acme", "version": "1.0", "commit": "c" * 40},
        "artifact": {
            "section_prefix": PREFIX,
            "directories": list(dirs),
            "file_count": len(files),
            "total_size": sum(len(v) for v in files.values()),
            "tree_sha256": tree_digest(list(dirs), files),
        },
    }
    d.update(over)
    return d


def optimized_bundle(path: Path, desc: dict | None = None, files: dict[str, bytes] = ARTIFACTS) -> Path:
    header = {
        "model_id": "Qwen/Qwen2.5-0.5B",
        "model_type": "optimized_runtime",
        "family": "optimized_runtime",
        "precision": "",
        "trt_version": "",
        "runtime_strategy": "",
    }
    sections = [
        ("optimized_runtime.json", json.dumps(desc or descriptor(), sort_keys=True).encode()),
        ("implementation.json", b'{"profile":"sm89-fp8"}'),
        *[(f"{PREFIX}/{rel}", data) for rel, data in sorted(files.items())],
    ]
    path.write_bytes(trtmc_container(header, sections))
    return path


def optimized_messages(path: Path) -> list[str]:
    return [p.message for p in verify_bundle(path) if p.check == CHECK_OPTIMIZED]


def test_an_optimized_trtmc_bundle_verifies(tmp_path):
    path = optimized_bundle(tmp_path / "opt.bundle")
    assert verify_bundle(path) == []
    assert set(read_bundle(path).sections) >= {f"{PREFIX}/weights/rank0.bin", "optimized_runtime.json"}


def test_a_changed_artifact_fails_on_the_recomputed_tree_digest(tmp_path):
    # same sizes, one byte changed: only the recomputed tree_sha256 can tell
    changed = dict(ARTIFACTS, **{"weights/rank0.bin": b"W" * 999 + b"X"})
    path = optimized_bundle(tmp_path / "opt.bundle", descriptor(), files=changed)
    (msg,) = optimized_messages(path)
    assert "tree_sha256" in msg and tree_digest(["weights"], changed) in msg


def test_a_directory_the_descriptor_does_not_declare_changes_the_tree_digest(tmp_path):
    path = optimized_bundle(tmp_path / "opt.bundle", descriptor(dirs=()))
    assert verify_bundle(path) == []  # its own digest over no directories
    desc = descriptor(dirs=())
    desc["artifact"]["directories"] = ["weights"]  # the record changed after the digest was taken
    path = optimized_bundle(tmp_path / "opt2.bundle", desc)
    assert any("tree_sha256" in m for m in optimized_messages(path))


def test_a_missing_artifact_fails_on_count_and_size(tmp_path):
    fewer = {k: v for k, v in ARTIFACTS.items() if k != "weights/meta.json"}
    path = optimized_bundle(tmp_path / "opt.bundle", descriptor(), files=fewer)
    (msg,) = optimized_messages(path)
    assert "records 3 files" in msg and "has 2 sections" in msg


@pytest.mark.parametrize(
    "change, words",
    [
        ({"schema_version": 3}, "schema_version is 3, expected 2"),
        ({"factory_abi": 2}, "factory_abi is 2, expected 1"),
        ({"model_id": "other/model"}, "differs from the header's"),
        ({"signed_by": "me"}, "unexpected 'signed_by'"),
    ],
)
def test_the_descriptor_is_checked_as_trtmcs_host_checks_it(tmp_path, change, words):
    path = optimized_bundle(tmp_path / "opt.bundle", descriptor(**change))
    (msg,) = optimized_messages(path)
    assert words in msg


def test_the_descriptor_key_sets_are_exact(tmp_path):
    desc = descriptor()
    del desc["profile_id"]
    assert any("missing profile_id" in m for m in optimized_messages(optimized_bundle(tmp_path / "a.bundle", desc)))
    desc = descriptor()
    desc["artifact"]["extra"] = 1
    assert any(
        "artifact must have exactly" in m for m in optimized_messages(optimized_bundle(tmp_path / "b.bundle", desc))
    )


@pytest.mark.parametrize("rel", ["../escape", "/abs", "a\\b", "a//b", "a/./b", ""])
def test_unsafe_artifact_names_are_refused_with_the_section_named(tmp_path, rel):
    name = f"{PREFIX}/{rel}"
    path = tmp_path / "bad.bundle"
    path.write_bytes(trtmc_container({"model_id": "m", "model_type": "x", "trt_version": ""}, [(name, b"x")]))
    problems = [p for p in verify_bundle(path) if p.check == CHECK_SECTION_NAME]
    assert problems and problems[0].section == name


# ------------------------------------------------------------------------------------------ trtls's own header order


def first_occurrence(raw_header: str, key: str) -> str | None:
    """What TRTMC's header reader reads: the first `"key":"value"` anywhere in the header text."""
    m = re.search(r'"' + re.escape(key) + r'"\s*:\s*"([^"]*)"', raw_header)
    return m.group(1) if m else None


def test_trtls_writes_every_top_level_field_before_a_nested_copy(tmp_path):
    header = {
        "model_id": "m",
        "model_type": "causal_lm",
        "quantization": {"precision": "int8", "family": "SPOOF"},  # a nested record given first
        "family": "gpt2",
        "precision": "fp16",
        "trt_version": "10.13",
    }
    path = tmp_path / "ours.bundle"
    write_bundle(path, header, {"engine_plan": b"E" * 64}, provenance={"family": "SPOOF"})
    raw = path.read_bytes()
    (length,) = struct.unpack("<Q", raw[8:16])
    text = raw[16 : 16 + length].decode()
    assert first_occurrence(text, "precision") == "fp16" and first_occurrence(text, "family") == "gpt2"
    assert verify_bundle(path) == []


# ---------------------------------------------------------------------------------- the build receipt (gate 3)


def native_bundle(path: Path) -> Path:
    header = {"model_id": "x/y", "model_type": "mlp", "family": "mlp", "trt_version": "10.13", "runtime_strategy": "s"}
    path.write_bytes(trtmc_container(header, [("config.json", b"{}"), ("engine_plan", b"P" * 128)]))
    return path


def receipt_for(bundle: Path, **over) -> dict:
    r = {
        "model_id": "x/y",
        "revision": "a" * 40,
        "bundle_sha256": hashlib.sha256(bundle.read_bytes()).hexdigest(),
        "command": ["trtmc", "build", "--model", "x/y", "--out", bundle.name],
        "config": {"precision": "fp16"},
        "trt_version": "10.13.0",
        "cuda_version": "12.9",
        "sm": "sm_89",
        "family": "mlp",
        "runtime_strategy": "s",
        "precision": "fp16",
        "quantization": None,
        "topology": "tp1",
    }
    r.update(over)
    receipt_path(bundle).write_text(json.dumps(r))
    return r


def receipt_check(bundle: Path):
    return check_receipt(bundle, hashlib.sha256(bundle.read_bytes()).hexdigest(), ("routes", "r", "bundle"))


def test_a_native_bundle_without_a_receipt_holds_with_where_to_put_one(tmp_path):
    bundle = native_bundle(tmp_path / "n.bundle")
    c = receipt_check(bundle)
    assert (c.status, c.code) == ("hold", "TRT713") and "n.bundle.receipt.json" in c.message


def test_a_receipt_that_matches_passes_and_one_for_another_bundle_rejects(tmp_path):
    bundle = native_bundle(tmp_path / "n.bundle")
    receipt_for(bundle)
    c = receipt_check(bundle)
    assert (c.status, c.code) == ("pass", "TRT713") and c.evidence["revision"] == "a" * 40
    receipt_for(bundle, bundle_sha256="0" * 64)
    c = receipt_check(bundle)
    assert (c.status, c.code) == ("reject", "TRT714") and "0" * 64 in c.message


def test_an_incomplete_receipt_holds_naming_what_is_missing(tmp_path):
    bundle = native_bundle(tmp_path / "n.bundle")
    r = receipt_for(bundle, revision="main")
    del r["sm"]
    receipt_path(bundle).write_text(json.dumps(r))
    c = receipt_check(bundle)
    assert c.status == "hold" and "missing sm" in c.message and "'main' is not an immutable revision" in c.message


def test_gate3_reads_the_receipt_beside_a_native_trtmc_bundle_on_a_route(root):  # noqa: F811
    bundle = root / "build" / "tiny.bundle"
    native_bundle(bundle)
    sidecar_path(bundle).unlink()
    _, checks = gate3(root, gates=(3,))
    assert checks["bundle.receipt"].status == "hold" and checks["bundle.receipt"].code == "TRT713"
    receipt_for(bundle)  # built from another revision than the route's pinned one
    _, checks = gate3(root, gates=(3,))
    receipt = checks["bundle.receipt"]
    assert receipt.status == "hold" and f"now resolves {COMMIT}" in receipt.message, receipt.message
    receipt_for(bundle, revision=COMMIT)
    _, checks = gate3(root, gates=(3,))
    assert checks["bundle.receipt"].status == "pass", checks["bundle.receipt"].message
    bundle.write_bytes(bundle.read_bytes()[:-1] + b"Q")  # the bundle changed after its receipt
    _, checks = gate3(root, gates=(3,))
    assert checks["bundle.receipt.checksum"].status == "reject" and checks["bundle.receipt.checksum"].code == "TRT714"


def test_gate3_codes_an_optimized_descriptor_problem_trt712(root):  # noqa: F811
    bundle = root / "build" / "tiny.bundle"
    optimized_bundle(bundle, descriptor(factory_abi=7))
    sidecar_path(bundle).unlink()
    _, checks = gate3(root, gates=(3,))
    assert checks[CHECK_OPTIMIZED].status == "reject" and checks[CHECK_OPTIMIZED].code == "TRT712"
