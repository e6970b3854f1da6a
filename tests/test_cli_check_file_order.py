"""`trtls check` lists a recipe's findings in the order they stand in the file, and says a missing recipe as a JSON
error record under `--format json`.

It printed the findings in the order the models validated them: `[engines.demo] cancel_grace_s = "ten"` (line 10)
after the `optimization_level = "3"` of `[engines.demo.builder]` (line 13), in the text report and in the JSON one
(the editor's replies were put in file order by `LoadedRecipe.in_file_order`, c5aee79; `check` and
`cli/common.load_or_report`'s own sort now use it too). And a recipe it could not find was a line of text only, where
every other failure of a JSON command is one error record on stdout (`cli/usage.emit_error`). Real `trtls` processes,
the quickstart's recipe."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

GRACE = "'cancel_grace_s' must be a number, not the string 'ten'"
LEVEL = "'optimization_level' must be an integer, not the string '3' (write 3 without quotes)"


def _trtls(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trtls", *args], capture_output=True, text=True, timeout=300, cwd=cwd)


def _two_errors(workspace: Path) -> Path:
    recipe = workspace / "trtls.toml"
    text = recipe.read_text().replace("optimization_level = 3\n", 'optimization_level = "3"\n', 1)
    recipe.write_text(text.replace("cancel_grace_s = 10\n", 'cancel_grace_s = "ten"\n', 1))
    lines = recipe.read_text().splitlines()
    assert 'cancel_grace_s = "ten"' in lines[9] and 'optimization_level = "3"' in lines[12]  # lines 10 and 13
    return recipe


def test_check_lists_the_findings_in_file_order_in_text_and_json(workspace: Path) -> None:
    recipe = _two_errors(workspace)

    text = _trtls("check", str(recipe), cwd=workspace)
    assert text.returncode == 2 and "Traceback" not in text.stderr, text.stderr
    assert text.stdout.splitlines()[:2] == [
        f"{recipe}:10:18: TRT102 error: {GRACE}",
        f"{recipe}:13:22: TRT102 error: {LEVEL}",
    ], text.stdout

    report = _trtls("check", str(recipe), "--format", "json", cwd=workspace)
    assert report.returncode == 2, report.stderr
    findings = json.loads(report.stdout)["findings"]
    assert [(f["line"], f["message"]) for f in findings] == [(10, GRACE), (13, LEVEL)], findings


def test_a_missing_recipe_under_format_json_is_one_error_record(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "trtls.toml"
    done = _trtls("check", str(missing), "--format", "json", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stdout.splitlines()
    record = json.loads(line)
    assert record["type"] == "error" and record["code"] == "TRT104" and record["file"] == str(missing), record
    assert record["message"].startswith("recipe file not found") and record["message"] in done.stderr, record
    text = _trtls("check", str(missing), cwd=tmp_path)  # the text report: text only, as before
    assert text.returncode == 2 and text.stdout == "" and f"{missing}: TRT104 recipe file not found" in text.stderr
