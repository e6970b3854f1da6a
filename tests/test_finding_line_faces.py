"""A finding reads the same in every command (cli/common.finding_line, the one renderer): real `trtls` processes on a
recipe with a known error — the TRT104 of an ONNX model that is not there, whose name carries ESC and a CSI (clear
the screen) — print it as `file:line:col: CODE severity: message` through `trtls import trtexec --write` (its
findings on the table it wrote) and through `trtls check`, byte for byte the same line, the control character
escaped (`\\x1b`) in both. Before, `check` and `import` each built the line by hand and neither escaped it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def trtls(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "trtls", *args], cwd=cwd, capture_output=True, timeout=300)


def test_the_same_finding_renders_identically_through_check_and_import_escaped(tmp_path: Path) -> None:
    imported = trtls("import", "trtexec", "--write", "trtls.toml", "--", "--onnx=m\x1b[2J.onnx", cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    checked = trtls("check", ".", cwd=tmp_path)
    assert checked.returncode == 2, (checked.stdout, checked.stderr)
    for r in (imported, checked):
        assert b"\x1b" not in r.stdout + r.stderr, (r.stdout, r.stderr)

    recipe = tmp_path.resolve() / "trtls.toml"
    want = f"{recipe}:3:8: TRT104 error: ONNX file not found: {recipe.parent / 'm'}\\x1b[2J.onnx"
    said_by_import = [x for x in imported.stderr.decode().splitlines() if "TRT104" in x]
    said_by_check = [x for x in checked.stdout.decode().splitlines() if "TRT104" in x]
    assert said_by_import == said_by_check == [want], (said_by_import, said_by_check)
