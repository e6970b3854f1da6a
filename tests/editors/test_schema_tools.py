"""The recipe's JSON Schema as TOML tools see it: a stable `$id`, `#:schema` lines in the samples, the extension's
`tomlValidation` contribution, and Taplo's own CLI validating the samples against it."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from trtls.core.recipe import SCHEMA_ID, recipe_json_schema

from .conftest import require_tool

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "server" / "trtls" / "schema" / "trtls.schema.json"
SAMPLES = sorted(ROOT.glob("samples/*/trtls.toml"))


def test_schema_has_an_id_the_extension_contributes() -> None:
    assert recipe_json_schema()["$id"] == SCHEMA_ID == json.loads(SHIPPED.read_text())["$id"]
    package = json.loads((ROOT / "extension" / "package.json").read_text())
    rules = package["contributes"]["tomlValidation"]
    assert {"fileMatch": "trtls.toml", "url": SCHEMA_ID} in rules


def test_every_sample_names_the_shipped_schema() -> None:
    assert SAMPLES
    for sample in SAMPLES:
        first = sample.read_text().splitlines()[0]
        assert first.startswith("#:schema "), f"{sample}: first line is not a #:schema directive"
        assert (sample.parent / first.removeprefix("#:schema ").strip()).resolve() == SHIPPED


def _taplo_check(taplo: str, *files: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([taplo, "check", *map(str, files)], capture_output=True, text=True, timeout=120)


def test_taplo_validates_the_samples_against_the_schema(tmp_path: Path) -> None:
    taplo = require_tool("taplo", env="TRTLS_TAPLO")
    ok = _taplo_check(taplo, *SAMPLES)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    # The same check must be able to fail: a sample with a value the schema forbids (through its own #:schema
    # line, resolved relative to the copy's folder).
    bad_dir = tmp_path / "samples" / "quickstart"
    bad_dir.mkdir(parents=True)
    shutil.copytree(ROOT / "server", tmp_path / "server", ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    text = (ROOT / "samples" / "quickstart" / "trtls.toml").read_text()
    assert "optimization_level = 3" in text
    (bad_dir / "trtls.toml").write_text(text.replace("optimization_level = 3", "optimization_level = 9", 1))
    bad = _taplo_check(taplo, bad_dir / "trtls.toml")
    assert bad.returncode != 0
    assert "greater than the maximum of 5" in bad.stdout + bad.stderr
