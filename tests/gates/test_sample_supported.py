"""The route sample through the real CLI (samples/route/run_sample.sh), on this CPU machine:

make_checkpoint.py → `trtls route lock` → `trtls route build` twice per route (the first bundle becomes the rollback
target) → `trtls gates --route tiny_ort --record-baseline` (hold: no baseline yet) → `trtls gates --route tiny` (hold:
the TensorRT engine it deploys cannot run here) → `trtls gates --route tiny_ort` (supported: every check ran).
Real TensorRT-RTX engine build, real onnxruntime runs, a numpy reference from the checkpoint. Then each variant
fails its stated gate. One sample (one build) per module; tests that change files work on copies.
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
    "canary_inputs_status",
    "rollback_status",
)
NO_GPU = "no GPU that TensorRT accepts on this machine"


class Ran:
    def __init__(self, root: Path, proc: subprocess.CompletedProcess):
        self.root, self.proc = root, proc
        self.summary, self.tensorrt = self.route_summary("tiny_ort"), self.route_summary("tiny")

    def route_summary(self, route: str) -> dict:
        path = self.root / ".trtls" / "routes" / route / "summary.json"
        assert path.is_file(), (
            f"run_sample.sh (exit {self.proc.returncode}) left no {path}:\n"
            f"{self.proc.stdout[-4000:]}\n--- stderr ---\n{self.proc.stderr[-4000:]}"
        )
        return json.loads(path.read_text())


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


def test_onnx_runtime_route_is_supported_because_every_check_ran(ran):
    out, err = ran.proc.stdout, ran.proc.stderr
    assert ran.proc.returncode == 0, out[-4000:] + err[-4000:]
    s = ran.summary
    assert s["decision"] == "supported" and s["gates_decision"] == "supported" and s["gates_run"] == [1, 2, 3, 4, 5]
    for gate in ("1", "2", "3", "4", "5"):
        assert s["gates"][gate]["status"] == "pass", gate
        assert [c for c in s["gates"][gate]["checks"] if c["status"] != "pass"] == [], gate
    assert s["waivers"] == {}  # nothing waived: every check measured something and passed
    names = {c["name"] for g in s["gates"].values() for c in g["checks"]}
    assert {
        "revision_verified",
        "pickle",
        "lock",
        "python",
        "onnxruntime",
        "parity.deployed_artifact",
        "parity.reference_independent",
        "parity.tolerance:logits",
        "parity.malformed",
        "release.latency",
        "release.throughput",
        "release.memory",
        "release.warmup",
        "release.build_time",
        "release.baseline",
        "release.canary",
        "release.rollback",
    } <= names
    assert s["deployed_artifact_executed"] is True and s["engine_executed"] is False
    assert s["runtime_target"] == "onnxruntime" and s["deployed_artifact"] == "build/tiny_ort.bundle:model.onnx"
    assert "decision: supported" in out


def test_tensorrt_route_holds_with_the_plain_reason_in_every_format(ran, tmp_path):
    s = ran.tensorrt
    assert s["decision"] == "hold" and s["engine_executed"] is False
    deployed = next(c for c in _checks(s, 4) if c["name"] == "parity.deployed_artifact")
    assert deployed["status"] == "hold" and deployed["code"] == "TRT811"
    gpu = (s["environment"] or {}).get("gpu_name")
    if not gpu:
        assert NO_GPU in deployed["message"] and NO_GPU in s["runtime_note"]
        assert s["hold_reasons"][0].startswith("parity.deployed_artifact: ") and NO_GPU in s["hold_reasons"][0]
    # text (the script's own run), JSON, SARIF, JUnit: the same reason, plainly
    reason = deployed["message"]
    assert f"note: {reason}" in ran.proc.stdout
    root = ran.root
    r = trtls("gates", "--route", "tiny", "--format", "sarif", cwd=root)
    assert r.returncode == 3
    results = json.loads(r.stdout)["runs"][0]["results"]
    trt811 = next(x for x in results if x["ruleId"] == "TRT811")
    assert trt811["level"] == "warning" and trt811["message"]["text"] == reason
    r = trtls("gates", "--route", "tiny", "--format", "junit", cwd=root)
    assert r.returncode == 3
    case = next(c for c in ET.fromstring(r.stdout).iter("testcase") if c.get("name") == "parity.deployed_artifact")
    failure = case.find("failure")
    assert failure is not None and failure.get("type") == "hold" and failure.get("message") == reason


def test_record_baseline_run_held_only_on_the_missing_baseline(ran):
    # the script's first gates run (--record-baseline): everything passed but TRT906, then the baseline was written
    first = ran.proc.stdout.split("route tiny_ort\n")[1].split("route tiny\n")[0]
    held = [line for line in first.splitlines() if line.lstrip().startswith(("HOLD", "REJECT", "not checked"))]
    assert len(held) == 1 and "TRT906 release.baseline: no stored baseline" in held[0]
    assert "decision: hold" in first
    assert f"baseline recorded: {ran.root / '.trtls/routes/tiny_ort/baseline.json'}" in ran.proc.stderr
    baseline = json.loads((ran.root / ".trtls" / "routes" / "tiny_ort" / "baseline.json").read_text())
    assert baseline["format"] == "trtls.release-baseline/1" and baseline["route"] == "tiny_ort"
    assert baseline["measurement"]["iterations"] == 1000 and baseline["measurement"]["p95_ms"] > 0
    assert baseline["bundle_sha256"] == sha256(ran.root / "build" / "tiny_ort.bundle")  # recorded on this bundle
    check = next(c for c in _checks(ran.summary, 5) if c["name"] == "release.baseline")
    assert check["evidence"]["baseline_recorded_at"] == baseline["recorded_at"]


def test_route_summary_says_what_was_proven(ran):
    s, root = ran.summary, ran.root
    for key in SUMMARY_FIELDS:
        assert s.get(key), key
    assert s["route_name"] == "tiny_ort" and s["checkpoint_revision"] == COMMIT
    assert s["bundle_digest"] == f"sha256:{sha256(root / 'build' / 'tiny_ort.bundle')}"
    assert s["validation_status"] == "pass" and s["canary_inputs_status"] == "pass" and s["rollback_status"] == "tested"
    assert s["canary_status"] == "not_started"  # the ledger's: never promoted, no canary ran (a smoke run is not one)
    assert s["record"]["reference"]["reference"] == "checkpoint" and s["record"]["reference"]["family"] == "tiny-mlp"
    assert "baseline" not in s  # the final run was a normal run: it recorded nothing


def test_rollback_target_is_the_first_bundle_and_the_drill_ran_on_copies(ran):
    root = ran.root
    previous, bundle = root / "releases" / "tiny_ort-previous.bundle", root / "build" / "tiny_ort.bundle"
    assert previous.is_file() and previous.read_bytes() != bundle.read_bytes()
    drill = next(c for c in _checks(ran.summary, 5) if c["name"] == "release.rollback")
    ev = drill["evidence"]
    assert ev["previous_sha256"] == sha256(previous) and ev["final_sha256"] == ev["new_sha256"] == sha256(bundle)
    assert not str(ev["active"]).startswith(str(root))  # a copy in a scratch folder, never the live bundle
    assert not list(root.rglob("*trtls-rollback*"))


def test_sarif_and_junit_written_beside_the_summary(ran):
    folder = ran.root / ".trtls" / "routes" / "tiny_ort"
    sarif = json.loads((folder / "report.sarif").read_text())
    assert sarif["version"] == "2.1.0"
    assert sarif["runs"][0]["results"] == []
    suites = ET.parse(folder / "junit.xml").getroot()
    cases = suites.findall(".//testcase")
    assert len(cases) == sum(len(g["checks"]) for g in ran.summary["gates"].values())
    assert not suites.findall(".//failure") and not suites.findall(".//error") and not suites.findall(".//skipped")


# ------------------------------------------------------------------------------------------ baseline


def test_a_normal_run_never_records_a_baseline(ran, tmp_path):
    root = copy_sample(ran.root, tmp_path / "route")
    (root / ".trtls" / "routes" / "tiny_ort" / "baseline.json").unlink()
    r = trtls("gates", "--route", "tiny_ort", "--format", "json", cwd=root)
    assert r.returncode == 3, r.stderr
    s = json.loads(r.stdout)
    held = [c for g in s["gates"].values() for c in g["checks"] if c["status"] != "pass"]
    assert [(c["code"], c["status"]) for c in held] == [("TRT906", "hold")]
    assert not (root / ".trtls" / "routes" / "tiny_ort" / "baseline.json").exists()
    assert "baseline" not in r.stderr


def test_a_waiver_that_names_no_check_is_a_located_warning(ran, tmp_path):
    root = copy_sample(ran.root, tmp_path / "route")
    toml = root / "trtls.toml"
    text = toml.read_text()
    anchor = 'previous_bundle = "releases/tiny_ort-previous.bundle"\n'
    assert anchor in text
    toml.write_text(text.replace(anchor, anchor + 'waive = { "release.througput" = "misspelt on purpose" }\n', 1))
    r = trtls("gates", "--route", "tiny_ort", "--format", "json", cwd=root)
    assert r.returncode == 0, r.stderr  # a useless waiver changes no verdict
    s = json.loads(r.stdout)
    assert s["waivers"]["release.througput"]["not_applied"] == ["no check of this run has this name"]
    r = trtls("gates", "--route", "tiny_ort", "--format", "sarif", cwd=root)
    results = json.loads(r.stdout)["runs"][0]["results"]
    (hit,) = [x for x in results if x["ruleId"] == "TRT116"]
    line = next(i for i, t in enumerate(toml.read_text().splitlines(), 1) if "release.througput" in t)
    assert hit["locations"][0]["physicalLocation"]["region"]["startLine"] == line


def test_record_baseline_refused_for_a_rejected_route(ran, tmp_path):
    root = copy_sample(ran.root, tmp_path / "route")
    assert trtls("route", "lock", "--route", "perturbed", cwd=root).returncode == 0
    r = trtls("gates", "--route", "perturbed", "--record-baseline", cwd=root)
    assert r.returncode == 4, r.stdout + r.stderr
    assert "baseline not recorded: the gates rejected the route" in r.stderr
    assert not (root / ".trtls" / "routes" / "perturbed" / "baseline.json").exists()
    s = json.loads((root / ".trtls" / "routes" / "perturbed" / "summary.json").read_text())
    assert s["baseline"]["recorded"] is False


def test_record_baseline_needs_gate_5(ran):
    r = trtls("gates", "--route", "tiny", "--gate", "1", "--record-baseline", cwd=ran.root)
    assert r.returncode == 2 and "--record-baseline needs gate 5" in r.stderr


# ----------------------------------------------------------------------------------------- tokenizer


RUNNER = """
import json, sys
from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[1])
print(json.dumps({"ids": [tok.encode(t).ids for t in json.load(open(sys.argv[2]))["texts"]]}))
"""


def test_tokenizer_parity_needs_ids_from_the_runtime_side(ran, tmp_path):
    # the TensorRT route asks for tokenizer parity but no runner reports ids: not_checked, never a pass
    check = next(c for c in _checks(ran.tensorrt, 4) if c["name"] == "parity.tokenizer")
    assert check["status"] == "not_checked" and "no token ids from the runtime side" in check["message"]
    # a runner that tokenizes with the tokenizer the deployment ships (here: a copy taken before the change below)
    root = copy_sample(ran.root, tmp_path / "route")
    link = root / SNAPSHOT / "tokenizer.json"
    shipped = root / "runtime-tokenizer.json"
    shipped.write_bytes(link.resolve().read_bytes())
    (root / "runner.py").write_text(RUNNER)
    toml = root / "trtls.toml"
    text = toml.read_text()
    anchor = 'runtime = "tensorrt_rtx"                            # runs the engine the route deploys'
    assert anchor in text
    toml.write_text(
        text.replace(
            anchor,
            anchor + "\nruntime_options = "
            f'{{ tokenizer_command = ["{sys.executable}", "runner.py", "runtime-tokenizer.json"] }}',
        )
    )

    def tokenizer_check() -> dict:
        r = trtls("gates", "--route", "tiny", "--gate", "4", "--format", "json", cwd=root)
        return next(c for c in json.loads(r.stdout)["gates"]["4"]["checks"] if c["name"] == "parity.tokenizer")

    same = tokenizer_check()
    assert same["status"] == "pass" and "ids reported by the runtime under test" in same["message"]
    # the checkpoint's tokenizer changes (two ids swapped): the runtime side no longer agrees
    tok = json.loads(link.resolve().read_text())
    vocab = tok["model"]["vocab"]
    vocab["engine"], vocab["model"] = vocab["model"], vocab["engine"]
    data = (json.dumps(tok, indent=2) + "\n").encode()
    blob = (
        root / "checkpoints/models--trtls--tiny-mlp/blobs" / hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    )
    blob.write_bytes(data)
    link.unlink()
    os.symlink(Path("..") / ".." / "blobs" / blob.name, link)
    changed = tokenizer_check()
    assert changed["status"] == "reject" and changed["code"] == "TRT806"
    assert changed["evidence"]["text_index"] == 0 and changed["path"] == ["routes", "tiny", "tokenizer_texts"]


@pytest.mark.parametrize(
    ("value", "says"), [("[]", "at least 1 item"), ("[1, 2]", "must be a string, not the number 1")]
)
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
def test_each_variant_fails_its_stated_gate(ran, tmp_path, route, gate, code, status, exit_code, says):
    root = copy_sample(ran.root, tmp_path / "route")
    if route != "unpinned":  # a person locks each route after reviewing it; an unpinned revision cannot be locked
        assert trtls("route", "lock", "--route", route, cwd=root).returncode == 0
    r = trtls("gates", "--route", route, "--format", "json", cwd=root)
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
        assert ev["check_error_stat"] == "elemwise" and ev["stats"]["max_abs"] > ev["atol"] == 1e-4
        assert "TRT809" in [c["code"] for c in _checks(s, 4) if c["status"] == "hold"]  # fault injection is named
        assert s["validation_status"] == "reject"
