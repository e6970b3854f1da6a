from __future__ import annotations

import hashlib
import json
import platform

from _route_helpers import by_name, load, route_table, write_recipe

from trtls.builds.build_facts import build_config_hash
from trtls.core.gate_result import apply_waivers, decide
from trtls.core.route import route_model
from trtls.gates.environment import check_environment
from trtls.gates.environment_probe import installed_builders, version_matches

COMMIT = "a" * 40


def _loaded(tmp_path, env: str = ""):
    (tmp_path / "ck").mkdir(exist_ok=True)
    extra = f"environment = {{ {env} }}\n" if env else ""
    return load(write_recipe(tmp_path, route_table("ck", COMMIT, extra=extra)))


def _record_build(loaded, build_id="b1", started=1.0, outcome="built", env=None):
    """A build's evidence as the supervisor writes it (summary.json under .trtls/runs/<id>/)."""
    eng = loaded.engine("e")
    out = loaded.resolve(eng.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(b"engine-bytes")
    env = env or {"module": "tensorrt_rtx", "version": "1.7.1.116", "device_name": None}
    effective = {"optimization_level": 3}
    profiles = eng.job_profiles()
    summary = {
        "buildId": build_id,
        "engine": "e",
        "outcome": outcome,
        "startedAt": started,
        "buildConfigHash": build_config_hash(loaded.resolve(eng.onnx), effective, profiles, env),
        "effectiveSettings": effective,
        "timingCacheMode": "cold",
        "timingCache": {"decision": "cold", "reason": "no timing cache configured"},
        "environment": env,
        "engineArtifact": {
            "action": "written",
            "kind": "engine",
            "path": str(out),
            "sha256": hashlib.sha256(b"engine-bytes").hexdigest(),
        },
    }
    d = loaded.base_dir / ".trtls" / "runs" / build_id
    d.mkdir(parents=True, exist_ok=True)
    (d / "summary.json").write_text(json.dumps(summary))
    return summary


def test_version_prefix_rule():
    assert (
        version_matches("10.3", "10.3.0.26")
        and not version_matches("10.3", "10.30.1")
        and not version_matches("9.9", "1.7.1")
    )


def test_discovery_does_not_import_tensorrt():
    """In a fresh interpreter: this test process may already hold tensorrt_rtx from the build tests."""
    import json
    import subprocess
    import sys

    code = (
        "import json, sys\n"
        "from trtls.gates.environment_probe import discover_environment\n"
        "env = discover_environment()\n"
        "print(json.dumps({'env': env, 'loaded': sorted(m for m in ('tensorrt', 'tensorrt_rtx') if m in sys.modules)}, "
        "default=str))\n"
    )
    out = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    env = out["env"]
    assert out["loaded"] == []
    assert env["python"] == platform.python_version()
    assert env["builders"] and all({"module", "version", "distribution"} <= set(b) for b in env["builders"])


def test_no_build_evidence_holds(tmp_path):
    loaded = _loaded(tmp_path)
    res = check_environment(loaded, "r", route_model(loaded, "r"))
    c = by_name(res.checks, "build_evidence")
    assert (c.status, c.code) == ("hold", "TRT607")
    assert by_name(res.checks, "recipe").status == "pass"
    assert res.record["effective_settings"]["settings"]["optimization_level"] == 3
    assert decide(res.checks) == "hold"


def test_latest_successful_build_is_linked(tmp_path):
    loaded = _loaded(tmp_path)
    _record_build(loaded, "old", started=1.0)
    s = _record_build(loaded, "new", started=2.0)
    d = loaded.base_dir / ".trtls" / "runs" / "failed"
    d.mkdir(parents=True)
    (d / "summary.json").write_text(json.dumps({**s, "buildId": "failed", "outcome": "failed", "startedAt": 3.0}))
    res = check_environment(loaded, "r", route_model(loaded, "r"))
    c = by_name(res.checks, "build_evidence")
    assert c.status == "pass", c.message
    assert c.evidence["buildId"] == "new" and c.evidence["buildConfigHash"] == s["buildConfigHash"]
    assert res.evidence["timingCacheMode"] == "cold"


def test_changed_onnx_or_engine_makes_evidence_stale(tmp_path):
    loaded = _loaded(tmp_path)
    _record_build(loaded)
    loaded.resolve("m.onnx").write_bytes(b"other onnx")
    c = by_name(check_environment(loaded, "r", route_model(loaded, "r")).checks, "build_evidence")
    assert c.status == "hold" and "buildConfigHash differs" in c.message
    loaded.resolve("m.onnx").write_bytes(b"onnx")
    loaded.resolve("out/e.engine").write_bytes(b"tampered")
    c = by_name(check_environment(loaded, "r", route_model(loaded, "r")).checks, "build_evidence")
    assert c.status == "hold" and "engine file changed" in c.message


def test_builder_version_mismatch_holds_with_both_values(tmp_path):
    loaded = _loaded(tmp_path, 'builder_module = "tensorrt_rtx", builder_version = "9.9"')
    _record_build(loaded)
    res = check_environment(loaded, "r", route_model(loaded, "r"))
    c = by_name(res.checks, "builder_version")
    assert (c.status, c.code) == ("hold", "TRT602")
    assert "9.9" in c.message and "1.7.1.116" in c.message
    assert c.path == ("routes", "r", "environment", "builder_version")


def test_matching_pins_pass(tmp_path):
    py = ".".join(platform.python_version_tuple()[:2])
    loaded = _loaded(tmp_path, f'builder_module = "tensorrt_rtx", builder_version = "1.7", python = "{py}"')
    _record_build(loaded)
    res = check_environment(loaded, "r", route_model(loaded, "r"))
    for name in ("builder", "builder_version", "python", "build_evidence"):
        assert by_name(res.checks, name).status == "pass", by_name(res.checks, name).message
    # what the route leaves unpinned was compared with nothing: not_checked, which holds unless waived
    unpinned = {c.name for c in res.checks if c.status == "not_checked"}
    assert unpinned == {"cuda_driver", "gpu_name"}
    assert decide(res.checks) == "hold"
    if not any(b["module"] == "tensorrt_rtx" for b in installed_builders()):
        return  # evidence alone still proves the builder
    apply_waivers(res.checks, {"cuda_driver": "AOT build, any driver", "gpu_name": "sample runs on any RTX GPU"})
    assert decide(res.checks) == "supported"


def test_nothing_pinned_is_not_checked_never_pass(tmp_path):
    loaded = _loaded(tmp_path)
    _record_build(loaded)
    res = check_environment(loaded, "r", route_model(loaded, "r"))
    for name in ("builder_module", "builder_version", "python", "cuda_driver", "gpu_name"):
        c = by_name(res.checks, name)
        assert c.status == "not_checked" and "not pinned" in c.message, (name, c.status)
    assert not any(c.name == "builder" and c.status == "pass" for c in res.checks)
    assert decide(res.checks) == "hold"


def test_python_and_gpu_pins_hold_when_different_or_unknown(tmp_path):
    loaded = _loaded(tmp_path, 'python = "2.7", compute_capability = "SM89"')
    res = check_environment(loaded, "r", route_model(loaded, "r"))
    c = by_name(res.checks, "python")
    assert c.status == "hold" and platform.python_version() in c.message
    cc = by_name(res.checks, "compute_capability")
    if res.environment.get("compute_capability") is None:
        assert cc.status == "hold" and "could not be discovered" in cc.message
    else:
        assert cc.status in ("hold", "pass")


def test_builder_module_pin_mismatch_holds(tmp_path):
    loaded = _loaded(tmp_path, 'builder_module = "tensorrt"')
    _record_build(loaded)  # built with tensorrt_rtx
    c = by_name(check_environment(loaded, "r", route_model(loaded, "r")).checks, "builder")
    if any(b["module"] == "tensorrt" for b in installed_builders()):
        assert c.status == "pass"
    else:
        assert (c.status, c.code) == ("hold", "TRT601") and "tensorrt_rtx" in c.message
