"""Every face (the terminal, the language server, the acceptance harness) starts a build only through the
application layer (trtls.app): none of them starts a supervisor's build, a matrix, builds a worker job or looks the
store up itself. Checked on the source, the way tests/test_layers.py checks imports."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "server" / "trtls"
FACES = ("cli", "lsp", "accept")
# the names that start work or look the store up before it: trtls.app calls them, a face calls trtls.app
STARTS_WORK = {
    "trtls.builds.avoidance.lookup": None,  # any name: the store lookup before a build, the publish after it
    "trtls.builds.supervisor.matrix": {"start_matrix"},
    "trtls.builds.avoidance.rollback": {"rollback"},  # a rollback restores and pins: trtls.app.rollback asks it
    "trtls.builds.supervisor.job": {"worker_job"},
    "trtls.builds.avoidance.cells": None,  # a matrix's cells looked up before it starts, restored after
    "trtls.builds.supervisor.supervisor": {"worker_job"},
    # a reduction or a divergence search is constructed and run by trtls.app.triage: a face renders it
    "trtls.triage.reduce_build": {"new_reduction", "run_reduction", "missing_modules"},
    "trtls.triage.trials": {"TrialRunner"},
    "trtls.triage.resume": {"prepare_resume"},
    "trtls.triage.diverge_run": {"setup_divergence", "run_divergence"},
    "trtls.triage.diverge_pair": {"run_pair_divergence"},
}
# a face that reads a job without starting anything, and why
READS_A_JOB = {"cli/store_why_sides.py": "`trtls store why` keys the recipe to explain a key; it starts nothing"}


def _supervisor_start(node: ast.Call) -> bool:
    """`<a supervisor>.start(...)`: ls.supervisor.start, sup.start, Supervisor().start."""
    fn = node.func
    if not (isinstance(fn, ast.Attribute) and fn.attr == "start"):
        return False
    target = ast.unparse(fn.value)
    return target.split(".")[-1] in ("supervisor", "sup") or target.startswith("Supervisor(")


def test_no_face_starts_work_around_the_application_layer() -> None:
    bad = []
    for face in FACES:
        for path in sorted((PKG / face).rglob("*.py")):
            rel = str(path.relative_to(PKG))
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.module in STARTS_WORK:
                    names = STARTS_WORK[node.module]
                    hit = [a.name for a in node.names if names is None or a.name in names]
                    if hit and rel not in READS_A_JOB:
                        bad.append(f"{rel}:{node.lineno} imports {node.module}: {', '.join(hit)}")
                elif isinstance(node, ast.Import) and any(
                    a.name == "trtls.builds.avoidance.lookup" for a in node.names
                ):
                    bad.append(f"{rel}:{node.lineno} {ast.unparse(node)}")
                elif isinstance(node, ast.ImportFrom) and node.module == "trtls.builds.avoidance":
                    bad += [f"{rel}:{node.lineno} imports the lookup" for a in node.names if a.name == "lookup"]
                elif isinstance(node, ast.Call) and _supervisor_start(node):
                    bad.append(f"{rel}:{node.lineno} {ast.unparse(node.func)}(…)")
    assert bad == []


def test_the_check_sees_what_it_forbids() -> None:
    """The walk above finds a supervisor's start and a store lookup where they are written."""
    app = (PKG / "app" / "build.py").read_text(encoding="utf-8")
    tree = ast.parse(app)
    assert any(isinstance(n, ast.Call) and _supervisor_start(n) for n in ast.walk(tree))
    assert any(isinstance(n, ast.ImportFrom) and n.module == "trtls.builds.avoidance" for n in ast.walk(tree))


def test_the_check_sees_a_triage_run_constructed_where_it_is() -> None:
    """trtls.app.triage constructs the reduction and the divergence search the faces used to build themselves: the
    names the check forbids in a face are the ones imported there."""
    imported = set()
    for name in ("triage.py", "triage_runs.py"):
        for node in ast.walk(ast.parse((PKG / "app" / name).read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module in STARTS_WORK:
                imported |= {(node.module, a.name) for a in node.names}
    triage = {(m, n) for m, names in STARTS_WORK.items() if m.startswith("trtls.triage.") for n in names or ()}
    assert triage and triage <= imported, triage - imported
