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
    *("utime", "kill", "killpg", "open", "fdopen", "system", "popen"),
}
SHUTIL_CALLS = {"rmtree", "move", "copy", "copy2", "copyfile", "copytree", "copymode", "copystat"}
SHUTIL_CALLS |= {"unpack_archive", "make_archive", "chown"}
PATH_METHODS = {
    *("write_text", "write_bytes", "touch", "unlink", "rename", "mkdir", "rmdir", "symlink_to", "hardlink_to"),
    *("read_text", "read_bytes", "chmod", "lchmod"),
}
TEMPFILE_CALLS = {"mkstemp", "mkdtemp", "NamedTemporaryFile", "TemporaryDirectory", "TemporaryFile", "mktemp"}
PROCESS_METHODS = {"kill", "terminate", "send_signal"}
SAVE_OWNERS = {"onnx", "numpy", "torch", "safetensors.numpy", "onnx.external_data_helper"}
SAVE_CALLS = {"save", "save_model", "savez", "savez_compressed", "tofile", "save_file"}
# a file a user, a recipe or a record names, read by a library's own open (a FIFO hangs it, /dev/zero fills memory):
# read through `fs.models` (`fs.open_regular` underneath) instead
LOADERS = {
    *("onnx.load", "onnx.load_model", "onnx.load_tensor", "onnx.external_data_helper.load_external_data_for_model"),
    *("onnx.external_data_helper.load_external_data_for_tensor", "numpy.load", "numpy.fromfile", "numpy.loadtxt"),
    *("numpy.genfromtxt", "safetensors.numpy.load_file", "safetensors.safe_open", "torch.load"),
}
LOCKS = {"fcntl.flock", "fcntl.lockf"}  # a lock is taken on a descriptor of `fs.open_lock_file` by `fs.lock` only
# a command that writes, deletes, changes a mode or a flag, or signals, run instead of the door's own call
TOOLS = {"rm", "rmdir", "mv", "cp", "ln", "kill", "pkill", "killall", "chmod", "chown", "chattr", "truncate", "dd"}
TOOLS |= {"tar", "unzip", "install", "shred", "touch", "mkdir"}
RUNNERS = {"subprocess.run", "subprocess.Popen", "subprocess.call", "subprocess.check_call", "subprocess.check_output"}
RUNNERS |= {"asyncio.create_subprocess_exec", "asyncio.create_subprocess_shell", "os.system", "os.popen"}
RUNNERS |= {f"os.{name}" for name in ("execv", "execve", "execvp", "execvpe", "execl", "execlp", "spawnv", "spawnvp")}
# a library that must be given the model's path (it resolves external data beside it): only right after the door
# said the path is a regular file (`fs.models.require_regular`, called in the same function)
PATH_READERS = {"parse_from_file", "InferenceSession", "convert_to_mixed_precision"}
DOOR_OWNERS = ("trtls.fs", "fs")  # `fs.chmod(…)`, `fs.touch(…)`: the door's own functions, named like the forms above


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""  # `Path(x).unlink()`, `procs[0].kill()`: no name to resolve, judged by the method alone
    parts.append(node.id)
    return ".".join(reversed(parts))


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Each name a module binds by an import → the dotted name it stands for: `import os as _os` (`_os` → `os`),
    `import numpy as np` (`np` → `numpy`), `from os import remove` (`remove` → `os.remove`), `from shutil import
    rmtree as rt` (`rt` → `shutil.rmtree`). A call is judged by what it names, not how the module spelled it."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    out[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                out[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return out


def _canonical(name: str, aliases: dict[str, str]) -> str:
    head, dot, rest = name.partition(".")
    return aliases.get(head, head) + dot + rest if head else name


def _tool(node: ast.Call, aliases: dict[str, str]) -> str | None:
    """The program a process-starting call runs, when its argv is written out: `["chattr", "+i", p]`, `"rm -rf x"`,
    `[shutil.which("kill"), …]`."""
    if not node.args:
        return None
    first = node.args[0]
    if isinstance(first, (ast.List, ast.Tuple)) and first.elts:
        first = first.elts[0]
    if isinstance(first, ast.Call) and _canonical(_dotted(first.func), aliases) == "shutil.which" and first.args:
        first = first.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value.split():
        return Path(first.value.split()[0]).name
    return None


def _guarded(tree: ast.AST) -> set[int]:
    """The calls (by id) inside a function that calls `require_regular` (the innermost function decides)."""
    guarded: dict[int, bool] = {}
    for fn in ast.walk(tree):  # breadth first: an outer function before the ones inside it
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call)]
            checks = any(_dotted(c.func).rpartition(".")[2] == "require_regular" for c in calls)
            guarded.update((id(c), checks) for c in calls)
    return {k for k, v in guarded.items() if v}


def _serialized(node: ast.Call) -> bool:
    """`InferenceSession(model.SerializeToString(), …)` or `(b"…")`: bytes, no path to open."""
    first = node.args[0] if node.args else None
    if isinstance(first, ast.Call) and isinstance(first.func, ast.Attribute):
        return first.func.attr == "SerializeToString"
    return isinstance(first, ast.Constant) and isinstance(first.value, bytes)


def violations(path: Path) -> list[str]:
    """`line: what` for every call in `path` that reaches the filesystem or a process without the door."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    aliases = _aliases(tree)
    guarded = _guarded(tree)
    out: list[str] = []
    written_out: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = _canonical(_dotted(func), aliases)
        owner, _, attr = name.rpartition(".")
        if not name and isinstance(func, ast.Attribute):  # `Path(x).unlink()`, `proc().kill()`: no dotted owner
            owner, attr = "?", func.attr
        what = None
        if name == "open" or name == "builtins.open":
            what = "open()"
        elif owner == "os" and attr in OS_CALLS:
            what = f"os.{attr}"
        elif owner == "shutil" and attr in SHUTIL_CALLS:
            what = f"shutil.{attr}"
        elif owner == "tempfile" and attr in TEMPFILE_CALLS:
            what = f"tempfile.{attr}"
        elif name in LOADERS:
            what = f"{name}() reads a named file"
        elif name in LOCKS:
            what = f"{name}()"
        elif name in RUNNERS and (tool := _tool(node, aliases)) in TOOLS:
            what = f"{name}() runs {tool}"
        elif attr in PATH_READERS and not _serialized(node) and id(node) not in guarded:
            what = f"{attr}() of a path no fs.models.require_regular checked"
        elif owner in SAVE_OWNERS and attr in SAVE_CALLS:
            what = f"{name}()"
        elif not isinstance(func, ast.Attribute) or owner in DOOR_OWNERS or owner.startswith("trtls."):
            pass
        elif attr in PATH_METHODS:
            what = f".{attr}()"
        elif attr == "replace" and len(node.args) == 1 and not node.keywords:  # Path.replace (str takes two)
            what = ".replace()"
        elif attr == "open" and owner not in ("os", "webbrowser"):
            what = f"{name or attr}()"
        elif attr in PROCESS_METHODS:
            what = f".{attr}()"
        elif attr in ("extractall", "extract") and owner not in ("re",):  # tarfile/zipfile: writes what it names
            what = f".{attr}()"
        elif attr == "tofile":
            what = ".tofile()"
        if what is not None:
            out.append(f"{path.relative_to(PKG.parent)}:{node.lineno}: {what}")
        if name in RUNNERS and node.args and isinstance(node.args[0], (ast.List, ast.Tuple)):
            written_out.add(id(node.args[0]))  # judged above, as the call's own argv
    for node in ast.walk(tree):  # an argv held in a variable before it runs: `argv = ["rm", "-rf", p]`
        held = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else node
        if isinstance(held, (ast.List, ast.Tuple)) and held.elts and id(held) not in written_out:
            program = held.elts[0]
        elif held is not node and isinstance(held, ast.Constant):  # `cmd = "rm -rf d"`, for a shell
            program = held
        else:
            continue
        words = program.value.split() if isinstance(program, ast.Constant) and isinstance(program.value, str) else []
        # a program is one word in an argv, the first of several in a command line
        if words and len(words) == (1 if program is not held else max(2, len(words))):
            if (tool := Path(words[0]).name) in TOOLS:
                written_out.add(id(held))
                out.append(f"{path.relative_to(PKG.parent)}:{getattr(node, 'lineno', 0)}: an argv that runs {tool}")
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
    """The scan itself can fail: every form it must catch, written once, is caught — under any import spelling —
    and the door's own calls and harmless look-alikes are not."""
    probe = PKG / "_door_probe_never_committed.py"
    imports = [
        "import os, shutil, tempfile, onnx, subprocess, asyncio, fcntl, tarfile", "from pathlib import Path",
        "import os as _os", "import numpy as np", "import shutil as sh", "from os import remove, kill as k",
        "from shutil import rmtree", "from safetensors.numpy import load_file", "from fcntl import flock",
        "from trtls import fs", "from trtls.fs import chmod, touch", "p = Path('x')",
    ]  # fmt: skip
    calls = [
        "open('f', 'w')", "open('f')", "os.remove('f')", "os.replace('a', 'b')", "os.kill(1, 9)", "os.killpg(1, 9)",
        "os.open('f', os.O_CREAT)", "shutil.rmtree('d')", "shutil.copyfile('a', 'b')", "tempfile.mkdtemp()",
        "p.write_text('x')", "p.touch()", "p.unlink()", "p.replace('y')", "p.mkdir()", "p.read_bytes()",
        "p.open('wb')", "proc.kill()", "onnx.save(m, 'f')",
        # issue 27's audit: each form the walker used to miss
        "p.chmod(0o777)", "p.lchmod(0o777)", "Path('y').chmod(0o600)",
        "_os.remove('f')", "_os.kill(1, 9)", "remove('f')", "k(1, 9)", "rmtree('d')", "sh.move('a', 'b')",
        "subprocess.run(['chattr', '+i', 'd'])", "subprocess.run(['rm', '-rf', 'd'])",
        "subprocess.Popen(('mv', 'a', 'b'))", "subprocess.check_call(['/bin/cp', 'a', 'b'])",
        "subprocess.call(['kill', '-9', '1'])",
        "subprocess.run(['chmod', '777', 'f'])", "subprocess.run('rm -rf d', shell=True)", "os.system('kill 1')",
        "asyncio.create_subprocess_exec('chattr', '-i', 'd')", "subprocess.run([shutil.which('rm'), 'f'])",
        "tf.extractall('d')", "z.extractall()", "shutil.unpack_archive('a.zip', 'd')",
        "shutil.make_archive('b', 'zip', 'd')", "fcntl.flock(fd, fcntl.LOCK_EX)", "fcntl.lockf(fd, fcntl.LOCK_EX)",
        "flock(fd, 2)", "onnx.load('m.onnx')", "onnx.load_model('m.onnx')", "np.load('x.npz')",
        "load_file('w.safetensors')", "ort.InferenceSession('m.onnx')", "parser.parse_from_file('m.onnx')",
        "convert_to_mixed_precision(onnx_path='m.onnx')",
        # an argv held in a variable before it runs
        "argv = ['rm', '-rf', 'd']; subprocess.run(argv)", "cmd = ('/bin/kill', '-9', '1'); subprocess.Popen(cmd)",
        "line = 'chattr -i d'; subprocess.run(line, shell=True)", "argv: list[str] = ['mv', 'a', 'b']",
    ]  # fmt: skip
    allowed = [
        "'a'.replace('b', 'c')", "fs.chmod(p, 0o600, kind=K, within=w)", "fs.touch(p, kind=K, within=w)",
        "chmod(p, 0o600, kind=K, within=w)", "touch(p, kind=K, within=w)", "subprocess.run(['git', 'status'])",
        "subprocess.run([sys.executable, '-m', 'trtls'])", "onnx.load_from_string(b'')", "np.asarray([1])",
        "ort.InferenceSession(m.SerializeToString())", "argv = ['git', 'status']; subprocess.run(argv)",
        "words = ['rm is a program', 'x']", "note = 'cp'",
    ]  # fmt: skip
    guarded = "def f(p):\n    require_regular(p)\n    ort.InferenceSession(p)\n    parser.parse_from_file(p)\n"
    probe.write_text("\n".join(imports + calls + allowed) + "\n" + guarded, encoding="utf-8")
    try:
        found = violations(probe)
    finally:
        probe.unlink()
    lines = sorted(int(v.split(":")[1]) for v in found)
    first = len(imports) + 1
    missed = [calls[n - first] for n in range(first, first + len(calls)) if n not in lines]
    assert not missed, f"the walker does not see: {missed}"
    assert lines == list(range(first, first + len(calls))), found  # once each; imports and the allowed lines never
