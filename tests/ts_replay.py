"""Run real server notifications through the extension's real TypeScript model (extension/test/replay.ts, compiled
by the extension's own `tsc -p .`), so Python tests compare what the VS Code tree shows with the other faces."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

EXTENSION = Path(__file__).resolve().parents[1] / "extension"
_compiled = False


def replay(notifications: list[dict[str, Any]]) -> dict[str, Any]:
    """{"held": [the phases the model holds after each notification], "tree": [every row: depth, label,
    description]}. Compiles the extension once per test session (its npm dependencies come from .ci/setup)."""
    global _compiled
    node, npx = shutil.which("node"), shutil.which("npx")
    assert node and npx, "node and npx are needed (.ci/setup installs them with the extension's dependencies)"
    if not _compiled:
        subprocess.run([npx, "tsc", "-p", "."], cwd=EXTENSION, check=True, capture_output=True)
        _compiled = True
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(notifications, fh)
    try:
        out = subprocess.run(
            [node, str(EXTENSION / "out" / "test" / "replay.js"), fh.name], check=True, capture_output=True, text=True
        )
    finally:
        Path(fh.name).unlink()
    return json.loads(out.stdout)
