"""`trtls import trtexec --write trtls.toml` reads the recipe, adds its table and replaces the file. An edit made in
between — another `trtls import` run beside it (`xargs -P`), an editor's save — was replaced by the import's copy
of the older text: two imports in parallel each said "wrote [engines.…]" and one table was gone (1 round in 6
here). The door now replaces a file trtls edits for the user only while it still holds the bytes that were read
(`unchanged=`, compared and renamed under a lock on the folder): the import refuses, TRT412, nothing written, the
edit kept; run again, it adds its table to the edited recipe.

Real `trtls import` processes; the first is held between its read and its write by an audit hook (the
`sitecustomize` the hostile-filesystem tests use too) while the recipe is edited."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import onnx
from onnx import TensorProto, helper

PAUSE = """
import os, sys, time
_dir = os.environ.get("TRTLS_TEST_PAUSE_DIR")
if _dir:
    def _hook(event, args):
        name = args[0] if event == "open" and args else None
        if isinstance(name, str) and name.startswith(".trtls.toml.") and name.endswith(".tmp"):
            open(os.path.join(_dir, "paused"), "w").close()
            deadline = time.monotonic() + 60
            while not os.path.exists(os.path.join(_dir, "go")) and time.monotonic() < deadline:
                time.sleep(0.02)
    sys.addaudithook(_hook)
"""


def _model(path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    onnx.save(helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])), path)


def _import(folder: Path, name: str) -> list[str]:
    return [sys.executable, "-m", "trtls", "import", "trtexec", "--name", name, "--write", "trtls.toml", "--"] + [
        "--onnx=m.onnx",
        f"--saveEngine={name}.engine",
    ]


def test_an_edit_made_while_an_import_writes_the_recipe_is_never_lost(tmp_path: Path) -> None:
    folder = tmp_path / "proj"
    folder.mkdir()
    _model(folder / "m.onnx")
    recipe = folder / "trtls.toml"
    first = subprocess.run(_import(folder, "first"), cwd=folder, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    site, pause = tmp_path / "site", tmp_path / "pause"
    site.mkdir()
    pause.mkdir()
    (site / "sitecustomize.py").write_text(PAUSE)
    env = {**os.environ, "TRTLS_TEST_PAUSE_DIR": str(pause), "PYTHONPATH": str(site)}
    held = subprocess.Popen(
        _import(folder, "second"), cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 120
        while not (pause / "paused").exists() and held.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert (pause / "paused").exists(), held.communicate()
        edited = recipe.read_text() + "\n# the user's own edit, saved while the import was writing\n"
        recipe.write_text(edited)  # what another import or an editor's save does meanwhile
    finally:
        (pause / "go").touch()
    out, err = held.communicate(timeout=120)
    assert recipe.read_text() == edited, "the edit made meanwhile was replaced by the import's older copy"
    assert held.returncode == 2 and "TRT412" in err and "nothing written" in err, out + err
    assert "Traceback" not in err
    again = subprocess.run(_import(folder, "second"), cwd=folder, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    text = recipe.read_text()
    assert "# the user's own edit" in text and "[engines.first]" in text and "[engines.second]" in text
