"""Shared helpers for the trtls benchmarks: sample workspaces, percentiles, result output.

Every benchmark prints its figures and, with `--json PATH`, writes them as one JSON object that
`run_all.py` folds into docs/performance.md. Each result has `figures`: a list of
{name, value, unit, target, pass, detail}.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "quickstart"
sys.path.insert(0, str(ROOT))  # tests.quickstart: the quickstart recipe's profiles for a benchmark's own recipe
from tests.quickstart import quickstart_profiles  # noqa: E402

__all__ = ["quickstart_profiles"]  # re-exported for the benchmarks that write recipes


def every_build_builds() -> None:
    """For a benchmark that times or stops builds: each must really build. With the engine store on, a second build
    of the same unchanged engine is served from it (nothing to time or stop), and builds of one key started together
    wait for the first and are then served. Off for this process and every server or CLI it starts."""
    os.environ["TRTLS_STORE"] = "off"


def bytecode_as_installed(*packages: str) -> None:
    """Every process this benchmark starts reads its modules' bytecode, as an installed trtls and Ray have it (pip
    compiles at install): PYTHONDONTWRITEBYTECODE — set in this repository's shells — is dropped for this process and
    its children, and trtls's own modules and the whole folder each of `packages` (a farm's: `ray`) is installed in
    — its dependencies with it (pydantic, aiohttp, grpc: what the CLI and Ray's agents import) — are compiled once,
    here, outside any timing; where they already are (a pip install), that is a look at each file's time stamp. With it
    set, each process of a farm run — the CLI, Ray's workers and agents, every build worker — compiled trtls's modules
    from source (~0.2–0.3 s per process here) and the fixed cost measured that; the device kit's payload comes with no
    bytecode at all. No PYTHONPYCACHEPREFIX (as the single-process benchmarks use): Ray's own processes would then
    compile all of Ray's modules into it, cold."""
    import importlib.util

    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    folders = [str(ROOT / "server" / "trtls")]
    for name in packages:
        spec = importlib.util.find_spec(name)
        for location in (spec.submodule_search_locations or []) if spec is not None else []:
            folders.append(str(Path(location).parent))  # the site folder: the package and what it imports
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "-j", "0", *dict.fromkeys(folders)], check=False, capture_output=True
    )


def ensure_models() -> None:
    models = SAMPLE / "models"
    if not (models / "demo.onnx").is_file() or not (models / "large.onnx").is_file():
        subprocess.run([sys.executable, str(SAMPLE / "make_models.py")], check=True)


def workspace(parent: Path | None = None, name: str = "ws") -> Path:
    """A fresh copy of the quickstart sample (recipe + models; no build outputs, no .trtls)."""
    ensure_models()
    parent = parent or Path(tempfile.mkdtemp(prefix="trtls-bench-"))
    ws = parent / name
    shutil.copytree(SAMPLE, ws, ignore=shutil.ignore_patterns(".trtls", "build", "__pycache__", "make_models.py"))
    return ws


def edit_recipe(recipe: Path, engine: str | None = None) -> None:
    """A person's edit to the recipe before a build. `engine` None: a comment added — the fast path's memo no longer
    holds by the recipe's bytes, while every engine's view of the recipe, so its job and key, is the same
    (builds/avoidance/recipe_view.py). `engine`: that engine's own `output` moved (`build/NAME.engine` ↔
    `build/NAME-edited.engine`) — its job changed (the output is in it; not in the key, so a store keeps serving it),
    so no job can go ahead of the recipe's check: the build's work is the same, its job waits for the check. Until
    2026-12-07 16:00 UTC this edited the engine's `cancel_grace_s`, which no job reads: since then such an edit leaves
    the engine's view (`recipe_view.NO_JOB_READS`) and the last job goes ahead, as after a comment."""
    if engine is None:
        with open(recipe, "a") as fh:
            fh.write(f"# edited before run {time.time_ns()}\n")
        return
    text = recipe.read_text()
    header = f"[engines.{engine}]\n"
    start = text.index(header) + len(header)
    end = text.find("\n[", start)
    end = len(text) if end < 0 else end
    output = re.search(rf'^output = "build/{re.escape(engine)}(-edited)?\.engine"$', text[start:end], re.M)
    if output is None:
        raise ValueError(f'{recipe}: [engines.{engine}] has no `output = "build/{engine}.engine"` line to edit')
    moved = f'output = "build/{engine}{"" if output.group(1) else "-edited"}.engine"'
    recipe.write_text(text[: start + output.start()] + moved + text[start + output.end() :])


def percentile(values: Iterable[float], p: float) -> float | None:
    """Nearest-rank percentile (p in 0..100): the value at or above which (100-p)% of samples lie."""
    v = sorted(values)
    if not v:
        return None
    k = max(0, min(len(v) - 1, math.ceil(p / 100 * len(v)) - 1))
    return v[k]


def dist(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "p50": round(statistics.median(values), 3),
        "p95": round(percentile(values, 95), 3),
        "p99": round(percentile(values, 99), 3),
        "max": round(max(values), 3),
        "min": round(min(values), 3),
    }


def fmt_dist(d: dict[str, Any], unit: str = "ms") -> str:
    if not d.get("n"):
        return "no samples"
    return f"p50 {d['p50']:g} · p95 {d['p95']:g} · p99 {d['p99']:g} · max {d['max']:g} {unit} (n={d['n']})"


def figure(
    name: str, value: Any, unit: str = "", target: str | None = None, ok: bool | None = None, detail: str = ""
) -> dict[str, Any]:
    return {"name": name, "value": value, "unit": unit, "target": target, "pass": ok, "detail": detail}


def parser(doc: str | None) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=(doc or "").strip().splitlines()[0] if doc else None)
    ap.add_argument("--json", type=Path, help="also write the result as JSON to this file")
    ap.add_argument("--quick", action="store_true", help="fewer samples (a smoke run, not a measurement)")
    return ap


def emit(result: dict[str, Any], json_path: Path | None) -> None:
    print(f"\n== {result['title']} ==")
    for f in result["figures"]:
        verdict = "" if f["pass"] is None else ("PASS" if f["pass"] else "MISS")
        target = f"  target {f['target']}" if f.get("target") else ""
        value = f["value"]
        if isinstance(value, float):
            value = f"{value:g}"
        print(f"  {f['name']}: {value} {f['unit']}{target}  {verdict}".rstrip())
        if f.get("detail"):
            print(f"      {f['detail']}")
    for note in result.get("notes", []):
        print(f"  note: {note}")
    if json_path:
        json_path.write_text(json.dumps(result, indent=2, default=str))
