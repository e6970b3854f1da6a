"""A wrong value in an either/or field is one message naming the field the person wrote.

pydantic refuses a value a union field does not take once per member, each error located on the member's tag:
`run_on.num_gpus = "2"` (a number or the word "auto") said `'float' must be a number, not the string '2'` and
`'literal['auto']' must be one of 'auto', not '2'` — the right line and column, the wrong key, twice.
`core.validation.findings_from_validation` now regroups them: one TRT102 naming the field and what it takes; a value
that has one member's shape (an array whose item is wrong) is that member's error, on the item. Every union field of
the recipe: `run_on.num_gpus`, `[store] max_size`, `triage.fail_regex`, `matrix.compute_capabilities`' items.
Real recipes (the quickstart's), real `trtls check` processes, exact messages."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def _check(workspace: Path, table: str, key: str, value: str, at: str, before: str) -> tuple[list[str], str, str]:
    """`trtls check` of the quickstart with `table` added (`before` its other lines, then `key = value`): (what it
    printed, where a finding on `at`, the first text of `value` it is located on, is, the problem count line)."""
    recipe = workspace / "trtls.toml"
    text = recipe.read_text() + f"\n[{table}]\n{before}{key} = {value}\n"
    recipe.write_text(text)
    line, col = len(text.splitlines()), len(f"{key} = ") + value.index(at) + 1
    check = subprocess.run(
        [sys.executable, "-m", "trtls", "check", str(workspace)], capture_output=True, text=True, timeout=300
    )
    assert check.returncode == 2, check.stdout + check.stderr
    return check.stdout.splitlines(), f"{recipe}:{line}:{col}", f"{recipe}: 1 problem"


MATRIX = 'output = "build/demo-{compute_capabilities}.engine"\n'

CASES = [
    pytest.param(
        "engines.demo.run_on",
        "num_gpus",
        '"2"',
        '"2"',
        "",
        "'num_gpus' must be a number or 'auto', not the string '2' (write 2 without quotes)",
        id="num_gpus-quoted-number",
    ),
    pytest.param(
        "engines.demo.run_on",
        "num_gpus",
        '"all"',
        '"all"',
        "",
        "'num_gpus' must be a number or 'auto', not the string 'all'",
        id="num_gpus-other-word",
    ),
    pytest.param(
        "engines.demo.run_on",
        "num_gpus",
        "true",
        "true",
        "",
        "'num_gpus' must be a number or 'auto', not true",
        id="num_gpus-boolean",
    ),
    pytest.param(
        "store",
        "max_size",
        "1.5",
        "1.5",
        "",
        "'max_size' must be an integer or a string, not the number 1.5",
        id="max_size-float",
    ),
    pytest.param(
        "engines.demo.triage",
        "fail_regex",
        "1",
        "1",
        "",
        "'fail_regex' must be a string or an array of strings, not the number 1",
        id="fail_regex-number",
    ),
    pytest.param(
        "engines.demo.triage",
        "fail_regex",
        '["out of memory", 2]',
        "2",
        "",
        "'fail_regex[1]' must be a string, not the number 2",
        id="fail_regex-array-item",
    ),
    pytest.param(
        "engines.demo.matrix",
        "compute_capabilities",
        '["SM89", 7]',
        "7",
        MATRIX,
        "'compute_capabilities[1]' must be a string or an array of strings, not the number 7",
        id="compute_capabilities-item",
    ),
    pytest.param(
        "engines.demo.matrix",
        "compute_capabilities",
        '[["SM89", 7]]',
        "7",
        MATRIX,
        "'compute_capabilities[0][1]' must be a string, not the number 7",
        id="compute_capabilities-inner-item",
    ),
]


@pytest.mark.parametrize(("table", "key", "value", "at", "before", "said"), CASES)
def test_an_either_or_field_names_itself_once(
    workspace: Path, table: str, key: str, value: str, at: str, before: str, said: str
) -> None:
    printed, where, total = _check(workspace, table, key, value, at, before)
    assert printed == [f"{where}: TRT102 error: {said}", total], printed  # on the value, or on the array's item
    assert not any("literal[" in s or "'float'" in s or "'str'" in s or "list[str]" in s for s in printed), printed


def test_an_either_or_field_still_takes_each_of_its_members(workspace: Path) -> None:
    recipe = workspace / "trtls.toml"
    recipe.write_text(
        recipe.read_text() + '\n[engines.demo.run_on]\nnum_gpus = 1\n\n[engines.large.run_on]\nnum_gpus = "auto"\n'
        '\n[engines.demo.triage]\nfail_regex = ["out of memory"]\n\n[engines.large.triage]\nfail_regex = "oom"\n'
    )
    check = subprocess.run(
        [sys.executable, "-m", "trtls", "check", str(workspace)], capture_output=True, text=True, timeout=300
    )
    assert not [s for s in check.stdout.splitlines() if "TRT102" in s or "TRT106" in s], check.stdout
