"""The layer rules, checked on the real import graph. The table itself (each package's process, concept and what it
may import) is data in `trtls.schema.layers`, and docs/architecture.md's package table is generated from it."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from trtls.schema import layers

PKG = Path(__file__).resolve().parents[1] / "server" / "trtls"
# modules that import a module by a computed name, and why (never a first-party one)
BY_NAME_THIRD_PARTY = {"builds/worker/adapter.py": "tensorrt or tensorrt_rtx, the builder module a recipe asks for"}
MAX_LINES = 400  # a module is read in one sitting: never more than 400 lines, measured as ruff formats it


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """Imports under `if TYPE_CHECKING:` never run: they are annotations, not edges of the import graph."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
            skip.update(id(n) for n in ast.walk(node))
    return skip


def imported_modules(path: Path, *, runtime_only: bool = False) -> set[str]:
    """Every module `path` imports, top-level or inside a function (with `runtime_only`, not the TYPE_CHECKING
    ones); `from a import b` counts as `a` and `a.b` (b may be a module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_nodes(tree) if runtime_only else set()
    package = "trtls." + ".".join(path.relative_to(PKG).with_suffix("").parts[:-1])
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # resolve relative imports against the module's package
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            out.add(module)
            out.update(f"{module}.{alias.name}" for alias in node.names)
    return out


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def first_party_graph() -> dict[str, set[str]]:
    """module → the first-party modules it imports when it runs (function-level imports included)."""
    modules = {module_name(p): p for p in PKG.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = set()
        for mod in imported_modules(path, runtime_only=True):
            while mod and mod not in modules:  # `from pkg import name`: the longest prefix that is a module
                mod = mod.rpartition(".")[0]
            if mod and mod != name:
                edges.add(mod)
        graph[name] = edges
    return graph


def package_of(path: Path) -> str:
    return ".".join(path.relative_to(PKG).parent.parts)


def first_party_violations(layer: layers.Layer) -> list[str]:
    """Each import of a module of `layer`'s own folder (its subpackages have rows of their own) that lands in a
    package its row does not name, or in a third-party module it never imports."""
    bad = []
    for path in sorted((PKG / layer.folder).glob("*.py")):
        for mod in imported_modules(path):
            if any(mod == m or mod.startswith(m + ".") for m in layer.never_imports):
                bad.append(f"{path.relative_to(PKG)} imports {mod}")
            target = layers.layer_of(mod) if mod.startswith("trtls.") else None
            if target is not None and not layers.may_import(layer, target):
                bad.append(f"{path.relative_to(PKG)} imports {mod} ({target.folder})")
    return bad


@pytest.mark.parametrize("package", [layer.package for layer in layers.LAYERS])
def test_each_package_imports_only_what_its_row_names(package: str) -> None:
    assert first_party_violations(layers.BY_PACKAGE[package]) == []


def test_the_rule_finds_an_import_its_row_does_not_name() -> None:
    """The worker child importing the supervisor, the store or pydantic; the supervisor importing TensorRT; a lower
    layer importing a face: each is refused by the table."""
    worker, supervisor, core = (layers.BY_PACKAGE[p] for p in ("builds.worker", "builds.supervisor", "core"))
    refused = [(worker, "trtls.builds.supervisor.build"), (worker, "trtls.store.key"), (core, "trtls.lsp.server"),
               (core, "trtls.cli.main"), (supervisor, "trtls.accept.runner")]  # fmt: skip
    for importer, module in refused:
        target = layers.layer_of(module)
        assert target is not None and not layers.may_import(importer, target), (importer.package, module)
    assert "pydantic" in worker.never_imports and "tensorrt" in supervisor.never_imports
    assert layers.may_import(worker, layers.BY_PACKAGE["builds"]) and layers.layer_of("trtls.builds.roots").package == (
        "builds"
    )


def test_every_package_and_subpackage_is_in_the_table() -> None:
    """A folder of modules added under server/trtls (a new subpackage of builds/ too) needs its row: its process, its
    concept, what it may import."""
    assert set(layers.BY_PACKAGE) == layers.packages_on_disk(PKG)
    assert {"builds.worker", "builds.supervisor", "builds.avoidance", "builds.farm", "gates.parity"} <= set(
        layers.BY_PACKAGE
    )
    for layer in layers.LAYERS:
        named = [p for p in layer.may_import if p != layers.EVERYTHING]
        assert set(named) <= set(layers.BY_PACKAGE), f"{layer.package} names a package that is not a row"
        assert layer.runs_in and set(layer.runs_in) <= set(layers.PROCESSES) and layer.serves
        assert layer.package not in named, f"{layer.package} names itself"
    faces = {"cli", "lsp"}
    assert all(f not in layer.may_import for layer in layers.LAYERS for f in faces), "nothing imports a face"


def test_the_key_modules_a_row_names_are_modules_of_its_folder() -> None:
    missing = [f"{layer.folder}{m}" for layer in layers.LAYERS for m in layer.holds
               if not (PKG / layer.folder / f"{m}.py").is_file()]  # fmt: skip
    assert missing == [] and all(layer.holds for layer in layers.LAYERS)


def test_the_architecture_table_is_what_the_layer_table_gives() -> None:
    assert not layers.drifted(), "run .venv/bin/python -m trtls.schema.layers and commit docs/architecture.md"
    r = subprocess.run([sys.executable, "-m", "trtls.schema.layers", "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_the_architecture_check_fails_on_a_stale_table(tmp_path: Path, monkeypatch) -> None:
    stale = tmp_path / "architecture.md"
    stale.write_text(layers.DOC_FILE.read_text().replace("| `builds/worker/` |", "| `builds/child/` |"))
    monkeypatch.setattr(layers, "DOC_FILE", stale)
    assert layers.drifted() and layers.main(["--check"]) == 1
    assert layers.main([]) == 0 and not layers.drifted() and "| `builds/worker/` |" in stale.read_text()


def test_no_import_cycles_among_first_party_modules() -> None:
    """On the real import graph, function-level imports included (a lazy import is still an edge)."""
    graph = first_party_graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert len(graph) > 100 and "trtls.core.recipe" in graph
    assert cycles == []


def test_no_first_party_string_imports() -> None:
    """importlib.import_module / __import__ with a 'trtls…' string hides an edge from every tool: import it."""
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
            if name in ("import_module", "__import__") and node.args:
                arg = node.args[0]
                named = str(arg.value) if isinstance(arg, ast.Constant) else None
                third_party = str(path.relative_to(PKG)) in BY_NAME_THIRD_PARTY
                if (named or "").startswith("trtls") or (named is None and not third_party):
                    bad.append(f"{path.relative_to(PKG)}:{node.lineno} {ast.unparse(node)}")
    assert bad == []


def test_first_party_imports_fail_loudly() -> None:
    """`except ImportError` only around optional third-party libraries: a broken first-party import must not
    turn into a quiet 'not installed'."""
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Try):
                continue
            catches = [h for h in node.handlers if h.type is not None and "ImportError" in ast.unparse(h.type)]
            if not catches:
                continue
            imported = [
                n.module if isinstance(n, ast.ImportFrom) else a.name
                for stmt in node.body
                for n in ast.walk(stmt)
                if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in (n.names if isinstance(n, ast.Import) else [n])  # type: ignore[attr-defined]
            ]
            bad += [f"{path.relative_to(PKG)}:{node.lineno} {m}" for m in imported if m and m.startswith("trtls")]
    assert bad == []


def test_modules_are_read_in_one_sitting() -> None:
    long = {
        str(p.relative_to(PKG)): n
        for p in sorted(PKG.rglob("*.py"))
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def test_the_server_is_formatted_as_ruff_formats_it() -> None:
    """No line opts out of the formatter: a `fmt: skip` or `fmt: off` would let a module squeeze under MAX_LINES."""
    marker = re.compile(r"#\s*fmt:\s*(skip|off)\b")
    opted_out = [
        f"{p.relative_to(PKG)}:{i}"
        for p in sorted(PKG.rglob("*.py"))
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if marker.search(line)
    ]
    assert opted_out == []


RAY_MODULES = {
    "builds/farm/node_worker.py",
    "builds/farm/remote_process.py",
    "builds/farm/node_loss.py",  # what a remote cell's failed transport was (Ray's exceptions)
    "builds/farm/cluster.py",
    "builds/farm/warm_actors.py",
    "builds/farm/warm_head.py",  # the warm local farm's head process (`trtls farm up`)
    "builds/farm/farm_actors.py",  # the warm farm's named node host, one per node (started by its head)
    "builds/farm/node_host.py",  # one node-worker actor per node running every CPU-only cell placed there
    "builds/farm/host_slot.py",  # a CPU-only cell's placement group and place on its node's host (driver side)
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
        "'trtls.builds.supervisor.supervisor', 'trtls.lsp.editor') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_worker_imports_neither_pydantic_nor_the_event_models() -> None:
    """Every build pays the worker's start-up before TensorRT is even imported (issue 14's fixed cost):
    the worker speaks the protocol with the standard library (core.protocol), never core.events."""
    code = (
        "import sys, trtls.builds.worker.main; print(sorted(m for m in ('pydantic', 'trtls.core.events', "
        "'trtls.core.recipe') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
