"""Gate 3 — bundle and manifest, on real bundles built from the sample route `tiny` (real TensorRT-RTX)."""

from __future__ import annotations

import json
import struct

import pytest
from test_route_build import COMMIT, change_weights, copy_sample, fresh_sample, leftovers, sha256, trtls

from trtls.bundle import MAGIC, read_bundle, sidecar_path
from trtls.bundle.sbom import sbom_path
from trtls.core.gate_result import decide
from trtls.core.recipe import load_recipe
from trtls.gates.run import run_gates


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The sample with a real route build done once (copied per test)."""
    root = fresh_sample(tmp_path_factory.mktemp("gate3") / "route")
    assert trtls("route", "lock", "--route", "tiny", cwd=root).returncode == 0
    r = trtls("route", "build", "--route", "tiny", cwd=root)
    assert r.returncode == 0, r.stdout + r.stderr
    return root


@pytest.fixture
def root(built, tmp_path):
    return copy_sample(built, tmp_path / "route")


def gate3(root, gates=(1, 2, 3), **kw):
    loaded = load_recipe(root / "trtls.toml")
    assert loaded.recipe is not None
    res = run_gates(loaded, "tiny", list(gates), **kw)
    return res, {c.name: c for c in res.checks if c.gate == 3}


def test_gate3_passes_on_a_fresh_route_build(root):
    res, checks = gate3(root)
    bad = {n: (c.status, c.message) for n, c in checks.items() if c.status != "pass"}
    assert not bad
    assert {
        "bundle.present",
        "bundle.container",
        "bundle.digests",
        "bundle.origin",
        "bundle.provenance.checkpoint",
        "bundle.provenance.build",
        "bundle.artifacts",
        "bundle.sbom",
    } <= set(checks)
    assert {c.code for c in checks.values()} == {f"TRT70{i}" for i in range(1, 9)} | {"TRT711"}  # + header shadow
    assert res.gate_status(3) == "supported" and res.gate_status(1) == "supported"
    # gate 2 holds only on what the TensorRT route leaves unpinned (no GPU here to pin it to): never a pass
    assert {c.name for c in res.checks if c.gate == 2 and c.status != "pass"} == {"cuda_driver", "gpu_name"}
    assert res.summary.bundle_digest == f"sha256:{sha256(root / 'build' / 'tiny.bundle')}"
    assert checks["bundle.provenance.checkpoint"].evidence["source"] == "gate 1"


def test_gate3_alone_computes_what_gates_1_and_2_would_say(root):
    res, checks = gate3(root, gates=(3,))
    assert decide(list(checks.values())) == "supported", {n: c.message for n, c in checks.items() if c.status != "pass"}
    assert "gate 1 did not run" in checks["bundle.provenance.checkpoint"].evidence["source"]


def test_tampered_engine_byte_rejects_with_the_digest_checks(root):
    bundle = root / "build" / "tiny.bundle"
    engine = read_bundle(bundle).sections["engine"]
    data = bytearray(bundle.read_bytes())
    at = engine.start + engine.size // 2
    data[at] ^= 0x01
    bundle.write_bytes(bytes(data))
    res, checks = gate3(root)
    assert res.gate_status(3) == "reject" and res.decision == "reject"
    sec = checks["bundle.section_digest"]
    assert sec.status == "reject" and sec.code == "TRT703"
    assert f"(byte {engine.start})" in sec.message and "'engine'" in sec.message  # the section's offset in the file
    assert checks["bundle.file_digest"].status == "reject"
    assert "bundle.container" in checks and checks["bundle.container"].status == "pass"  # the container itself is sound
    assert (
        res.summary.bundle_digest == f"sha256:{sha256(bundle)}"
    )  # the digest of what is there, not of what was recorded


def test_tampered_magic_rejects_as_container(root):
    bundle = root / "build" / "tiny.bundle"
    data = bytearray(bundle.read_bytes())
    data[0] ^= 0xFF
    bundle.write_bytes(bytes(data))
    _, checks = gate3(root, gates=(3,))
    assert checks["bundle.magic"].status == "reject" and checks["bundle.magic"].code == "TRT702"
    assert "(byte 0)" in checks["bundle.magic"].message
    assert "bundle.container" not in checks and "bundle.provenance.checkpoint" not in checks


def test_weights_changed_after_the_build_hold_as_stale(root):
    change_weights(root)
    assert trtls("route", "lock", "--route", "tiny", cwd=root).returncode == 0  # the change was reviewed: re-locked
    res, checks = gate3(root)
    assert res.gate_status(1) == "supported"
    stale = checks["bundle.provenance.checkpoint"]
    assert stale.status == "hold" and stale.code == "TRT705"
    assert "bundle is stale" in stale.message and "model.safetensors" in stale.message and "rebuild" in stale.message
    assert stale.evidence["changed"] == ["model.safetensors"]
    assert res.gate_status(3) == "hold"
    # rebuilding the route makes it current again
    r = trtls("route", "build", "--route", "tiny", cwd=root)
    assert r.returncode == 0, r.stdout + r.stderr
    _, checks = gate3(root)
    assert all(c.status == "pass" for c in checks.values()), {
        n: c.message for n, c in checks.items() if c.status != "pass"
    }


def test_engine_rebuilt_with_other_settings_holds_as_stale(root):
    # another build of the engine (a different optimization level) is the latest successful build now
    r = trtls("build", "--engine", "tiny", "--optimization-level", "1", cwd=root)
    assert r.returncode == 0, r.stdout + r.stderr
    _, checks = gate3(root)
    build = checks["bundle.provenance.build"]
    assert build.status == "hold" and build.code == "TRT706" and "buildConfigHash" in build.message


def test_missing_bundle_holds(root):
    (root / "build" / "tiny.bundle").unlink()
    res, checks = gate3(root)
    assert list(checks) == ["bundle.present"]
    c = checks["bundle.present"]
    assert c.status == "hold" and c.code == "TRT701" and "trtls route build" in c.message
    assert c.path == ("routes", "tiny", "bundle")
    assert res.summary.bundle_digest is None


def test_missing_sbom_and_sbom_of_another_bundle_hold(root):
    bundle = root / "build" / "tiny.bundle"
    sbom = sbom_path(bundle)
    doc = json.loads(sbom.read_text())
    sbom.unlink()
    _, checks = gate3(root, gates=(3,))
    assert checks["bundle.sbom"].status == "hold" and checks["bundle.sbom"].code == "TRT708"
    doc["metadata"]["component"]["hashes"][0]["content"] = "0" * 64
    sbom.write_text(json.dumps(doc))
    _, checks = gate3(root, gates=(3,))
    assert checks["bundle.sbom"].status == "hold" and "metadata.component" in checks["bundle.sbom"].message


def test_foreign_bundle_holds_until_promoted(root):
    header = json.dumps(
        {
            "model_id": "x/y",
            "model_type": "mlp",
            "trt_version": "10.3",
            "sections": {"model.onnx": {"offset": 0, "size": 4}},
        }
    ).encode()
    bundle = root / "build" / "tiny.bundle"
    bundle.write_bytes(MAGIC + struct.pack("<Q", len(header)) + header + b"onnx")
    sidecar_path(bundle).unlink()
    _, checks = gate3(root, gates=(3,))
    assert checks["bundle.origin"].status == "hold" and "trtls bundle promote" in checks["bundle.origin"].message
    r = trtls("bundle", "promote", str(bundle), cwd=root)  # what the TRT704 message tells the user to run
    assert r.returncode == 0 and "foreign bundle" in r.stdout and str(sidecar_path(bundle)) in r.stdout, (
        r.stdout + r.stderr
    )
    _, checks = gate3(root, gates=(3,))
    assert checks["bundle.origin"].status == "pass" and checks["bundle.digests"].status == "pass"
    assert (
        checks["bundle.provenance.checkpoint"].status == "hold"
    )  # a foreign bundle cannot prove what it was built from
    # changed after promotion: gate 3 rejects, a plain promote refuses (and says how), --replace re-records
    bundle.write_bytes(bundle.read_bytes()[:-4] + b"ONNX")
    recorded = sidecar_path(bundle).read_bytes()
    r = trtls("bundle", "promote", str(bundle), cwd=root)
    assert r.returncode == 4 and "bundle.file_digest" in r.stderr and "--replace" in r.stderr, r.stderr
    assert sidecar_path(bundle).read_bytes() == recorded, "a refused promotion writes nothing"
    assert trtls("bundle", "promote", str(bundle), "--replace", cwd=root).returncode == 0
    _, checks = gate3(root, gates=(3,))
    assert checks["bundle.digests"].status == "pass"


def test_promote_refuses_a_malformed_bundle_with_its_problem(root, tmp_path):
    bad = tmp_path / "bad.bundle"
    header = json.dumps(
        {"model_id": "x/y", "model_type": "mlp", "trt_version": "10.3", "sections": {"w": {"offset": 0, "size": 99}}}
    ).encode()
    bad.write_bytes(MAGIC + struct.pack("<Q", len(header)) + header + b"w")
    r = trtls("bundle", "promote", str(bad), cwd=root)
    assert r.returncode == 4 and f"{bad}: not promoted" in r.stderr and "bundle.section_bounds" in r.stderr, r.stderr
    assert not sidecar_path(bad).exists()
    r = trtls("bundle", "promote", str(tmp_path / "missing.bundle"), cwd=root)
    assert r.returncode == 2 and "missing.bundle" in r.stderr and "No such file" in r.stderr


def test_end_to_end_through_the_cli(root):
    r = trtls("gates", "--route", "tiny", "--format", "json", cwd=root)
    s = json.loads(r.stdout)
    assert s["gates"]["3"]["status"] == "pass", s["gates"]["3"]
    assert s["bundle_digest"] == f"sha256:{sha256(root / 'build' / 'tiny.bundle')}"
    assert s["checkpoint_revision"] == COMMIT
    assert r.returncode == {"supported": 0, "hold": 3, "reject": 4}[s["decision"]]
    assert leftovers(root) == []
