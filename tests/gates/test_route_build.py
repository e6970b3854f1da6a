"""`trtls route build`: the sample route `tiny` → real TensorRT-RTX engine → bundle + sidecar + SBOM.

The helpers at the top are shared with test_gate3.py (the sample in tmp dirs; nothing touches the repo).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trtls.bundle import read_bundle, sidecar_path, verify_bundle
from trtls.bundle.sbom import sbom_path
from trtls.core.recipe import load_recipe
from trtls.core.route import route_model
from trtls.gates.source import check_checkpoint
from trtls.route.build import RouteBuildError, build_route, files_digest

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "samples" / "route"
COMMIT = "d065c296e0fef52b015f4755c02dda4b3064c1d2"
SNAPSHOT = f"checkpoints/models--trtls--tiny-mlp/snapshots/{COMMIT}"
GENERATED = ("checkpoints", "inputs", "build", "releases", ".trtls", "trtls.lock.json", "model.onnx", "__pycache__")
HEADER_FIELDS = (
    "model_id",
    "model_type",
    "family",
    "trt_version",
    "trt_abi",
    "gpu_name",
    "created_at",
    "precision",
    "runtime_strategy",
    "io_map",
)


def fresh_sample(dest: Path) -> Path:
    """Copy the sample's sources and run its make_checkpoint.py (deterministic: the commit trtls.toml pins)."""
    shutil.copytree(SAMPLE, dest, ignore=shutil.ignore_patterns(*GENERATED))
    r = subprocess.run([sys.executable, "make_checkpoint.py"], cwd=dest, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert COMMIT in r.stdout
    return dest


def copy_sample(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest, symlinks=True)  # cache snapshots are relative symlinks into blobs/
    return dest


def trtls(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trtls.cli.main", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def set_previous_bundle(root: Path, rel: str = "releases/tiny-1.bundle") -> Path:
    """Add `previous_bundle` to the [routes.tiny] table of the copy's trtls.toml."""
    path = root / "trtls.toml"
    text = path.read_text()
    anchor = 'previous_bundle = "releases/tiny-previous.bundle"'  # the sample sets one; point it at `rel`
    assert text.count(anchor) == 1
    path.write_text(text.replace(anchor, f'previous_bundle = "{rel}"'))
    return root / rel


def change_weights(root: Path) -> str:
    """New weights in the pinned snapshot, laid out like the cache does (a new blob named by its sha256)."""
    link = root / SNAPSHOT / "model.safetensors"
    data = bytearray(link.resolve().read_bytes())
    data[-1] ^= 0x10  # last byte of the last tensor: still a sound safetensors file
    sha = hashlib.sha256(data).hexdigest()
    (root / "checkpoints/models--trtls--tiny-mlp/blobs" / sha).write_bytes(bytes(data))
    link.unlink()
    os.symlink(Path("..") / ".." / "blobs" / sha, link)
    return sha


def leftovers(root: Path) -> list[Path]:
    """Temp files an interrupted write could leave (engine temps, atomic-writer temps, rollback stashes)."""
    return [
        p for p in root.rglob("*") if ".trtls-tmp-" in p.name or p.name.endswith(".tmp") or "trtls-rollback" in p.name
    ]


def snapshot_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()} if folder.is_dir() else {}


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    return fresh_sample(tmp_path_factory.mktemp("route-sample") / "route")


# ------------------------------------------------------------------------------------------------ tests


def test_cli_builds_a_verified_bundle_with_provenance_and_sbom(sample, tmp_path):
    root = copy_sample(sample, tmp_path / "route")
    (root / "model.onnx").unlink()  # the route build exports it from the checkpoint (the recipe names the path)
    r = trtls("route", "build", "--route", "tiny", cwd=root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "▶ Building engine" in r.stdout and "tiny: built in" in r.stdout  # the live phase tree (plain view)
    # the exporter is the sample's make_onnx.py generalised: same bytes for the same weights
    assert (root / "model.onnx").read_bytes() == (sample / "model.onnx").read_bytes()

    bundle = root / "build" / "tiny.bundle"
    assert verify_bundle(bundle) == []
    b = read_bundle(bundle)
    # the tokenizer files ride along under their own names (issue 20: what the deployment loads)
    assert list(b.sections) == ["engine", "model.onnx", "config.json", "tokenizer.json", "tokenizer_config.json"]
    assert b.read_section("config.json") == (root / SNAPSHOT / "config.json").read_bytes()
    assert b.read_section("tokenizer.json") == (root / SNAPSHOT / "tokenizer.json").read_bytes()
    assert b.read_section("model.onnx") == (root / "model.onnx").read_bytes()
    assert b.section_sha256("engine") == sha256(root / "build" / "tiny.engine")
    h = b.header
    assert all(h.get(k) not in (None, "") for k in HEADER_FIELDS), {k: h.get(k) for k in HEADER_FIELDS}
    assert h["model_id"] == "trtls/tiny-mlp" and h["model_type"] == "tiny-mlp" and h["precision"] == "fp32"
    assert h["io_map"]["inputs"]["input"]["profile"] == {"min": [1, 16], "opt": [4, 16], "max": [8, 16]}
    assert h["io_map"]["outputs"]["logits"]["shape"] == ["batch", 4]

    # provenance: the build evidence and gate 1's view of the checkpoint
    rb = json.loads((root / ".trtls" / "routes" / "tiny" / "route-build.json").read_text())
    summary = json.loads(Path(rb["build_summary_path"]).read_text())
    assert summary["outcome"] == "built"
    prov = h["trtls"]["provenance"]
    assert h["trt_version"] == summary["tensorrtVersion"] == prov["builder_version"]
    assert h["gpu_name"] == (summary["environment"].get("device_name") or "none (AOT CPU build)")
    assert prov["build_config_hash"] == summary["buildConfigHash"] and prov["build_id"] == summary["buildId"]
    assert prov["engine_sha256"] == summary["engineArtifact"]["sha256"]
    loaded = load_recipe(root / "trtls.toml")
    g1 = check_checkpoint(loaded, "tiny", route_model(loaded, "tiny"), use_digest_cache=False)
    assert prov["checkpoint_commit"] == g1.record["commit"] == COMMIT
    assert prov["checkpoint_files_sha256"] == g1.record["files_digest"] == files_digest(g1.files)
    assert rb["bundle_digest"] == f"sha256:{sha256(bundle)}"

    side = json.loads(sidecar_path(bundle).read_text())
    assert side["file_sha256"] == sha256(bundle) and side["provenance"] == prov
    sbom = json.loads(sbom_path(bundle).read_text())
    assert sbom["bomFormat"] == "CycloneDX" and sbom["specVersion"] == "1.5"
    assert sbom["metadata"]["component"]["hashes"][0]["content"] == sha256(bundle)
    refs = {c["bom-ref"]: c for c in sbom["components"]}
    assert refs["checkpoint"]["version"] == COMMIT
    assert {c["name"] for c in refs["checkpoint"]["components"]} == set(g1.files)
    assert refs["engine"]["hashes"][0]["content"] == prov["engine_sha256"]
    assert refs["builder"]["version"] == summary["tensorrtVersion"]
    assert refs["checkpoint"]["licenses"][0]["license"]["name"] == "apache-2.0"
    assert leftovers(root) == []


def test_existing_bundle_is_kept_as_previous_once(sample, tmp_path):
    root = copy_sample(sample, tmp_path / "route")
    previous = set_previous_bundle(root)
    first = asyncio.run(build_route(root / "trtls.toml", "tiny"))
    assert first.ok and not previous.exists()  # nothing to keep on the first build
    bundle = root / "build" / "tiny.bundle"
    first_bytes, first_side = bundle.read_bytes(), sidecar_path(bundle).read_bytes()

    second = asyncio.run(build_route(root / "trtls.toml", "tiny"))
    assert second.ok and second.previous_kept
    assert previous.read_bytes() == first_bytes and verify_bundle(previous) == []
    kept_side = json.loads(sidecar_path(previous).read_text())
    assert kept_side["file_sha256"] == json.loads(first_side)["file_sha256"] and kept_side["bundle"] == previous.name
    assert sbom_path(previous).is_file()

    asyncio.run(build_route(root / "trtls.toml", "tiny"))  # an existing previous bundle is never overwritten
    assert previous.read_bytes() == first_bytes


def test_cancelled_build_leaves_bundle_and_previous_untouched(sample, tmp_path):
    root = copy_sample(sample, tmp_path / "route")
    previous = set_previous_bundle(root)
    assert asyncio.run(build_route(root / "trtls.toml", "tiny")).ok
    before = snapshot_files(root / "build")
    assert {"tiny.bundle", "tiny.bundle.trtls.json", "tiny.bundle.cdx.json", "tiny.engine"} <= set(before)

    def on_build(build):
        def first_phase(b, ev):
            if ev is not None and ev.type == "phase_start" and ev.phase_id == "0":
                b.token.request("api")

        build.listeners.append(first_phase)

    # the worker holds its first phase (acceptance-test fault) so the cancel lands inside it, not after the build
    result = asyncio.run(
        build_route(root / "trtls.toml", "tiny", on_build=on_build, faults={"stall": {"at_phase": 1, "seconds": 3}})
    )
    assert result.outcome == "cancelled" and result.cancel_source == "api", result.message
    assert result.bundle_digest is None and "not touched" in result.message
    assert snapshot_files(root / "build") == before  # bundle, sidecar, SBOM and engine byte-identical
    assert not previous.exists()
    assert leftovers(root) == []
    rb = json.loads((root / ".trtls" / "routes" / "tiny" / "route-build.json").read_text())
    assert rb["outcome"] == "cancelled"


def test_unknown_model_type_is_refused_before_any_build(tmp_path):
    ck = tmp_path / "ck"
    ck.mkdir()
    (ck / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    (ck / "tokenizer.json").write_text("{}")
    (tmp_path / "trtls.toml").write_text(
        '[engines.e]\nonnx = "m.onnx"\noutput = "out/e.engine"\n\n[routes.r]\nengine = "e"\n'
        f'checkpoint = {{ path = "ck", revision = "{"a" * 40}" }}\nintended_use = "tests"\nallowed_licenses = '
        '["mit"]\nbundle = "out/r.bundle"\n'
    )
    with pytest.raises(RouteBuildError, match="no ONNX exporter for model_type 'gpt2'"):
        asyncio.run(build_route(tmp_path / "trtls.toml", "r"))
    assert not (tmp_path / "out").exists() and not (tmp_path / ".trtls" / "runs").exists()
    r = trtls("route", "build", "--route", "r", cwd=tmp_path)
    assert r.returncode == 2 and "no ONNX exporter" in r.stderr


def test_a_lying_safetensors_header_is_a_located_error_and_the_run_is_recorded(sample, tmp_path):
    import struct

    root = copy_sample(sample, tmp_path / "route")
    link = root / SNAPSHOT / "model.safetensors"
    header = json.dumps({"fc1.weight": {"dtype": "F32", "shape": [64, 64], "data_offsets": [0, 16]}}).encode()
    data = struct.pack("<Q", len(header)) + header + b"\0" * 16
    blob = root / "checkpoints/models--trtls--tiny-mlp/blobs" / hashlib.sha256(data).hexdigest()
    blob.write_bytes(data)
    link.unlink()
    os.symlink(Path("..") / ".." / "blobs" / blob.name, link)
    r = trtls("route", "build", "--route", "tiny_ort", cwd=root)
    assert r.returncode == 4, r.stdout + r.stderr  # gate 1's content checks run first and reject (issue 20)
    assert "Traceback" not in r.stderr and "SafetensorError" not in r.stderr
    assert (
        "trtls.toml:" in r.stderr and "F32 × shape [64, 64] is 16384 bytes but data_offsets [0, 16] span 16" in r.stderr
    )
    assert "gate 1 refuses the checkpoint (nothing exported or written" in r.stderr
    assert not (root / "build" / "tiny_ort.bundle").exists() and not (root / "build" / "tiny_ort.onnx").exists()


def test_onnx_route_bundle_carries_the_onnx_and_no_engine(sample, tmp_path):
    root = copy_sample(sample, tmp_path / "route")
    r = trtls("route", "build", "--route", "tiny_ort", cwd=root)
    assert r.returncode == 0, r.stdout + r.stderr
    bundle = read_bundle(root / "build" / "tiny_ort.bundle")
    assert set(bundle.sections) == {"model.onnx", "config.json", "tokenizer.json", "tokenizer_config.json"}
    assert bundle.read_section("model.onnx") == (root / "build" / "tiny_ort.onnx").read_bytes()
    assert not (root / ".trtls" / "runs").exists()  # no engine build
    assert verify_bundle(root / "build" / "tiny_ort.bundle") == []


def test_checkpoint_symlink_out_of_the_checkpoint_is_never_followed(sample, tmp_path):
    root = copy_sample(sample, tmp_path / "route")
    outside = tmp_path / "secret.json"
    outside.write_text("{}")
    os.symlink(outside, root / SNAPSHOT / "extra.json")
    with pytest.raises(RouteBuildError, match="outside the checkpoint"):
        asyncio.run(build_route(root / "trtls.toml", "tiny"))
    assert not (root / "build" / "tiny.bundle").exists()
