"""SARIF, JUnit and SBOM output, validated against the published schemas.

tests/data holds unmodified copies of the public schemas:
  sarif-schema-2.1.0.json    OASIS SARIF 2.1.0 (errata01), the file published in oasis-tcs/sarif-spec
                             Schemata/sarif-schema-2.1.0.json
  cyclonedx/*.schema.json    CycloneDX 1.5 with the two files it references (spdx, jsf-0.82), as in
                             CycloneDX/specification schema/ (Apache-2.0)
"""

from __future__ import annotations

import hashlib
import json
import uuid
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

import jsonschema
import pytest
from referencing import Registry, Resource

from trtls.bundle.sbom import FileDigest, make_sbom, write_sbom
from trtls.core.findings import Finding, Origin, Severity
from trtls.core.tomlpos import parse
from trtls.gates.reports import Check, to_junit, to_sarif, write_junit, write_sarif

DATA = Path(__file__).resolve().parent.parent / "data"

RECIPE = """\
[engines.demo]
onnx = "model.onnx"
precision = "fp8"
timing_cache = "cache/demo.cache"
"""


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture(scope="module")
def sarif_validator() -> jsonschema.protocols.Validator:
    schema = json.loads((DATA / "sarif-schema-2.1.0.json").read_text())
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema)


@pytest.fixture(scope="module")
def cyclonedx_validator() -> jsonschema.protocols.Validator:
    folder = DATA / "cyclonedx"
    schemas = {
        name: json.loads((folder / name).read_text())
        for name in ("bom-1.5.schema.json", "spdx.schema.json", "jsf-0.82.schema.json")
    }
    # The BOM schema refers to its neighbours by relative name; serve them under its base URI.
    registry = Registry().with_resources(
        (f"http://cyclonedx.org/schema/{name}", Resource.from_contents(schema)) for name, schema in schemas.items()
    )
    bom = schemas["bom-1.5.schema.json"]
    jsonschema.Draft7Validator.check_schema(bom)
    return jsonschema.Draft7Validator(bom, registry=registry)


def recipe_locator():
    """The real recipe SourceMap turned into 1-based SARIF regions."""
    _, source_map = parse(RECIPE)

    def locate(path):
        if not path:
            return None
        r = source_map.range(path)
        return (r.start_line + 1, r.start_col + 1, r.end_line + 1, r.end_col + 1)

    return locate


FINDINGS = [
    Finding(
        "TRT104",
        Severity.error,
        "precision 'fp8' is not supported by this builder",
        ("engines", "demo", "precision"),
        on_value=True,
    ),
    Finding(
        "TRT301",
        Severity.warning,
        "timing cache was built by another TensorRT version",
        ("engines", "demo", "timing_cache"),
        Origin.build,
        data={"when": datetime(2026, 1, 1)},
    ),
    Finding("TRT104", Severity.error, "second finding with the same code", ("engines", "demo", "onnx")),
    Finding("TRT701", Severity.information, "bundle has no sidecar yet", (), Origin.gates),
    Finding("TRT702", Severity.hint, "consider pinning the revision", ("engines", "demo")),
]


# ---------------------------------------------------------------------------------------------- SARIF


def test_sarif_validates_against_the_2_1_0_schema(sarif_validator):
    sarif = to_sarif(FINDINGS, recipe_locator(), "samples/quickstart/trtls.toml", "0.1.0")
    errors = sorted(sarif_validator.iter_errors(sarif), key=str)
    assert errors == []


def test_sarif_has_one_rule_per_code_with_its_doc_link(sarif_validator):
    sarif = to_sarif(FINDINGS, recipe_locator(), "trtls.toml", "0.1.0", rule_titles={"TRT104": "Unsupported precision"})
    driver = sarif["runs"][0]["tool"]["driver"]
    assert driver["name"] == "trtls" and driver["version"] == "0.1.0"
    rules = {r["id"]: r for r in driver["rules"]}
    assert sorted(rules) == ["TRT104", "TRT301", "TRT701", "TRT702"]
    assert rules["TRT104"]["helpUri"] == FINDINGS[0].doc_url and rules["TRT104"]["helpUri"].endswith("#trt104")
    assert rules["TRT104"]["shortDescription"]["text"] == "Unsupported precision"
    results = sarif["runs"][0]["results"]
    assert all(driver["rules"][r["ruleIndex"]]["id"] == r["ruleId"] for r in results)


def test_sarif_levels_and_regions_come_from_severity_and_the_source_map():
    sarif = to_sarif(FINDINGS, recipe_locator(), "trtls.toml", "0.1.0")
    results = sarif["runs"][0]["results"]
    assert [r["level"] for r in results] == ["error", "warning", "error", "note", "note"]
    precision = results[0]["locations"][0]["physicalLocation"]
    assert precision["artifactLocation"] == {"uri": "trtls.toml", "uriBaseId": "%SRCROOT%"}
    assert precision["region"] == {
        "startLine": 3,
        "startColumn": 1,
        "endLine": 3,
        "endColumn": 10,
    }  # the key `precision`
    assert "region" not in results[3]["locations"][0]["physicalLocation"]  # whole-file finding
    assert results[1]["properties"]["tomlPath"] == ["engines", "demo", "timing_cache"]
    assert results[1]["properties"]["data"] == {"when": "2026-01-01 00:00:00"}
    json.dumps(sarif)


def test_sarif_absolute_recipe_path_becomes_a_file_uri(tmp_path, sarif_validator):
    recipe = tmp_path / "my recipes" / "trtls.toml"
    sarif = to_sarif(FINDINGS[:1], lambda path: None, recipe, "0.1.0")
    uri = sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri.startswith("file:///") and "my%20recipes" in uri
    assert list(sarif_validator.iter_errors(sarif)) == []
    out = tmp_path / "trtls.sarif"
    write_sarif(out, sarif)
    assert json.loads(out.read_text()) == sarif


def test_sarif_with_no_findings_is_still_a_valid_log(sarif_validator):
    sarif = to_sarif([], recipe_locator(), "trtls.toml", "0.1.0")
    assert sarif["runs"][0]["results"] == [] and sarif["runs"][0]["tool"]["driver"]["rules"] == []
    assert list(sarif_validator.iter_errors(sarif)) == []


def test_schema_catches_a_broken_sarif_log(sarif_validator):
    """Guards the guard: the vendored schema really rejects what it should."""
    sarif = to_sarif(FINDINGS, recipe_locator(), "trtls.toml", "0.1.0")
    sarif["runs"][0]["results"][0]["level"] = "fatal"
    del sarif["runs"][0]["tool"]["driver"]["name"]
    assert len(list(sarif_validator.iter_errors(sarif))) >= 2


# ---------------------------------------------------------------------------------------------- JUnit

CHECKS = [
    Check("gate1.source", "revision pinned", "pass", duration_s=0.01),
    {
        "suite": "gate1.source",
        "name": "license reviewed",
        "status": "hold",
        "message": "model card license 'other' needs review",
        "duration_s": 0.5,
    },
    Check("gate3.bundle", "section digests", "fail", "section 'engine' sha256 differs\x00 from the sidecar"),
    Check("gate3.bundle", "sbom attached", "skip", "no SBOM requested"),
    Check("gate4.parity", "native C++ parity", "reject", "token agreement 0.91 < 0.99"),
    Check("gate4.parity", "runtime loads", "error", "runtime crashed"),
]


def test_junit_has_one_testcase_per_check_with_failures_where_expected(tmp_path):
    xml_text = to_junit(CHECKS)
    out = tmp_path / "trtls-junit.xml"
    write_junit(out, xml_text)
    root = ET.parse(out).getroot()
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == ("6", "3", "1", "1")
    assert [s.get("name") for s in root.findall("testsuite")] == ["gate1.source", "gate3.bundle", "gate4.parity"]
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert len(cases) == len(CHECKS)
    assert list(cases["revision pinned"]) == []
    hold = cases["license reviewed"].find("failure")
    assert hold is not None and hold.get("type") == "hold" and "needs review" in hold.get("message")
    assert cases["native C++ parity"].find("failure").get("type") == "reject"
    assert cases["section digests"].find("failure").get("type") == "fail"
    assert "\ufffd" in cases["section digests"].find("failure").text  # NUL cannot travel in XML; replaced
    assert cases["sbom attached"].find("skipped").get("message") == "no SBOM requested"
    assert cases["runtime loads"].find("error") is not None
    assert root.find("testsuite[@name='gate1.source']").get("time") == "0.510"


def test_junit_rejects_an_unknown_status():
    with pytest.raises(ValueError, match="maybe"):
        to_junit([Check("s", "n", "maybe")])


# ----------------------------------------------------------------------------------------------- SBOM


def sample_sbom(**overrides):
    args = dict(
        bundle=FileDigest("tiny.bundle", sha("bundle"), 4096),
        checkpoint_id="sshleifer/tiny-gpt2",
        checkpoint_revision="5f91d94bd9cd7190a9f3216ff93cd1dd95f2c7be",
        checkpoint_files=[
            FileDigest("config.json", sha("config")),
            FileDigest("model.safetensors", sha("weights"), 2_000_000),
        ],
        builder_name="tensorrt_rtx",
        builder_version="1.2.0.54",
        trtls_version="0.1.0",
        onnx=FileDigest("model.onnx", sha("onnx")),
        engine=FileDigest("engine.plan", sha("engine")),
        checkpoint_license="mit",
        checkpoint_url="https://huggingface.co/sshleifer/tiny-gpt2",
        properties={"build_config_hash": "ab" * 32},
        timestamp=datetime(2026, 11, 29, 12, 0, tzinfo=UTC),
        serial_number=uuid.UUID("12345678-1234-5678-1234-567812345678"),
    )
    args.update(overrides)
    return make_sbom(**args)


def test_sbom_validates_against_cyclonedx_1_5(cyclonedx_validator):
    sbom = sample_sbom()
    assert sorted(cyclonedx_validator.iter_errors(sbom), key=str) == []
    minimal = sample_sbom(
        onnx=None,
        engine=None,
        checkpoint_license=None,
        checkpoint_url=None,
        properties=None,
        timestamp=None,
        serial_number=None,
    )
    assert list(cyclonedx_validator.iter_errors(minimal)) == []


def test_sbom_records_every_input_with_its_sha256(tmp_path):
    sbom = sample_sbom()
    assert (sbom["bomFormat"], sbom["specVersion"], sbom["version"]) == ("CycloneDX", "1.5", 1)
    assert sbom["serialNumber"] == "urn:uuid:12345678-1234-5678-1234-567812345678"
    assert sbom["metadata"]["timestamp"] == "2026-11-29T12:00:00Z"
    assert sbom["metadata"]["component"]["hashes"] == [{"alg": "SHA-256", "content": sha("bundle")}]
    by_ref = {c["bom-ref"]: c for c in sbom["components"]}
    assert by_ref["checkpoint"]["type"] == "machine-learning-model"
    assert by_ref["checkpoint"]["version"] == "5f91d94bd9cd7190a9f3216ff93cd1dd95f2c7be"
    files = {f["name"]: f["hashes"][0]["content"] for f in by_ref["checkpoint"]["components"]}
    assert files == {"config.json": sha("config"), "model.safetensors": sha("weights")}
    assert by_ref["onnx"]["hashes"][0]["content"] == sha("onnx")
    assert by_ref["engine"]["hashes"][0]["content"] == sha("engine")
    assert (by_ref["builder"]["name"], by_ref["builder"]["version"]) == ("tensorrt_rtx", "1.2.0.54")
    assert by_ref["trtls"]["version"] == "0.1.0"
    deps = {d["ref"]: d["dependsOn"] for d in sbom["dependencies"]}
    assert deps == {"bundle": ["engine", "checkpoint"], "engine": ["onnx", "builder"], "onnx": ["checkpoint"]}
    out = tmp_path / "tiny.bundle.cdx.json"
    write_sbom(out, sbom)
    assert json.loads(out.read_text()) == sbom


def test_sbom_serial_numbers_are_unique_urn_uuids():
    a, b = sample_sbom(serial_number=None), sample_sbom(serial_number=None)
    assert a["serialNumber"] != b["serialNumber"]
    assert uuid.UUID(a["serialNumber"].removeprefix("urn:uuid:")).version == 4


def test_sbom_refuses_a_digest_that_is_not_sha256():
    with pytest.raises(ValueError, match="64 lowercase hex"):
        FileDigest("model.onnx", "ABC")


def test_cyclonedx_schema_catches_a_broken_sbom(cyclonedx_validator):
    sbom = sample_sbom()
    sbom["bomFormat"] = "SPDX"  # (specVersion is a free string in the 1.5 schema; its value is asserted above)
    sbom["components"][0]["hashes"] = [{"alg": "SHA-256", "content": "not-a-digest"}]
    assert len(list(cyclonedx_validator.iter_errors(sbom))) >= 2
