"""`trtls check` (text, json, SARIF; exit 0 clean, 2 problems) and `trtls build` refusing bad model files before
any worker starts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from trtls.cli.main import main

SARIF_SCHEMA = Path(__file__).parents[1] / "data" / "sarif-schema-2.1.0.json"


def _line_of(recipe: Path, text: str) -> int:
    """1-based line of the first line starting with `text` (the samples' headers may grow)."""
    return next(n for n, line in enumerate(recipe.read_text().splitlines(), 1) if line.startswith(text))


def test_check_clean_sample_exits_0(models_ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(models_ws)]) == 0
    assert capsys.readouterr().out.strip().endswith(": ok")


def test_check_reports_located_problems_in_every_format(models_ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recipe = models_ws / "trtls.toml"
    text = recipe.read_text()
    start = text.index("inputs.attention_mask")
    recipe.write_text(text[:start] + text[text.index("\n", start) + 1 :])  # profile 0 loses attention_mask
    line = _line_of(recipe, "[[engines.encoder.profiles]]")
    assert main(["check", str(recipe)]) == 2
    out = capsys.readouterr().out
    assert f"{recipe}:{line}:1: TRT113 error: profile 0 has no shapes for dynamic input 'attention_mask'" in out
    assert out.strip().endswith("1 problem")

    assert main(["check", str(recipe), "--format", "json"]) == 2
    report = json.loads(capsys.readouterr().out)
    assert report["problems"] == 1
    (f,) = report["findings"]
    assert (f["code"], f["line"], f["column"]) == ("TRT113", line, 1) and f["data"]["missing"] == ["attention_mask"]

    out_file = models_ws / "check.sarif"
    assert main(["check", str(recipe), "--format", "sarif", "-o", str(out_file)]) == 2
    sarif = json.loads(out_file.read_text())
    jsonschema.validate(sarif, json.loads(SARIF_SCHEMA.read_text()))
    (result,) = sarif["runs"][0]["results"]
    assert result["ruleId"] == "TRT113" and result["locations"][0]["physicalLocation"]["region"]["startLine"] == line


def test_check_missing_recipe_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(tmp_path / "nope.toml")]) == 2
    assert "TRT104" in capsys.readouterr().err


@pytest.mark.parametrize("damage", ["text", "truncated", "no-data"])
def test_build_refuses_bad_model_files_with_exit_2_before_any_build(models_ws: Path, damage: str) -> None:
    """The issue's report: a non-ONNX or truncated file ended with exit 1 and the parser's raw assertion."""
    models = models_ws / "models"
    engine = "external" if damage == "no-data" else "encoder"
    if damage == "text":
        (models / "encoder.onnx").write_text("not a model\n")
    elif damage == "truncated":
        data = (models / "encoder.onnx").read_bytes()
        (models / "encoder.onnx").write_bytes(data[: len(data) - 1000])
    else:
        (models / "external.onnx.data").unlink()
    run = subprocess.run(
        [sys.executable, "-m", "trtls", "build", str(models_ws), "--engine", engine],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2, run.stderr
    expected = {"text": "TRT110 error: not a valid ONNX model", "truncated": "truncated", "no-data": "TRT111"}[damage]
    assert expected in run.stderr
    line = _line_of(models_ws / "trtls.toml", f'onnx = "models/{engine}.onnx"')
    assert f"{models_ws / 'trtls.toml'}:{line}:8:" in run.stderr, run.stderr
    assert not (models_ws / ".trtls").exists(), "no worker was started"
    assert not (models_ws / "build").exists()
