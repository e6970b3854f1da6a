"""Hostile bytes never crash the bundle reader: only BundleError / problem lists, whatever the input.

CI runs TRTLS_FUZZ_EXAMPLES examples per property (default 300); the long run sets 10000.
"""

from __future__ import annotations

import json
import os
import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trtls.bundle as B
from trtls.bundle.format import _name_problem  # the section-name rule every accepted bundle must meet

EXAMPLES = int(os.environ.get("TRTLS_FUZZ_EXAMPLES", "300"))
FUZZ = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


@pytest.fixture(scope="module")
def folder():
    with tempfile.TemporaryDirectory(prefix="trtls-fuzz-") as d:
        yield Path(d)


def valid_bundle(folder: Path) -> bytes:
    path = folder / "seed.bundle"
    B.write_bundle(
        path,
        {"model_id": "m", "model_type": "causal_lm", "trt_version": "10.13.0", "precision": "fp16"},
        {"engine": bytes(range(256)) * 3, "vocab": b'{"a": 1}', "empty": b""},
        provenance={"checkpoint_revision": "abc"},
    )
    data = path.read_bytes()
    path.unlink()
    B.sidecar_path(path).unlink()
    return data


def exercise(path: Path) -> list[B.BundleProblem]:
    """Every public reader on one file: each may only report, never crash."""
    problems = B.verify_bundle(path)
    assert all(isinstance(p, B.BundleProblem) and p.check.startswith("bundle.") for p in problems)
    try:
        bundle = B.read_bundle(path)
    except B.BundleError as exc:
        assert exc.problems
    else:
        for s in bundle.sections.values():  # a bundle read_bundle accepts is safe to read
            assert 0 <= s.start and s.end <= bundle.file_size
            assert len(bundle.read_section(s.name)) == s.size
    info = B.inspect_json(path)
    assert info["ok"] == (not problems)
    json.dumps(info)  # the --json output must always serialize
    B.inspect_text(path).encode("utf-8")
    return problems


@FUZZ
@given(data=st.binary(max_size=4096))
def test_random_bytes_are_reported_not_raised(folder, data):
    path = folder / "random.bundle"
    path.write_bytes(data)
    assert exercise(path)  # random bytes are never a valid bundle


@FUZZ
@given(header=st.binary(max_size=512), length=st.integers(0, 2**64 - 1), tail=st.binary(max_size=256))
def test_right_magic_with_random_header_and_length(folder, header, length, tail):
    path = folder / "magic.bundle"
    path.write_bytes(B.MAGIC + struct.pack("<Q", length) + header + tail)
    exercise(path)


@FUZZ
@given(
    edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=8),
    cut=st.none() | st.integers(0, 10**6),
    insert=st.none() | st.tuples(st.integers(0, 10**6), st.binary(min_size=1, max_size=32)),
)
def test_mutated_valid_bundles_are_reported_not_raised(folder, edits, cut, insert):
    data = bytearray(valid_bundle(folder))
    for pos, value in edits:
        data[pos % len(data)] = value
    if insert is not None:
        at = insert[0] % len(data)
        data[at:at] = insert[1]
    if cut is not None:
        del data[cut % (len(data) + 1) :]
    path = folder / "mutated.bundle"
    path.write_bytes(bytes(data))
    exercise(path)


section_names = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["..", "../x", "a/b", "a\\b", ".x", "C:x", "", "\x00", "engine"]),
)
entries = st.one_of(
    st.fixed_dictionaries({"offset": st.integers(-(2**70), 2**70), "size": st.integers(-(2**70), 2**70)}),
    st.fixed_dictionaries({"offset": st.integers(0, 300), "size": st.integers(0, 300)}),
    st.none() | st.booleans() | st.floats(allow_nan=False) | st.lists(st.integers(), max_size=2),
)


@FUZZ
@given(table=st.dictionaries(section_names, entries, max_size=6), payload=st.binary(max_size=600))
def test_random_section_tables_never_escape_the_file(folder, table, payload):
    header = {"model_id": "m", "model_type": "t", "trt_version": "10", "sections": table}
    path = folder / "table.bundle"
    body = json.dumps(header).encode()
    path.write_bytes(B.MAGIC + struct.pack("<Q", len(body)) + body + payload)
    problems = exercise(path)
    if not problems:
        assert all(_name_problem(name) is None for name in table)
