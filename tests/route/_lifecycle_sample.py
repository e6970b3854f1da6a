"""The route sample's ONNX Runtime route taken to `supported` for real (make_checkpoint.py → `trtls route lock` →
`trtls route build` twice → `trtls gates --record-baseline` → `trtls gates`), in a tmp folder: what the promotion
tests start from. The recipe keeps only the engine table and [routes.tiny_ort] (the other routes are not needed)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "samples" / "route"
GENERATED = ("checkpoints", "inputs", "build", "releases", ".trtls", "trtls.lock.json", "model.onnx", "__pycache__")
ROUTE = "tiny_ort"


def trtls(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess:
    """The CLI with no approver in the environment unless `env` gives one (the tests say who approves): no
    $TRTLS_APPROVER, no $USER, and git reads no global or system config (so no user.email)."""
    full = {k: v for k, v in os.environ.items() if k not in ("TRTLS_APPROVER", "USER")}
    full.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "trtls.cli.main", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full,
    )


def only_tiny_ort(text: str) -> str:
    head = text[: text.index("[routes.tiny]")]
    start = text.index("[routes.tiny_ort]")
    end = text.index("# Gate 1 holds")
    return head + text[start:end]


def supported_sample(dest: Path) -> Path:
    shutil.copytree(SAMPLE, dest, ignore=shutil.ignore_patterns(*GENERATED))
    (dest / "trtls.toml").write_text(only_tiny_ort((dest / "trtls.toml").read_text()))
    r = subprocess.run([sys.executable, "make_checkpoint.py"], cwd=dest, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    for args in (
        ("route", "lock", "--route", ROUTE),
        ("route", "build", "--route", ROUTE),
        ("route", "build", "--route", ROUTE),
    ):
        r = trtls(*args, cwd=dest)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    r = trtls("gates", "--route", ROUTE, "--record-baseline", cwd=dest)
    assert r.returncode == 3, r.stdout[-3000:] + r.stderr[-2000:]
    r = trtls("gates", "--route", ROUTE, cwd=dest)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    return dest


def copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest, symlinks=True)
    return dest


def summary(root: Path, name: str = "complete-summary.json") -> dict:
    return json.loads((root / ".trtls" / "routes" / ROUTE / name).read_text())


def set_in_route(root: Path, old: str, new: str) -> None:
    path = root / "trtls.toml"
    text = path.read_text()
    assert text.count(old) >= 1, old
    path.write_text(text.replace(old, new, 1))


ENGINE_ROUTE = """
[routes.trt]
engine = "tiny"
checkpoint = { path = "checkpoints/models--trtls--tiny-mlp", id = "trtls/tiny-mlp", \
revision = "d065c296e0fef52b015f4755c02dda4b3064c1d2" }
intended_use = "tests: hold reasons"
allowed_licenses = ["apache-2.0"]
bundle = "build/trt.bundle"
runtime = "tensorrt_rtx"
"""


def add_engine_route(root: Path, extra: str = "", engine_extra: str = "") -> None:
    text = (root / "trtls.toml").read_text()
    if engine_extra:
        text = text.replace('builder_module = "tensorrt_rtx"\n', f'builder_module = "tensorrt_rtx"\n{engine_extra}', 1)
    (root / "trtls.toml").write_text(text + ENGINE_ROUTE + extra)
