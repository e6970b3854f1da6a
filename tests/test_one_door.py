"""One door (issue 27): every create, replace, append, delete, rename, touch, lock, chmod, mkdir, every signal to a
process and every read of a file goes through `trtls.fs`. This walks the AST of every module under `server/` and
fails on any other way, so a new feature cannot forget the policy: it cannot reach the filesystem without it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "server" / "trtls"
DOOR = PKG / "fs"

OS_CALLS = {
    *("remove", "unlink", "rmdir", "rename", "renames", "replace", "removedirs", "makedirs", "mkdir", "chmod"),
    *("fchmod", "lchmod", "chown", "lchown", "truncate", "ftruncate", "symlink", "link", "mkfifo", "mknod"),
    *("utime", "kill", "killpg", "open", "fdopen"),
}
SHUTIL_CALLS = {"rmtree", "move", "copy", "copy2", "copyfile", "copytree", "copymode", "copystat"}
PATH_METHODS = {
    *("write_text", "write_bytes", "touch", "unlink", "rename", "mkdir", "rmdir", "symlink_to", "hardlink_to"),
    *("read_text", "read_bytes"),
}
TEMPFILE_CALLS = {"mkstemp", "mkdtemp", "NamedTemporaryFile", "TemporaryDirectory", "TemporaryFile", "mktemp"}
PROCESS_METHODS = {"kill", "terminate", "send_signal"}
SAVE_OWNERS = {"onnx", "np", "numpy", "torch", "safetensors.numpy", "onnx.external_data_helper"}
SAVE_CALLS = {"save", "save_model", "savez", "savez_compressed", "tofile", "save_file"}


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def violations(path: Path) -> list[str]:
    """`line: what` for every call in `path` that reaches the filesystem or a process without the door."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = _dotted(func)
        what = None
        if isinstance(func, ast.Name) and func.id == "open":
            what = "open()"
        elif isinstance(func, ast.Attribute):
            owner = _dotted(func.value)
            attr = func.attr
            if owner == "os" and attr in OS_CALLS:
                what = f"os.{attr}"
            elif owner == "shutil" and attr in SHUTIL_CALLS:
                what = f"shutil.{attr}"
            elif owner == "tempfile" and attr in TEMPFILE_CALLS:
                what = f"tempfile.{attr}"
            elif attr in PATH_METHODS:
                what = f".{attr}()"
            elif attr == "replace" and len(node.args) == 1 and not node.keywords:  # Path.replace (str takes two)
                what = ".replace()"
            elif attr == "open" and owner not in ("os", "webbrowser"):
                what = f"{name}()"
            elif attr in PROCESS_METHODS:
                what = f".{attr}()"
            elif attr in SAVE_CALLS and owner in (
                "onnx",
                "np",
                "numpy",
                "torch",
                "safetensors.numpy",
                "onnx.external_data_helper",
            ):
                what = f"{name}()"
            elif attr == "tofile":
                what = ".tofile()"
        if what is not None:
            out.append(f"{path.relative_to(PKG.parent)}:{node.lineno}: {what}")
    return out


def _packages() -> list[str]:
    return sorted(
        {p.relative_to(PKG).parts[0] if len(p.relative_to(PKG).parts) > 1 else "(top)" for p in PKG.rglob("*.py")}
        - {"fs"}
    )


@pytest.mark.parametrize("package", _packages())
def test_no_filesystem_or_process_call_outside_the_door(package: str) -> None:
    files = sorted(PKG.glob("*.py")) if package == "(top)" else sorted((PKG / package).rglob("*.py"))
    found = [v for f in files for v in violations(f)]
    assert not found, "outside trtls.fs:\n" + "\n".join(found)


def test_the_walker_sees_each_forbidden_form(tmp_path: Path) -> None:
    """The scan itself can fail: every form it must catch, written once, is caught."""
    probe = PKG / "_door_probe_never_committed.py"
    lines = [
        "import os, shutil, tempfile, onnx", "from pathlib import Path", "p = Path('x')",
        "open('f', 'w')", "open('f')", "os.remove('f')", "os.replace('a', 'b')", "os.kill(1, 9)", "os.killpg(1, 9)",
        "os.open('f', os.O_CREAT)", "shutil.rmtree('d')", "shutil.copyfile('a', 'b')", "tempfile.mkdtemp()",
        "p.write_text('x')", "p.touch()", "p.unlink()", "p.replace('y')", "p.mkdir()", "p.read_bytes()",
        "p.open('wb')", "proc.kill()", "onnx.save(m, 'f')",
    ]  # fmt: skip
    probe.write_text("\n".join(lines) + "\n'a'.replace('b', 'c')\n", encoding="utf-8")
    try:
        found = violations(probe)
    finally:
        probe.unlink()
    assert len(found) == len(lines) - 3, found  # every call line but the imports and `p = Path`; str.replace is not
