"""Will each engine load here: build the quickstart's `demo` for several targets with `trtls build` (the default,
SM89 alone, SM80 + SM120, hardware compatibility `ampere_plus`), then ask TensorRT-RTX's
`IRuntime.get_engine_validity` about each engine through `python -m trtls.builds.worker.engine_validity`, and print one
JSON line per target. Run it on a machine with a GPU (the lent H200 host: `../shared/notes/device-farm.md`); with no
GPU each answer is `not_checked`. Its output on the H200 is in benchmarks/results/engine-validity-h200-*.txt.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGETS = {
    "default": "",
    "sm89": 'compute_capabilities = ["SM89"]\n',
    "sm80_sm120": 'compute_capabilities = ["SM80", "SM120"]\n',
    "ampere_plus": 'hardware_compatibility_level = "ampere_plus"\n',
}


def main() -> int:
    demo = ROOT / "samples" / "quickstart" / "models" / "demo.onnx"
    if not demo.is_file():
        subprocess.run([sys.executable, str(ROOT / "samples" / "quickstart" / "make_models.py")], check=True)
    with tempfile.TemporaryDirectory(prefix="trtls-validity-") as tmp:
        ws = Path(tmp)
        (ws / "models").mkdir()
        shutil.copyfile(demo, ws / "models" / "demo.onnx")
        recipe = ""
        for name, builder in TARGETS.items():
            recipe += (
                f'[engines.{name}]\nonnx = "models/demo.onnx"\noutput = "build/{name}.engine"\n'
                f"[engines.{name}.builder]\n{builder}\n"
                f'[[engines.{name}.profiles]]\ninput = "input"\nmin = [1, 3, 32, 32]\nopt = [4, 3, 32, 32]\n'
                "max = [8, 3, 32, 32]\n\n"
            )
        (ws / "trtls.toml").write_text(recipe)
        for name in TARGETS:
            built = subprocess.run(
                [sys.executable, "-m", "trtls", "build", str(ws), "--engine", name, "--no-store"],
                capture_output=True,
                text=True,
            )
            line: dict[str, object] = {"target": name, "builder": TARGETS[name].strip() or "builder default"}
            if built.returncode != 0:
                line["build"] = {"exit": built.returncode, "tail": built.stdout[-600:] + built.stderr[-600:]}
            else:
                asked = subprocess.run(
                    [sys.executable, "-m", "trtls.builds.worker.engine_validity", str(ws / "build" / f"{name}.engine")],
                    capture_output=True,
                    text=True,
                )
                line["exit"] = asked.returncode
                try:
                    line["validity"] = json.loads(asked.stdout)
                except ValueError:
                    line["stdout"], line["stderr"] = asked.stdout[-800:], asked.stderr[-800:]
            print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
