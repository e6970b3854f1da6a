"""The layer rules of docs/architecture.md, checked on the real import graph."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "server" / "trtls"
FORBIDDEN = {
    "core": (
        "trtls.builds",
        "trtls.gates",
        "trtls.lsp",
        "trtls.accept",
        "trtls.cli.main",
        "pygls",
        "lsprotocol",
        "tensorrt",
        "tensorrt_rtx",
    ),
    "builds": ("trtls.gates", "trtls.lsp", "trtls.accept", "trtls.cli.main", "pygls", "lsprotocol"),
    # the model checks run on every keystroke: no builder, no editor types, and no `onnx` package (its parser
    # loads every weight; trtls.models reads the wire format itself)
    "models": (
        "trtls.builds",
        "trtls.gates",
        "trtls.lsp",
        "trtls.accept",
        "trtls.cli",
        "pygls",
        "lsprotocol",
        "tensorrt",
        "tensorrt_rtx",
        "onnx",
    ),
    "gates": ("trtls.lsp", "trtls.accept", "pygls", "lsprotocol"),
    # importers turn other tools' command lines into recipe text: no builder, no faces
    "importers": (
        "trtls.builds",
        "trtls.gates",
        "trtls.lsp",
        "trtls.accept",
        "trtls.cli",
        "pygls",
        "lsprotocol",
        "tensorrt",
        "tensorrt_rtx",
    ),
    # pictures read evidence on disk: no builder, no faces
    "report": ("trtls.lsp", "trtls.accept", "trtls.cli", "pygls", "lsprotocol", "tensorrt", "tensorrt_rtx"),
}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = "trtls." + ".".join(path.relative_to(PKG).with_suffix("").parts[:-1])
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # resolve relative imports against the module's package
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                out.add(".".join(base + ([node.module] if node.module else [])))
            elif node.module:
                out.add(node.module)
    return out


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports(layer: str) -> None:
    bad = []
    for path in sorted((PKG / layer).rglob("*.py")):
        for mod in imported_modules(path):
            if any(mod == f or mod.startswith(f + ".") for f in FORBIDDEN[layer]):
                bad.append(f"{path.relative_to(PKG)} imports {mod}")
    assert bad == []


RAY_MODULES = {
    "builds/farm/node_worker.py",
    "builds/farm/remote_process.py",
    "builds/farm/cluster.py",
    "builds/farm/warm_actors.py",
}


def test_only_the_farm_transport_imports_ray() -> None:
    """Ray is an optional extra (`trtls[farm]`), reached only when a recipe has [cluster] (tests/farm)."""
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        rel = str(path.relative_to(PKG))
        if rel in RAY_MODULES:
            continue
        bad += [f"{rel} imports {m}" for m in imported_modules(path) if m == "ray" or m.startswith("ray.")]
    assert bad == []


def test_server_process_never_imports_tensorrt() -> None:
    code = (
        "import sys, trtls.lsp.server, trtls.cli.main; print(sorted(m for m in sys.modules if "
        "m.startswith('tensorrt')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_initialize_path_imports_neither_pydantic_nor_the_build_core() -> None:
    """Everything before `initialize` is answered is pygls, lsprotocol and the stdlib (the rest loads after)."""
    code = (
        "import sys, trtls.lsp.server; print(sorted(m for m in ('pydantic', 'trtls.core.recipe', "
        "'trtls.builds.supervisor', 'trtls.lsp.editor') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_worker_imports_neither_pydantic_nor_the_event_models() -> None:
    """Every build pays the worker's start-up before TensorRT is even imported (issue 14's fixed cost):
    the worker speaks the protocol with the standard library (core.protocol), never core.events."""
    code = (
        "import sys, trtls.builds.worker; print(sorted(m for m in ('pydantic', 'trtls.core.events', "
        "'trtls.core.recipe') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
