from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _route_helpers import checkpoint_files, load, make_folder, route_table, write_recipe

from trtls.gates.run import run_gates

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "samples" / "route"
COMMIT = "c" * 40


def _setup(tmp_path, **kw):
    make_folder(tmp_path / "ck", checkpoint_files(**kw))
    return load(write_recipe(tmp_path, route_table("ck", COMMIT)))


def test_gates_run_in_order_with_progress_and_never_pass_what_did_not_run(tmp_path):
    loaded = _setup(tmp_path)
    seen = []
    res = run_gates(loaded, "r", progress=lambda g, t: seen.append(g))
    assert seen == [1, 2, 3, 4, 5]
    assert res.decision == "hold"  # gate 2 has no build evidence here
    for gate in (3, 4, 5):
        assert res.gate_status(gate) in ("hold", "reject")
    s = json.loads((tmp_path / ".trtls" / "routes" / "r" / "summary.json").read_text())
    for key in (
        "route_name",
        "checkpoint_revision",
        "bundle_digest",
        "runtime_target",
        "validation_status",
        "canary_status",
        "rollback_status",
    ):
        assert key in s
    assert s["route_name"] == "r" and s["checkpoint_revision"] == COMMIT and s["decision"] == "hold"
    assert [c["name"] for c in s["gates"]["1"]["checks"]][0] == "revision_pinned"
    assert all(f.origin.value == "gates" for f in res.findings)


def test_selected_gate_and_cancel(tmp_path, monkeypatch):
    make_folder(tmp_path / "ck", checkpoint_files())
    waiver = 'waive = { "revision_verified" = "vendored folder: its identity is the lock" }\n'
    loaded = load(write_recipe(tmp_path, route_table("ck", COMMIT, extra=waiver)))
    from trtls.checkpoint.lock import lock_route

    lock_route(loaded, "r")
    res = run_gates(loaded, "r", gates=[1])
    assert {c.gate for c in res.checks} == {1}
    assert res.gates_decision == "supported" and res.decision == "hold"  # a route needs all five gates
    # cancel as soon as gate 1 has returned: gate 2 must not start
    import trtls.gates.run as run_module

    done: list[bool] = []
    real = run_module.check_checkpoint
    monkeypatch.setattr(run_module, "check_checkpoint", lambda *a, **k: (real(*a, **k), done.append(True))[0])
    res = run_gates(loaded, "r", cancel=lambda: bool(done))
    assert res.cancelled and {c.gate for c in res.checks} == {1} and res.decision == "hold"


def test_reject_anywhere_rejects_the_route(tmp_path):
    loaded = _setup(tmp_path, license="proprietary")
    res = run_gates(loaded, "r")
    assert res.decision == "reject"
    f = next(f for f in res.findings if f.code == "TRT507")
    assert f.severity.value == "error" and loaded.location(f).startswith(str(loaded.path))


def test_reports_written_beside_the_summary(tmp_path):
    loaded = _setup(tmp_path)
    run_gates(loaded, "r")
    d = tmp_path / ".trtls" / "routes" / "r"
    sarif = json.loads((d / "report.sarif").read_text())
    assert sarif["version"] == "2.1.0" and sarif["runs"][0]["results"]
    assert "<testsuites" in (d / "junit.xml").read_text()


def _trtls(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "trtls.cli.main", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    dest = tmp_path_factory.mktemp("sample") / "route"
    shutil.copytree(
        SAMPLE,
        dest,
        ignore=shutil.ignore_patterns(
            "checkpoints", "inputs", "build", ".trtls", "trtls.lock.json", "model.onnx", "__pycache__"
        ),
    )
    r = subprocess.run([sys.executable, "make_checkpoint.py"], cwd=dest, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "d065c296e0fef52b015f4755c02dda4b3064c1d2" in r.stdout  # deterministic: trtls.toml pins this commit
    return dest


@pytest.mark.parametrize(
    ("route", "gate", "code", "exit_code"),
    [
        ("unpinned", 1, "TRT501", 3),
        ("pickle", 1, "TRT509", 4),
        ("license", 1, "TRT507", 4),
        ("wrong_env", 2, "TRT602", 3),
    ],
)
def test_sample_variants_through_the_cli(sample, route, gate, code, exit_code):
    r = _trtls("gates", "--route", route, "--format", "json", cwd=sample)
    assert r.returncode == exit_code, r.stderr
    s = json.loads(r.stdout)
    failing = [c for c in s["gates"][str(gate)]["checks"] if c["status"] != "pass"]
    assert code in [c["code"] for c in failing]
    assert s["decision"] != "supported"


def test_sample_tiny_gate1_passes_and_route_is_not_supported_without_proof(sample):
    r = _trtls("gates", "--route", "tiny", "--gate", "1", cwd=sample)
    assert r.returncode == 3 and "trtls route lock --route tiny" in r.stdout  # not locked yet: hold
    assert _trtls("route", "lock", "--route", "tiny", cwd=sample).returncode == 0
    r = _trtls("gates", "--route", "tiny", "--gate", "1", cwd=sample)
    assert r.returncode == 0, r.stdout + r.stderr
    r = _trtls("gates", "--route", "tiny", "--format", "junit", "--output", "junit.xml", cwd=sample)
    assert r.returncode in (0, 3, 4)
    s = json.loads((sample / ".trtls" / "routes" / "tiny" / "summary.json").read_text())
    assert s["gates"]["1"]["status"] == "pass"
    if s["build_evidence"] is None:
        assert r.returncode == 3 and s["decision"] == "hold"
    assert "<testsuites" in (sample / "junit.xml").read_text()


def test_sample_tampered_weights_are_rejected_through_the_cli(sample, tmp_path):
    dest = tmp_path / "route"
    shutil.copytree(sample, dest, symlinks=True)
    assert _trtls("route", "lock", "--route", "tiny", cwd=dest).returncode == 0
    assert _trtls("gates", "--route", "tiny", "--gate", "1", cwd=dest).returncode == 0
    blob = (
        dest
        / "checkpoints/models--trtls--tiny-mlp/snapshots/d065c296e0fef52b015f4755c02dda4b3064c1d2/model.safetensors"
    ).resolve()
    data = bytearray(blob.read_bytes())
    data[-1] ^= 0x10
    blob.write_bytes(bytes(data))
    r = _trtls("gates", "--route", "tiny", "--gate", "1", "--format", "json", cwd=dest)
    assert r.returncode == 4
    checks = {c["name"]: c for c in json.loads(r.stdout)["gates"]["1"]["checks"]}
    assert checks["lock"]["status"] == "reject" and checks["lock"]["evidence"]["changed"] == ["model.safetensors"]


def test_cli_bad_input_exit_2_with_location(tmp_path):
    (tmp_path / "ck").mkdir()
    write_recipe(tmp_path, route_table("ck", COMMIT).replace('engine = "e"', 'engine = "nope"'))
    r = _trtls("gates", "--route", "r", cwd=tmp_path)
    assert r.returncode == 2
    assert "trtls.toml:6:10: TRT107" in r.stderr
    r = _trtls("gates", "--route", "missing", cwd=SAMPLE if (SAMPLE / "checkpoints").is_dir() else tmp_path)
    assert r.returncode == 2
