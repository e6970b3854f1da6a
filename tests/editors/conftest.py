from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

# .ci/run installs the editors and tools these tests drive and sets TRTLS_REQUIRE_EDITORS=1, so a missing one
# fails there instead of skipping silently; on a developer machine without them the tests skip and say why.
REQUIRED = os.environ.get("TRTLS_REQUIRE_EDITORS") == "1"


def require_tool(name: str, env: str | None = None) -> str:
    path = os.environ.get(env) if env else None
    cached = Path.home() / ".cache" / "trtls-tools" / "node_modules" / ".bin" / name  # where .ci/setup puts npm tools
    path = path or shutil.which(name) or (str(cached) if cached.exists() else None)
    if path is None:
        if REQUIRED:
            pytest.fail(f"{name} is required here (TRTLS_REQUIRE_EDITORS=1) but was not found")
        pytest.skip(f"{name} is not installed (.ci/run installs it)")
    return path
