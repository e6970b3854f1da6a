"""`trtls accept` measures real builds: its scenarios start builds on the supervisor, never through the store, and
its report says so."""

from __future__ import annotations

import ast
from pathlib import Path

from trtls.accept.report import build_report, to_text

ACCEPT = Path(__file__).resolve().parents[2] / "server" / "trtls" / "accept"


def test_accept_report_says_the_store_is_bypassed() -> None:
    report = build_report([], {}, {"recipe": "trtls.toml", "engine": "demo"})
    assert report["engineStore"].startswith("bypassed")
    assert to_text(report).splitlines()[1] == f"engine store: {report['engineStore']}"


def test_no_acceptance_module_goes_through_the_store() -> None:
    """What the report claims, checked on the code: nothing under trtls.accept imports the avoidance or the store."""
    imported = set()
    for path in ACCEPT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported.update(a.name for a in node.names)
    assert not {m for m in imported if m.startswith(("trtls.store", "trtls.builds.avoidance"))}
