"""The build evidence gate 2 links to a route: the newest successful build of an engine, the effective settings a
recipe asks for, a route build's record, and why a successful build no longer describes the recipe (stale)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trtls.core.summary_record import SUMMARY_NAME, Summary, read_summary
from trtls.gates.files import read_json


def latest_successful_build(recipe_dir: Path, engine: str) -> tuple[Path, Summary] | None:
    """The newest `built` record of `engine` under the recipe's .trtls/runs (core.summary_record's model): a record
    that cannot be read or does not hold together is no record, never a traceback."""
    runs = recipe_dir / ".trtls" / "runs"
    best: tuple[float, Path, Summary] | None = None
    if not runs.is_dir():
        return None
    for summary in runs.glob(f"*/{SUMMARY_NAME}"):
        data = read_summary(summary)
        if not isinstance(data, Summary) or data.engine != engine or data.outcome != "built":
            continue
        started = float(data.startedAt) if data.startedAt is not None else summary.stat().st_mtime
        if best is None or started > best[0]:
            best = (started, summary, data)
    return (best[1], best[2]) if best else None


def effective_settings(loaded: Any, engine: str) -> dict[str, Any]:
    eng = loaded.engine(engine)
    settings = eng.builder.model_dump(exclude={"memory_pool_limits"})
    settings.update(eng.builder.memory_pool_limits.model_dump())
    return {
        "onnx": eng.onnx,
        "output": eng.output,
        "builder_module": eng.builder_module,
        "settings": settings,
        "profiles": eng.job_profiles(),
        "timing_cache": eng.timing_cache.model_dump() if eng.timing_cache else None,
    }


def route_build_record(loaded: Any, route_name: str, bundle: Path) -> tuple[Path, dict[str, Any] | None]:
    """The route build that wrote this route's bundle: its own record, else the newest successful record of another
    route whose bundle digest is this bundle's (a variant that checks the same bundle)."""
    from trtls.checkpoint.hashing import sha256_file

    routes = Path(loaded.base_dir) / ".trtls" / "routes"
    own = routes / route_name / "route-build.json"

    def read(path: Path) -> dict[str, Any] | None:
        rec = read_json(path)
        return rec if isinstance(rec, dict) and rec.get("outcome") == "built" else None

    mine = read(own)
    if mine is not None:
        return own, mine
    try:
        digest = f"sha256:{sha256_file(bundle)[0]}" if bundle.is_file() else None
    except OSError:
        digest = None
    best: tuple[str, Path, dict[str, Any]] | None = None
    for path in sorted(routes.glob("*/route-build.json")):
        rec = read(path)
        if rec is None or digest is None or rec.get("bundle_digest") != digest:
            continue
        stamp = str(rec.get("recordedAt") or "")
        if best is None or stamp > best[0]:
            best = (stamp, path, rec)
    return (best[1], best[2]) if best else (own, None)


def brief_evidence(evidence: dict[str, Any]) -> dict[str, Any]:
    return {
        "evidence_path": evidence.get("path"),
        **{k: evidence.get(k) for k in ("buildId", "buildConfigHash", "timingCacheMode")},
    }


def stale_reasons(loaded: Any, engine: str, summary: Summary) -> list[str]:
    """Why a successful build no longer describes the recipe and the engine on disk."""
    from trtls.builds.build_facts import build_config_hash
    from trtls.checkpoint.hashing import sha256_file

    problems: list[str] = []
    eng = loaded.engine(engine)
    onnx = loaded.resolve(eng.onnx)
    recorded = summary.buildConfigHash
    if not recorded:
        problems.append("it recorded no buildConfigHash")
    elif onnx.is_file():
        now = build_config_hash(
            onnx,
            summary.effectiveSettings or {},
            eng.job_profiles(),
            summary.environment.record() if summary.environment else {},
            # the hash covers the target the worker built for (build_started.target)
            summary.target.record() if summary.target else None,
        )
        if now != recorded:
            problems.append("the ONNX model or the profiles changed since (buildConfigHash differs)")
    else:
        problems.append(f"the ONNX model {onnx} is gone")
    art = summary.engineArtifact or {}
    out = loaded.resolve(eng.output)
    if not out.is_file():
        problems.append(f"the engine {out} is missing")
    elif art.get("sha256") and sha256_file(out)[0] != art["sha256"]:
        problems.append("the engine file changed since it was built")
    return problems
