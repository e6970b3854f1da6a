"""The route sample from nothing to `supported` on this CPU machine, through the real CLI (samples/route/run_sample.sh):

make_checkpoint.py → `trtls route build --route tiny` twice (the first bundle becomes the rollback target) →
`trtls gates --route tiny --record-baseline` (hold: no baseline yet) → `trtls gates --route tiny` (supported).
Real TensorRT-RTX engine build, real onnxruntime / onnx.reference runs. Then each variant fails its stated gate.
One sample (one build) per module; tests that change files work on copies.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from test_route_build import COMMIT, SNAPSHOT, copy_sample, fresh_sample, sha256, trtls

SUMMARY_FIELDS = (
    "route_name",
    "checkpoint_revision",
    "bundle_digest",
    "runtime_target",
    "validation_status",
    "canary_status",
    "rollback_status",
)


class Ran:
    def __init__(self, root: Path, proc: subprocess.CompletedProcess):
        self.root, self.proc = root, proc
        self.summary = json.loads((root / ".trtls" / "routes" / "tiny" / "summary.json").read_text())


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> Ran:
    root = fresh_sample(tmp_path_factory.mktemp("sample-supported") / "route")
    for p in ("build", "releases", ".trtls", "trtls.lock.json"):
        assert not (root / p).exists(), p  # nothing built, locked or recorded yet
    env = dict(os.environ, PYTHON=sys.executable)
    proc = subprocess.run(["bash", "run_sample.sh"], cwd=root, capture_output=True, text=True, timeout=900, env=env)
    return Ran(root, proc)


def _checks(summary: dict, gate: int) -> list[dict]:
    return summary["gates"][str(gate)]["checks"]


# ------------------------------------------------------------------------------------------- supported


def test_sample_script_ends_supported_with_every_gate_passed(ran):
    out, err = ran.proc.stdout, ran.proc.stderr
    assert ran.proc.returncode == 0, out[-4000:] + err[-4000:]
    s = ran.summary
    assert s["decision"] == "supported" and s["gates_decision"] == "supported" and s["gates_run"] == [1, 2, 3, 4, 5]
    for gate in ("1", "2", "3", "4", "5"):
        assert s["gates"][gate]["status"] == "pass", gate
        assert s["gates"][gate]["checks"], gate
        assert [c for c in s["gates"][gate]["checks"] if c["status"] != "pass"] == [], gate
    names = {c["name"] for g in s["gates"].values() for c in g["checks"]}
    # the checks that used to hold on this machine, and the tokenizer parity the route now asks for
    assert {
        "release.baseline",
        "release.rollback",
        "release.canary",
        "parity.tokenizer",
        "parity.tolerance:logits",
    } <= names
    assert out.rstrip().splitlines()[-2].startswith("note: the TensorRT engine was built and bundled")
    assert "decision: supported" in out


def test_record_baseline_run_held_only_on_the_missing_baseline(ran):
    # the script's first gates run (--record-baseline): everything passed but TRT906, then the baseline was written
    first = ran.proc.stdout.split("route tiny\n")[1]
    held = [line for line in first.splitlines() if line.lstrip().startswith(("HOLD", "REJECT"))]
    assert len(held) == 1 and "TRT906 release.baseline: no stored baseline" in held[0]
    assert "decision: hold" in first
    assert f"baseline recorded: {ran.root / '.trtls/routes/tiny/baseline.json'}" in ran.proc.stderr
    baseline = json.loads((ran.root / ".trtls" / "routes" / "tiny" / "baseline.json").read_text())
    assert baseline["format"] == "trtls.release-baseline/1" and baseline["route"] == "tiny"
    assert baseline["measurement"]["iterations"] == 1000 and baseline["measurement"]["p95_ms"] > 0
    assert baseline["bundle_sha256"] == sha256(ran.root / "build" / "tiny.bundle")  # recorded on this bundle
    # the final run compared against it
    check = next(c for c in _checks(ran.summary, 5) if c["name"] == "release.baseline")
    assert check["evidence"]["baseline_recorded_at"] == baseline["recorded_at"]


def test_route_summary_says_what_was_proven(ran):
    s, root = ran.summary, ran.root
    for key in SUMMARY_FIELDS:
        assert s.get(key), key
    assert s["route_name"] == "tiny" and s["checkpoint_revision"] == COMMIT
    assert s["bundle_digest"] == f"sha256:{sha256(root / 'build' / 'tiny.bundle')}"
    assert s["runtime_target"] == f"onnxruntime:{root / 'model.onnx'}" and s["reference_runtime"] == "onnx.reference"
    assert s["validation_status"] == "pass" and s["canary_status"] == "pass" and s["rollback_status"] == "tested"
    # plainly: the engine was built and bundled, not executed
    assert s["engine_executed"] is False
    assert "built and bundled" in s["runtime_note"] and "not executed" in s["runtime_note"]
    if not (s["environment"] or {}).get("gpu_name"):
        assert "no GPU TensorRT accepts" in s["runtime_note"]
    assert "baseline" not in s  # the final run was a normal run: it recorded nothing


def test_rollback_target_is_the_first_bundle(ran):
    root = ran.root
    previous, bundle = root / "releases" / "tiny-previous.bundle", root / "build" / "tiny.bundle"
    assert previous.is_file() and previous.read_bytes() != bundle.read_bytes()
    drill = next(c for c in _checks(ran.summary, 5) if c["name"] == "release.rollback")
    ev = drill["evidence"]
    assert ev["previous_sha256"] == sha256(previous) and ev["final_sha256"] == ev["new_sha256"] == sha256(bundle)
    assert not list(root.rglob("*trtls-rollback*"))


def test_sarif_and_junit_written_beside_the_summary(ran):
    folder = ran.root / ".trtls" / "routes" / "tiny"
    sarif = json.loads((folder / "report.sarif").read_text())
    assert sarif["version"] == "2.1.0"
    assert [r for r in sarif["runs"][0]["results"] if r.get("level") in ("error", "warning")] == []
    suites = ET.parse(folder / "junit.xml").getroot()
    cases = suites.findall(".//testcase")
    assert len(cases) == sum(len(g["checks"]) for g in ran.summary["gates"].values())
    assert not suites.findall(".//failure") and not suites.findall(".//error") and not suites.findall(".//skipped")


# ------------------------------------------------------------------------------------------ baseline


def test_a_normal_run_never_records_a_baseline(ran, tmp_path):
    root = copy_sample(ran.root, tmp_path / "route")
    (root / ".trtls" / "routes" / "tiny" / "baseline.json").unlink()
    r = trtls("gates", "--route", "tiny", "--format", "json", cwd=root)
    assert r.returncode == 3, r.stderr
    s = json.loads(r.stdout)
    held = [c for g in s["gates"].values() for c in g["checks"] if c["status"] != "pass"]
    assert [(c["code"], c["status"]) for c in held] == [("TRT906", "hold")]
    assert not (root / ".trtls" / "routes" / "tiny" / "baseline.json").exists()
    assert "baseline" not in r.stderr


def test_record_baseline_refused_for_a_rejected_route(ran):
    r = trtls("gates", "--route", "perturbed", "--record-baseline", cwd=ran.root)
    assert r.returncode == 4, r.stdout + r.stderr
    assert "baseline not recorded: the gates rejected the route" in r.stderr
    assert not (ran.root / ".trtls" / "routes" / "perturbed" / "baseline.json").exists()
    s = json.loads((ran.root / ".trtls" / "routes" / "perturbed" / "summary.json").read_text())
    assert s["baseline"]["recorded"] is False


def test_record_baseline_needs_gate_5(ran):
    r = trtls("gates", "--route", "tiny", "--gate", "1", "--record-baseline", cwd=ran.root)
    assert r.returncode == 2 and "--record-baseline needs gate 5" in r.stderr


# ----------------------------------------------------------------------------------------- tokenizer


def test_tokenizer_parity_rejects_a_checkpoint_tokenizer_the_bundle_does_not_carry(ran, tmp_path):
    root = copy_sample(ran.root, tmp_path / "route")
    link = root / SNAPSHOT / "tokenizer.json"
    tok = json.loads(link.resolve().read_text())
    vocab = tok["model"]["vocab"]
    vocab["engine"], vocab["model"] = vocab["model"], vocab["engine"]  # same words, two ids swapped
    data = (json.dumps(tok, indent=2) + "\n").encode()
    blob = (
        root / "checkpoints/models--trtls--tiny-mlp/blobs" / hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    )
    blob.write_bytes(data)
    link.unlink()
    os.symlink(Path("..") / ".." / "blobs" / blob.name, link)
    r = trtls("gates", "--route", "tiny", "--gate", "4", "--format", "json", cwd=root)
    assert r.returncode == 4, r.stderr
    check = next(c for c in json.loads(r.stdout)["gates"]["4"]["checks"] if c["name"] == "parity.tokenizer")
    assert check["status"] == "reject" and check["code"] == "TRT806"
    assert check["evidence"] == {"text_index": 0, "position": 1, "duration_s": check["evidence"]["duration_s"]}
    assert check["path"] == ["routes", "tiny", "tokenizer_texts"]


@pytest.mark.parametrize(("value", "says"), [("[]", "at least 1 item"), ("[1, 2]", "valid string")])
def test_tokenizer_texts_is_validated_where_it_is_written(ran, tmp_path, value, says):
    root = copy_sample(ran.root, tmp_path / "route")
    toml = root / "trtls.toml"
    text = toml.read_text()
    line = next(line for line in text.splitlines() if line.startswith("tokenizer_texts = "))
    toml.write_text(text.replace(line, f"tokenizer_texts = {value}"))
    r = trtls("gates", "--route", "tiny", "--gate", "1", cwd=root)
    assert r.returncode == 2
    lineno = text.splitlines().index(line) + 1
    assert f"trtls.toml:{lineno}:" in r.stderr and says in r.stderr, r.stderr


# ------------------------------------------------------------------------------------------ variants


@pytest.mark.parametrize(
    ("route", "gate", "code", "status", "exit_code", "says"),
    [
        ("unpinned", 1, "TRT501", "hold", 3, "main"),
        ("pickle", 1, "TRT509", "reject", 4, "pytorch_model.bin"),
        ("license", 1, "TRT507", "reject", 4, "apache-2.0"),
        ("wrong_env", 2, "TRT602", "hold", 3, "9.9"),
        ("perturbed", 4, "TRT805", "reject", 4, "elemwise check failed"),
    ],
)
def test_each_variant_fails_its_stated_gate(ran, route, gate, code, status, exit_code, says):
    r = trtls("gates", "--route", route, "--format", "json", cwd=ran.root)
    assert r.returncode == exit_code, r.stderr
    s = json.loads(r.stdout)
    assert s["decision"] == status
    for earlier in range(1, gate):
        assert s["gates"][str(earlier)]["status"] == "pass", (route, earlier)
    assert s["gates"][str(gate)]["status"] == status
    failing = [c for c in _checks(s, gate) if c["code"] == code and c["status"] == status]
    assert failing and says in failing[0]["message"], _checks(s, gate)
    if route == "perturbed":
        ev = failing[0]["evidence"]  # the statistic that failed, named and recorded
        assert ev["check_error_stat"] == "elemwise" and ev["stats"]["max_abs"] > ev["atol"] == 1e-5
        assert "TRT809" in [c["code"] for c in _checks(s, 4) if c["status"] == "hold"]  # fault injection is named
        assert s["validation_status"] == "reject"
