"""The runbook's hold reasons as checks, through real gates runs on copies of the supported route sample: plugin
libraries (TRT710), FFI boundaries (TRT609), a precision change (TRT813), portability targets (TRT911)."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest
from _lifecycle_sample import ROUTE, add_engine_route, copy, set_in_route

from trtls.core.recipe import load_recipe
from trtls.gates.run import run_gates


@pytest.fixture
def root(prepared, tmp_path) -> Path:
    return copy(prepared, tmp_path / "route")


def checks_of(root: Path, route: str, gates: list[int] | None = None, **kw) -> dict:
    loaded = load_recipe(root / "trtls.toml")
    assert loaded.recipe is not None, [(loaded.location(f), f.message) for f in loaded.findings]
    result = run_gates(loaded, route, gates, write_evidence=False, **kw)
    return {c.name: c for c in result.checks}


def test_a_plugin_library_holds_until_the_route_describes_it(root):
    (root / "plugins").mkdir()
    (root / "plugins" / "libcustom.so").write_bytes(b"\x7fELF not really a plugin")
    add_engine_route(root, engine_extra='plugins = { libraries = ["plugins/libcustom.so"] }\n')
    got = checks_of(root, "trt", [3])["plugins:libcustom.so"]
    assert got.status == "hold" and got.code == "TRT710" and "does not describe" in got.message
    assert got.evidence["sha256"].startswith("sha256:")
    text = (root / "trtls.toml").read_text()
    (root / "trtls.toml").write_text(
        text + 'plugins = { custom = { path = "plugins/libcustom.so", source = "https://example.com/k@abc", '
        'build_flags = "-O3 -arch=sm_89", version = "1.2.0", review = "reviewed by kernels team 2026-11-02" } }\n'
    )
    got = checks_of(root, "trt", [3])["plugins:libcustom.so"]
    assert got.status == "hold" and "missing scan" in got.message and got.path == ("routes", "trt", "plugins", "custom")
    set_in_route(root, 'version = "1.2.0",', 'version = "1.2.0", scan = "cosign verified",')
    got = checks_of(root, "trt", [3])["plugins:libcustom.so"]
    assert got.status == "pass" and "cosign verified" in got.message


def test_the_plugin_digest_goes_into_the_provenance_and_the_sbom(root):
    from trtls.bundle.sbom import FileDigest, make_sbom
    from trtls.core.route import route_model
    from trtls.route.plugins import plugin_provenance

    (root / "plugins").mkdir()
    (root / "plugins" / "libcustom.so").write_bytes(b"kernels")
    add_engine_route(root, engine_extra='plugins = { libraries = ["plugins/libcustom.so"] }\n')
    loaded = load_recipe(root / "trtls.toml")
    (prov,) = plugin_provenance(loaded, route_model(loaded, "trt"))
    import hashlib

    assert prov["sha256"] == "sha256:" + hashlib.sha256(b"kernels").hexdigest() and prov["size"] == 7
    doc = make_sbom(
        bundle=FileDigest("b", "0" * 64, 1),
        checkpoint_id="c",
        checkpoint_revision="r",
        checkpoint_files=[],
        builder_name="tensorrt_rtx",
        builder_version="1",
        trtls_version="0",
        engine=FileDigest("e", "1" * 64, 1),
        plugins=[FileDigest("libcustom.so", prov["sha256"][7:], 7)],
    )
    lib = next(c for c in doc["components"] if c["bom-ref"] == "plugin-0")
    assert lib["type"] == "library" and lib["hashes"][0]["content"] == prov["sha256"][7:]
    assert "plugin-0" in next(d for d in doc["dependencies"] if d["ref"] == "engine")["dependsOn"]


def test_an_ffi_boundary_holds_until_named_with_an_owner(root):
    set_in_route(root, "canary_plan = {", 'ffi = ["tvm-ffi"]\ncanary_plan = {')
    got = checks_of(root, ROUTE, [2])["boundary:tvm-ffi"]
    assert got.status == "hold" and got.code == "TRT609" and 'kind = "tvm-ffi"' in got.message
    set_in_route(root, 'ffi = ["tvm-ffi"]\n', 'ffi = ["tvm-ffi"]\nboundaries = { serving = { kind = "tvm-ffi" } }\n')
    assert "has no owner" in checks_of(root, ROUTE, [2])["boundary:tvm-ffi"].message
    set_in_route(root, '{ kind = "tvm-ffi" }', '{ kind = "tvm-ffi", owner = "runtime-team" }')
    got = checks_of(root, ROUTE, [2])["boundary:tvm-ffi"]
    assert got.status == "pass" and "runtime-team" in got.message


def test_a_precision_change_holds_until_tolerances_are_set_for_it(root):
    add_engine_route(root, engine_extra='precision = { convert = "fp16" }\n')
    got = checks_of(root, "trt", [1, 4])["parity.precision"]
    assert got.status == "hold" and got.code == "TRT813"
    assert got.evidence["checkpoint_precision"] == "fp32" and got.evidence["deployed_precision"] == "fp16"
    assert 'tolerance_precision = "fp16"' in got.message
    (root / "trtls.toml").write_text((root / "trtls.toml").read_text() + 'tolerance_precision = "fp16"\n')
    assert checks_of(root, "trt", [1, 4])["parity.precision"].status == "pass"
    # the ONNX Runtime route deploys fp32 like its checkpoint: nothing to judge, no check
    assert "parity.precision" not in checks_of(root, ROUTE, [1, 4])


def test_every_target_not_validated_holds_by_name(root):
    here = platform.machine()
    set_in_route(root, "canary_plan = {", f'targets = ["{here}", "riscv64"]\ncanary_plan = {{')
    got = checks_of(root, ROUTE)
    assert got[f"release.portability:{here}"].status == "pass"
    other = got["release.portability:riscv64"]
    assert other.status == "hold" and other.code == "TRT911" and "target riscv64: not validated" in other.message
    assert other.path == ("routes", ROUTE, "targets", 1)
    add_engine_route(root, 'targets = ["SM89"]\n')
    engine = checks_of(root, "trt", [2, 4, 5])["release.portability:SM89"]
    assert engine.status == "hold" and "not validated" in engine.message
