"""The .bundle container: round trips, every malformed shape rejected with its check id, atomic writes."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import struct
from pathlib import Path

import pytest

import trtls.bundle as B
from trtls.bundle import BundleError, promote_foreign, read_bundle, verify_bundle, write_bundle
from trtls.fs import Kind, atomic_write_bytes, atomic_writer

HEADER = {
    "model_id": "sshleifer/tiny-gpt2",
    "model_type": "causal_lm",
    "family": "gpt2",
    "trt_version": "10.13.0",
    "trt_abi": 10,
    "gpu_name": "NVIDIA L4",
    "created_at": "2026-11-29T12:00:00Z",
    "precision": "fp16",
    "quantization": None,
    "runtime_strategy": "single_engine",
    "io_map": {"input_ids": "input_ids"},
}
PROVENANCE = {
    "checkpoint_revision": "5f91d94bd9cd7190a9f3216ff93cd1dd95f2c7be",
    "build_config_hash": "ab" * 32,
    "builder_version": "1.2.0",
}


def raw_bundle(
    header: dict | bytes, payload: bytes = b"", *, magic: bytes = B.MAGIC, header_len: int | None = None
) -> bytes:
    """A bundle as another writer might produce it: no trtls record, no alignment, any lie we like."""
    body = header if isinstance(header, bytes) else json.dumps(header).encode()
    length = len(body) if header_len is None else header_len
    return magic + struct.pack("<Q", length) + body + payload


def foreign_header(sections: dict) -> dict:
    return {"model_id": "m", "model_type": "causal_lm", "trt_version": "10.13.0", "sections": sections}


def checks(problems: list[B.BundleProblem]) -> set[str]:
    return {p.check for p in problems}


@pytest.fixture
def written(tmp_path: Path) -> tuple[Path, B.BundleDigests]:
    path = tmp_path / "model.bundle"
    digests = write_bundle(
        path, HEADER, {"engine": b"E" * 1000, "tokenizer": b'{"vocab": {}}', "config": b"{}"}, provenance=PROVENANCE
    )
    return path, digests


# ------------------------------------------------------------------------------------------ round trip


def test_round_trip_keeps_header_fields_and_section_bytes(written):
    path, digests = written
    bundle = read_bundle(path)
    for key, value in HEADER.items():
        assert bundle.header[key] == value
    assert bundle.read_section("engine") == b"E" * 1000
    assert bundle.read_section("tokenizer") == b'{"vocab": {}}'
    assert list(bundle.sections) == ["engine", "tokenizer", "config"]
    assert all(s.offset % B.SECTION_ALIGN == 0 for s in bundle.sections.values())
    assert bundle.header["trtls"]["provenance"] == PROVENANCE
    assert verify_bundle(path) == []


def test_digests_returned_match_the_file_and_the_sidecar(written):
    path, digests = written
    data = path.read_bytes()
    assert digests.file_sha256 == hashlib.sha256(data).hexdigest()
    assert digests.size == len(data)
    assert digests.section_sha256["engine"] == hashlib.sha256(b"E" * 1000).hexdigest()
    side = json.loads(B.sidecar_path(path).read_text())
    assert side["format"] == B.SIDECAR_FORMAT and side["origin"] == "trtls"
    assert side["file_sha256"] == digests.file_sha256 and side["section_sha256"] == digests.section_sha256
    assert side["provenance"] == PROVENANCE


def test_sections_from_paths_and_iterables_stream_across_chunks(tmp_path):
    big = os.urandom(B.CHUNK * 2 + 12345)  # spans several hashing chunks, unaligned end
    src = tmp_path / "engine.plan"
    src.write_bytes(big)
    chunks = [b"x" * 1000, b"y" * 777, b""]
    path = tmp_path / "streamed.bundle"
    digests = write_bundle(path, HEADER, {"engine": src, "vocab": iter(chunks), "tail": b"z"}, provenance=None)
    bundle = read_bundle(path)
    assert bundle.read_section("engine") == big
    assert bundle.section_sha256("vocab") == hashlib.sha256(b"".join(chunks)).hexdigest()
    assert digests.section_sha256["engine"] == hashlib.sha256(big).hexdigest()
    assert bundle.header["trtls"]["provenance"] is None
    assert verify_bundle(path) == []


def test_same_inputs_give_byte_identical_bundles(tmp_path):
    a, b = tmp_path / "a.bundle", tmp_path / "b.bundle"
    for p in (a, b):
        write_bundle(p, HEADER, {"engine": b"123", "vocab": b"456"}, provenance=PROVENANCE)
    assert a.read_bytes() == b.read_bytes()


def test_foreign_bundle_without_checksums_verifies_and_promotes(tmp_path):
    path = tmp_path / "native.bundle"
    path.write_bytes(
        raw_bundle(foreign_header({"weights": {"offset": 0, "size": 4}, "vocab": {"offset": 4, "size": 2}}), b"WWWWvv")
    )
    assert verify_bundle(path) == []
    record = promote_foreign(path)
    assert record["origin"] == "foreign" and record["provenance"] is None
    assert record["file_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert record["section_sha256"]["vocab"] == hashlib.sha256(b"vv").hexdigest()
    assert json.loads(B.sidecar_path(path).read_text()) == record
    assert verify_bundle(path) == []


def test_promoting_a_changed_bundle_needs_replace(tmp_path):
    path = tmp_path / "native.bundle"
    path.write_bytes(raw_bundle(foreign_header({"weights": {"offset": 0, "size": 4}}), b"WWWW"))
    promote_foreign(path)
    path.write_bytes(raw_bundle(foreign_header({"weights": {"offset": 0, "size": 4}}), b"XXXX"))
    with pytest.raises(BundleError) as err:
        promote_foreign(path)
    assert B.CHECK_FILE_DIGEST in checks(err.value.problems)
    record = promote_foreign(path, replace=True)
    assert record["section_sha256"]["weights"] == hashlib.sha256(b"XXXX").hexdigest()
    assert verify_bundle(path) == []


def test_promote_refuses_a_malformed_bundle_and_writes_no_sidecar(tmp_path):
    path = tmp_path / "bad.bundle"
    path.write_bytes(raw_bundle(foreign_header({"w": {"offset": 0, "size": 99}}), b"W"))
    with pytest.raises(BundleError) as err:
        promote_foreign(path)
    assert checks(err.value.problems) == {B.CHECK_SECTION_BOUNDS}
    assert not B.sidecar_path(path).exists()


# ------------------------------------------------------------------------------------ malformed input

PAYLOAD = b"A" * 16 + b"B" * 16
GOOD_SECTIONS = {"a": {"offset": 0, "size": 16}, "b": {"offset": 16, "size": 16}}

# (id, file bytes, expected check, words the message must contain, expected byte offset or None)
CONTAINER_CASES = [
    (
        "bad magic",
        raw_bundle(foreign_header(GOOD_SECTIONS), PAYLOAD, magic=b"BUNDLE\x02\x00"),
        B.CHECK_MAGIC,
        "magic",
        0,
    ),
    ("zip magic", b"PK\x03\x04" + b"\x00" * 40, B.CHECK_MAGIC, "expected", 0),
    (
        "header length past end",
        raw_bundle(foreign_header(GOOD_SECTIONS), PAYLOAD, header_len=10_000),
        B.CHECK_HEADER_LENGTH,
        "past the end",
        8,
    ),
    ("header over the cap", raw_bundle(b"{}", header_len=B.MAX_HEADER + 1), B.CHECK_HEADER_CAP, "exceeds the cap", 8),
    ("header length 2**64-1", raw_bundle(b"{}", header_len=2**64 - 1), B.CHECK_HEADER_CAP, "exceeds the cap", 8),
    ("not JSON", raw_bundle(b"{model_id: nope}"), B.CHECK_HEADER_JSON, "not valid JSON", 16),
    ("not UTF-8", raw_bundle(b'{"model_id": "\xff\xfe"}'), B.CHECK_HEADER_JSON, "not UTF-8", 16),
    (
        "duplicate key",
        raw_bundle(b'{"sections": {}, "sections": {"x": {"offset": 0, "size": 0}}}'),
        B.CHECK_HEADER_JSON,
        "duplicate key",
        16,
    ),
    ("NaN", raw_bundle(b'{"sections": {}, "x": NaN}'), B.CHECK_HEADER_JSON, "NaN", 16),
    ("absurd nesting", raw_bundle(b"[" * 200_000 + b"]" * 200_000), B.CHECK_HEADER_JSON, "nested too deeply", 16),
    ("JSON array", raw_bundle(b"[1, 2]"), B.CHECK_HEADER_OBJECT, "expected an object", 16),
    ("JSON string", raw_bundle(b'"sections"'), B.CHECK_HEADER_OBJECT, "expected an object", 16),
    (
        "no sections table",
        raw_bundle({"model_id": "m", "model_type": "t", "trt_version": "10"}),
        B.CHECK_FIELD_MISSING,
        "'sections'",
        None,
    ),
    ("sections is a list", raw_bundle(foreign_header([])), B.CHECK_FIELD_TYPE, "'sections'", None),
    ("entry not an object", raw_bundle(foreign_header({"a": [0, 16]}), PAYLOAD), B.CHECK_SECTIONS_TABLE, "'a'", None),
    (
        "float offset",
        raw_bundle(foreign_header({"a": {"offset": 0.5, "size": 1}}), PAYLOAD),
        B.CHECK_SECTIONS_TABLE,
        "int",
        None,
    ),
    (
        "bool size",
        raw_bundle(foreign_header({"a": {"offset": 0, "size": True}}), PAYLOAD),
        B.CHECK_SECTIONS_TABLE,
        "int",
        None,
    ),
    (
        "overlapping sections",
        raw_bundle(foreign_header({"a": {"offset": 0, "size": 20}, "b": {"offset": 16, "size": 16}}), PAYLOAD),
        B.CHECK_SECTION_OVERLAP,
        "overlap",
        None,
    ),
    (
        "overlap hidden behind an empty section",
        raw_bundle(
            foreign_header(
                {"a": {"offset": 0, "size": 20}, "z": {"offset": 8, "size": 0}, "b": {"offset": 16, "size": 16}}
            ),
            PAYLOAD,
        ),
        B.CHECK_SECTION_OVERLAP,
        "'b'",
        None,
    ),
    (
        "section past end of file",
        raw_bundle(foreign_header({"a": {"offset": 0, "size": 16}, "b": {"offset": 16, "size": 17}}), PAYLOAD),
        B.CHECK_SECTION_BOUNDS,
        "past the end of the file",
        None,
    ),
    (
        "negative offset",
        raw_bundle(foreign_header({"a": {"offset": -16, "size": 16}}), PAYLOAD),
        B.CHECK_SECTION_BOUNDS,
        "negative",
        None,
    ),
    (
        "negative size",
        raw_bundle(foreign_header({"a": {"offset": 0, "size": -1}}), PAYLOAD),
        B.CHECK_SECTION_BOUNDS,
        "negative",
        None,
    ),
    (
        "huge offset",
        raw_bundle(foreign_header({"a": {"offset": 2**70, "size": 1}}), PAYLOAD),
        B.CHECK_SECTION_BOUNDS,
        "past the end",
        None,
    ),
    (
        "huge size",
        raw_bundle(foreign_header({"a": {"offset": 0, "size": 2**63}}), PAYLOAD),
        B.CHECK_SECTION_BOUNDS,
        "past the end",
        None,
    ),
    ("3-byte file", b"BUN", B.CHECK_TRUNCATED, "preamble", 3),
]


@pytest.mark.parametrize("case", CONTAINER_CASES, ids=[c[0] for c in CONTAINER_CASES])
def test_malformed_container_is_rejected_with_its_check_id(tmp_path, case):
    _, data, check, words, offset = case
    path = tmp_path / "bad.bundle"
    path.write_bytes(data)
    with pytest.raises(BundleError) as err:
        read_bundle(path)
    problem = next(p for p in err.value.problems if p.check == check)
    assert words in problem.message
    if offset is not None:
        assert problem.offset == offset
    assert check in checks(verify_bundle(path))


def test_section_past_end_reports_its_absolute_byte_offset(tmp_path):
    header = foreign_header({"a": {"offset": 0, "size": 16}, "b": {"offset": 16, "size": 99}})
    path = tmp_path / "short.bundle"
    data = raw_bundle(header, PAYLOAD)
    path.write_bytes(data)
    (problem,) = verify_bundle(path)
    payload_start = len(data) - len(PAYLOAD)
    assert problem.check == B.CHECK_SECTION_BOUNDS and problem.section == "b"
    assert problem.offset == payload_start + 16
    assert f"({len(data)} bytes)" in problem.message


@pytest.mark.parametrize(
    "name, why",
    [
        ("../../etc/passwd", "path separator"),
        ("..", "'..'"),
        ("weights/0", "path separator"),
        ("weights\\0", "path separator"),
        (".hidden", "starts with '.'"),
        ("C:engine", "drive letter"),
        ("", "is empty"),
        ("eng\x00ine", "NUL"),
        ("a..b", "'..'"),
        ("line\nbreak", "control character"),
        ("n" * 300, "longer than"),
    ],
)
def test_path_like_section_names_are_rejected_and_create_nothing(tmp_path, name, why):
    folder = tmp_path / "bundles"
    folder.mkdir()
    path = folder / "evil.bundle"
    path.write_bytes(raw_bundle(foreign_header({name: {"offset": 0, "size": 4}}), b"EVIL"))
    problems = verify_bundle(path)
    assert [p.check for p in problems] == [B.CHECK_SECTION_NAME]
    assert why in problems[0].message
    B.inspect_text(path)
    assert sorted(os.listdir(folder)) == ["evil.bundle"]  # reading never materializes a section name
    assert sorted(os.listdir(tmp_path)) == ["bundles"]


def test_missing_and_mistyped_header_fields_are_reported_by_verify(tmp_path):
    path = tmp_path / "fields.bundle"
    header = {"model_type": 7, "trt_version": "", "precision": ["fp16"], "io_map": "x", "sections": {}}
    path.write_bytes(raw_bundle(header))
    read_bundle(path)  # the container itself is sound; field rules are verify's job
    messages = {(p.check, p.message.split("'")[1]) for p in verify_bundle(path)}
    assert messages == {
        (B.CHECK_FIELD_MISSING, "model_id"),
        (B.CHECK_FIELD_TYPE, "model_type"),
        (B.CHECK_FIELD_TYPE, "trt_version"),
        (B.CHECK_FIELD_TYPE, "precision"),
        (B.CHECK_FIELD_TYPE, "io_map"),
    }


def test_truncation_is_caught_wherever_the_cut_falls(written):
    path, _ = written
    data = path.read_bytes()
    header_len = struct.unpack("<Q", data[8:16])[0]
    for cut, expected in [
        (10, B.CHECK_TRUNCATED),
        (16 + header_len // 2, B.CHECK_HEADER_LENGTH),
        (len(data) - 1, B.CHECK_SECTION_BOUNDS),
    ]:
        path.write_bytes(data[:cut])
        found = checks(verify_bundle(path))
        assert expected in found, (cut, found)


def test_tampered_section_byte_fails_the_header_record_and_the_sidecar(written):
    path, _ = written
    bundle = read_bundle(path)
    engine = bundle.sections["engine"]
    data = bytearray(path.read_bytes())
    data[engine.start + 500] ^= 0x01
    path.write_bytes(bytes(data))
    problems = verify_bundle(path)
    section_problems = [p for p in problems if p.check == B.CHECK_SECTION_DIGEST]
    assert len(section_problems) == 2  # one against the header record, one against the sidecar
    assert all(p.section == "engine" and p.offset == engine.start for p in section_problems)
    assert any("header's trtls record" in p.message for p in section_problems)
    assert B.CHECK_FILE_DIGEST in checks(problems)


def test_tampered_header_record_alone_is_caught_without_a_sidecar(tmp_path):
    digest = hashlib.sha256(b"WWWW").hexdigest()
    header = foreign_header({"w": {"offset": 0, "size": 4}}) | {
        "trtls": {"format": B.TRTLS_BLOCK_FORMAT, "section_sha256": {"w": digest}}
    }
    path = tmp_path / "ours.bundle"
    path.write_bytes(raw_bundle(header, b"WWWX"))
    (problem,) = verify_bundle(path)
    assert problem.check == B.CHECK_SECTION_DIGEST and problem.section == "w"


def test_byte_outside_every_section_is_caught_only_by_the_whole_file_digest(written):
    path, _ = written
    bundle = read_bundle(path)
    gap = bundle.sections["engine"].end  # alignment padding between engine and tokenizer
    assert gap < bundle.sections["tokenizer"].start
    data = bytearray(path.read_bytes())
    data[gap] = 0xFF
    path.write_bytes(bytes(data))
    problems = verify_bundle(path)
    assert checks(problems) == {B.CHECK_FILE_DIGEST}
    assert "differs from the sidecar" in problems[0].message


def test_malformed_sidecar_and_trtls_record_are_reported(written):
    path, _ = written
    B.sidecar_path(path).write_text('{"format": "trtls.bundle-sidecar/1", "file_sha256": "nope", "size": 1}')
    assert checks(verify_bundle(path)) == {B.CHECK_SIDECAR}
    B.sidecar_path(path).unlink()
    record = path.with_name("record.bundle")
    record.write_bytes(raw_bundle(foreign_header({}) | {"trtls": {"section_sha256": {"x": "not-hex"}}}))
    assert checks(verify_bundle(record)) == {B.CHECK_TRTLS_BLOCK}


def test_unreadable_targets_are_io_problems_not_crashes(tmp_path):
    assert checks(verify_bundle(tmp_path / "missing.bundle")) == {B.CHECK_IO}
    assert checks(verify_bundle(tmp_path)) == {B.CHECK_IO}
    fifo = tmp_path / "pipe.bundle"
    os.mkfifo(fifo)
    assert checks(verify_bundle(fifo)) == {B.CHECK_IO}  # a FIFO must not block the reader


def test_header_cap_is_configurable(written):
    path, _ = written
    with pytest.raises(BundleError) as err:
        read_bundle(path, max_header=64)
    assert checks(err.value.problems) == {B.CHECK_HEADER_CAP}


# ------------------------------------------------------------------------------------------ writing


@pytest.mark.parametrize("name", ["../up", "a/b", ".x", ""])
def test_write_refuses_path_like_names_and_writes_nothing(tmp_path, name):
    with pytest.raises(BundleError) as err:
        write_bundle(tmp_path / "x.bundle", HEADER, {name: b"1"}, provenance=None)
    assert checks(err.value.problems) == {B.CHECK_SECTION_NAME}
    assert os.listdir(tmp_path) == []


def test_write_refuses_headers_missing_required_fields_or_owning_keys(tmp_path):
    with pytest.raises(BundleError) as err:
        write_bundle(
            tmp_path / "x.bundle", {"model_type": "t", "trt_version": "10", "sections": {}}, {}, provenance=None
        )
    assert {B.CHECK_FIELD_MISSING, B.CHECK_HEADER_OBJECT} <= checks(err.value.problems)
    with pytest.raises(BundleError) as err:
        write_bundle(tmp_path / "x.bundle", HEADER, {}, provenance={"when": object()})
    assert checks(err.value.problems) == {B.CHECK_HEADER_JSON}
    assert os.listdir(tmp_path) == []


def test_failed_write_from_a_raising_section_iterator_keeps_the_old_bundle(written):
    path, _ = written
    folder = path.parent
    before_bytes, before_side = path.read_bytes(), B.sidecar_path(path).read_bytes()
    before_listing = sorted(os.listdir(folder))

    def engine_chunks():
        yield b"x" * 4096
        raise OSError("builder died mid-stream")

    with pytest.raises(OSError, match="builder died"):
        write_bundle(path, HEADER, {"engine": engine_chunks()}, provenance=None)
    assert path.read_bytes() == before_bytes
    assert B.sidecar_path(path).read_bytes() == before_side
    assert sorted(os.listdir(folder)) == before_listing  # no temp or spool file left behind
    assert verify_bundle(path) == []


def test_failed_write_on_a_full_disk_keeps_the_old_bundle(written):
    """A real write failure in the final file (EFBIG from RLIMIT_FSIZE stands in for a full disk; root ignores
    folder permissions, so a read-only folder cannot make the write fail in CI)."""
    import resource
    import signal

    path, _ = written
    before_bytes = path.read_bytes()
    before_listing = sorted(os.listdir(path.parent))
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG instead of being killed
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, hard))
    try:
        with pytest.raises(OSError) as err:
            write_bundle(path, HEADER, {"engine": b"\x01" * (2 * 1024 * 1024)}, provenance=None)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old_handler)
    assert err.value.errno == errno.EFBIG
    assert path.read_bytes() == before_bytes
    assert sorted(os.listdir(path.parent)) == before_listing


def test_atomic_writer_discards_a_half_written_temp_file(tmp_path):
    target = tmp_path / "report.json"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_writer(target, kind=Kind.report, within=tmp_path, may_replace=lambda head: True) as out:
            out.write(b"new, half")
            raise RuntimeError("interrupted")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["report.json"]
    atomic_write_bytes(target, iter([b"n", b"ew"]), kind=Kind.report, within=tmp_path, may_replace=lambda head: True)
    assert target.read_text() == "new"
    assert (target.stat().st_mode & 0o777) == 0o644


# ------------------------------------------------------------------------------------------ inspect


def test_inspect_text_shows_fields_sections_digests_and_verdict(written):
    path, digests = written
    text = B.inspect_text(path)
    assert '"sshleifer/tiny-gpt2"' in text and "runtime_strategy" in text
    assert digests.file_sha256 in text and digests.section_sha256["engine"] in text
    assert PROVENANCE["checkpoint_revision"] in text
    assert 'origin "trtls"' in text
    assert text.rstrip().endswith("verify   OK")


def test_inspect_of_a_broken_bundle_explains_instead_of_raising(tmp_path):
    path = tmp_path / "bad.bundle"
    path.write_bytes(raw_bundle(b"[]"))
    info = B.inspect_json(path)
    assert info["ok"] is False and info["header"] is None
    assert info["problems"][0]["check"] == B.CHECK_HEADER_OBJECT
    text = B.inspect_text(path)
    assert "verify   FAILED" in text and B.CHECK_HEADER_OBJECT in text


def test_inspect_escapes_terminal_control_sequences_from_the_header(tmp_path):
    path = tmp_path / "ansi.bundle"
    path.write_bytes(raw_bundle(foreign_header({}) | {"gpu_name": "\x1b[2J\x1b[31mOK\u202egnp.exe"}))
    text = B.inspect_text(path)
    assert "\x1b" not in text and "\u202e" not in text
    text.encode("utf-8")  # printable without errors
    info = B.inspect_json(path)
    assert info["header"]["gpu_name"].startswith("\x1b[2J")  # JSON output keeps the real value
    # a lone surrogate is no text at all: the header is refused, said printably (before: kept, then a traceback)
    path.write_bytes(raw_bundle(foreign_header({}) | {"gpu_name": "OK\ud800"}))
    said = B.inspect_text(path)
    said.encode("utf-8")
    assert "lone UTF-16 surrogate" in said, said


def test_trtmc_optimized_bundles_name_artifacts_by_relative_path_and_record_no_trt_version(tmp_path):
    # TensorRT Model Connect's optimized bundle: sections under optimized_runtime_artifacts/<relpath>, trt_version ""
    names = ["optimized_runtime_artifacts/engines/rank0.plan", "optimized_runtime_artifacts/optimized_runtime.json"]
    table = {names[0]: {"offset": 0, "size": 4}, names[1]: {"offset": 4, "size": 2}}
    path = tmp_path / "optimized.bundle"
    path.write_bytes(raw_bundle({**foreign_header(table), "trt_version": ""}, b"PLAN{}"))
    assert verify_bundle(path) == []
    assert sorted(B.read_bundle(path).sections) == sorted(names)
    for bad, why in [
        ("optimized_runtime_artifacts/../x", "'..'"),
        ("optimized_runtime_artifacts//x", "no relative path"),  # an absolute path after the prefix
        ("optimized_runtime_artifacts/a//b", "empty"),
        ("optimized_runtime_artifacts/a\\b", "backslash"),
        ("optimized_runtime_artifacts/", "no relative path"),
        ("optimized_runtime_artifacts/.git/x", "starts with '.'"),
        ("other_prefix/x", "path separator"),
    ]:
        evil = tmp_path / "evil.bundle"
        evil.write_bytes(raw_bundle(foreign_header({bad: {"offset": 0, "size": 4}}), b"EVIL"))
        problems = verify_bundle(evil)
        assert [p.check for p in problems] == [B.CHECK_SECTION_NAME] and why in problems[0].message, (bad, problems)
    # an empty trt_version is TRTMC's only for an optimized bundle
    plain = tmp_path / "plain.bundle"
    plain.write_bytes(raw_bundle({**foreign_header({"engine": {"offset": 0, "size": 4}}), "trt_version": ""}, b"PLAN"))
    assert B.CHECK_FIELD_TYPE in checks(verify_bundle(plain))


@pytest.mark.parametrize(
    "sections",
    [
        {"cfg\ud800": {"offset": 0, "size": 4}},  # a section name no UTF-8 can hold
        {"weights": {"offset": 0, "size": 4}, "x": {"offset": 4, "size": 0, "note": "\udfff"}},
    ],
)
def test_a_lone_surrogate_in_a_header_is_a_located_problem_never_a_traceback(tmp_path, sections):
    """JSON's `\\ud800` escape decodes to a string no UTF-8 can encode: `bundle verify` said "verified", then `bundle
    promote` (and inspect, `route build`, an optimized bundle's tree digest) ended in a UnicodeEncodeError traceback.
    The header is not valid JSON text: the header check fails, promote refuses, nothing is written."""
    path = tmp_path / "s.bundle"
    path.write_bytes(raw_bundle(foreign_header(sections), b"WWWW"))
    assert B.CHECK_HEADER_JSON in checks(verify_bundle(path))
    with pytest.raises(BundleError):
        promote_foreign(path)
    assert not B.sidecar_path(path).exists()
