"""JSON read through the door is parsed through the door: `fs.parse_json`, where text nested deeper than the JSON
parser's stack is a ValueError like any other text that is not JSON. `json.loads` raises RecursionError on it, which
no reader's `except ValueError` takes: a `.trtls/history.json` of `[` × 3,000 planted by another user made every full
build end "supervisor error: RecursionError …; evidence not written", exit 1 (found by the re-attack of 2026-12-04).

The rule is structural: a module that reads files through the door (imports `trtls.fs`) never calls `json.loads` or
`json.load` itself, so a new reader is safe by using the door, not by remembering it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

SERVER = Path(__file__).resolve().parents[2] / "server" / "trtls"
# parsers with their own hooks, each turning RecursionError into its own located ValueError
OWN_PARSER = {"fs/read.py": "parse_json itself", "bundle/format.py": "the bundle header's strict parser (its hooks)"}


def _reads_through_the_door(tree: ast.AST) -> bool:
    return any(
        isinstance(node, ast.ImportFrom) and (node.module or "").startswith("trtls.fs") for node in ast.walk(tree)
    )


def _json_parses(tree: ast.AST) -> list[int]:
    """Lines of `json.loads(…)` / `json.load(…)` calls."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("loads", "load")
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "json"
    ]


def test_a_module_that_reads_through_the_door_parses_json_through_it() -> None:
    found = []
    for path in sorted(SERVER.rglob("*.py")):
        rel = path.relative_to(SERVER).as_posix()
        if rel in OWN_PARSER:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if _reads_through_the_door(tree):
            found += [f"{rel}:{line}" for line in _json_parses(tree)]
    assert not found, "json.loads beside the door's reads (use trtls.fs.parse_json):\n" + "\n".join(found)


def test_the_rule_sees_what_it_forbids(tmp_path: Path) -> None:
    text = "import json\nfrom trtls.fs import read_text\n\ndef f(p):\n    return json.loads(read_text(p, limit=9))\n"
    tree = ast.parse(text)
    assert _reads_through_the_door(tree) and _json_parses(tree) == [5]


def test_a_history_nested_too_deeply_does_not_stop_a_build(workspace: Path) -> None:
    """History is advice: a damaged one is read as none, and the build goes on (it ended in a RecursionError before)."""
    state = workspace / ".trtls"
    state.mkdir()
    (state / "history.json").write_text("[" * 3000 + "]" * 3000)
    proc = subprocess.run(
        [sys.executable, "-m", "trtls", "build", str(workspace), "--engine", "demo", "--no-store"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "RecursionError" not in proc.stdout + proc.stderr and (workspace / "build" / "demo.engine").is_file()


def test_lines_and_sections_nested_too_deeply_are_not_json_where_they_are_parsed_in_memory() -> None:
    """What is parsed from memory, not read through the door — a worker's or a node's event line (an external worker
    implements the protocol), a bundle's tokenizer section — answers "not JSON" for JSON nested 5,000 deep, as for
    any other text that is not JSON, instead of raising RecursionError into the supervisor or gate 3."""
    from trtls.builds.farm.remote_lines import peek
    from trtls.bundle.trtmc import tokenizer_adds_special_tokens
    from trtls.core.events import _json_object

    deep = "[" * 5000 + "]" * 5000
    assert _json_object(deep) is None and peek(deep) == {}
    assert tokenizer_adds_special_tokens(deep.encode()) is False
