"""A value of the wrong type says, in trtls's words, the key, what it must be and what was given — for every type.

The either/or fields and the numbers and booleans were reworded, the rest still spoke pydantic: `onnx = 3` was
`'onnx': Input should be a valid string (got 3)`, `worker = "x"` `Input should be a valid list`, `timing_cache = "c"`
`Input should be a valid dictionary or instance of TimingCache` (a class name the recipe never wrote). Now one
function (`core.validation._must_be`) words them all: `'onnx' must be a string, not the number 3`. What was given is
quoted safely — an escape sequence a string carried is written visibly, a long string is cut — and a TOML date is a
date. Real recipes (the quickstart's), a real `trtls check` process, exact lines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

LONG = "a" * 100
TYPED = f"""
[engines.typed]
onnx = 3
output = 1979-05-27
worker = "x"
timing_cache = "build/typed.cache"
keep_evidence = "\\u001b]0;PWN\\u0007yes"
cancel_grace_s = {{ seconds = 10 }}
profiles = "none"

[engines.typed.builder]
tf32 = "{LONG}"
optimization_level = [3]
"""
SAID = [
    "'onnx' must be a string, not the number 3",
    "'output' must be a string, not the date 1979-05-27",
    "'worker' must be an array of strings, not the string 'x'",
    "'timing_cache' must be a table, not the string 'build/typed.cache'",
    "'keep_evidence' must be true or false, not the string '\\x1b]0;PWN\\x07yes'",
    "'cancel_grace_s' must be a number, not a table",
    "'profiles' must be an array of tables, not the string 'none'",
    f"'tf32' must be true or false, not the string '{LONG[:79]}…'",
    "'optimization_level' must be an integer, not an array",
]


def test_every_wrong_type_is_said_in_one_way(workspace: Path) -> None:
    recipe = workspace / "trtls.toml"
    text = recipe.read_text() + TYPED
    recipe.write_text(text)
    lines = text.splitlines()
    check = subprocess.run(
        [sys.executable, "-m", "trtls", "check", str(workspace)], capture_output=True, text=True, timeout=300
    )
    assert check.returncode == 2, check.stdout + check.stderr
    typed, expected = lines.index("[engines.typed]"), []
    for said in SAID:
        key = said.split("'")[1]
        number = next(i for i, t in enumerate(lines, 1) if t.startswith(f"{key} = ") and i > typed)
        col = len(f"{key} = ") + 1
        expected.append(f"{recipe}:{number}:{col}: TRT102 error: {said}")
    *printed, total = check.stdout.splitlines()
    assert sorted(printed) == sorted(expected) and total == f"{recipe}: {len(SAID)} problems", check.stdout
    assert "\x1b" not in check.stdout and "\x07" not in check.stdout
