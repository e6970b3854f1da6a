"""What a verdict rests on, and what drifted since.

A gates run records `rested_on` in its summary: one fact per thing the verdict depended on — the builder module and
version, CUDA driver and runtime, GPU, ONNX Runtime, Python, trtls, the checkpoint's revision, the lock entry's
digest, the route table (and the engine recipe's effective settings), each tolerance and threshold value, and the
bundle's digest. `current_facts` computes the same facts now, without running a gate; `drifts` compares the two.
One function computes each (`facts`), so a gates run, `trtls route promote`, `trtls route status` and the editor
agree on what "current" means.

A fact is `{"kind": <drift kind>, "label": <what to call it>, "value": <str | number | None>}`; the kinds are
`core.route_lifecycle.DRIFT_KINDS` plus what was promoted itself (`bundle`, `checkpoint`, `lock`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trtls import __version__
from trtls.core.recipe import settings_digest
from trtls.core.route import RouteModel
from trtls.core.route_lifecycle import ALWAYS_COUNTS, DRIFT_KINDS, LIFECYCLE_KEYS

Fact = dict[str, Any]


def _digest(obj: Any) -> str:
    return "sha256:" + hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def lock_digest(recipe_dir: Path, route_name: str) -> str | None:
    """The route's lock entry (checkpoint + every file's digest; not when it was locked), as one digest."""
    from trtls.checkpoint.lock import LOCK_NAME, read_lock

    entry = read_lock(recipe_dir / LOCK_NAME)["routes"].get(route_name)
    if not isinstance(entry, dict):
        return None
    return _digest({"checkpoint": entry.get("checkpoint"), "files": entry.get("files")})


def bundle_digest(path: Path, recipe_dir: Path | None = None) -> str | None:
    """ "sha256:<hex>" of the file (None when it is not a readable file). With `recipe_dir`, through its digest cache
    (`.trtls/digests.json`, keyed by size, mtime and inode): the editor asks often, and bundles can be large."""
    from trtls.checkpoint.hashing import DigestCache, default_cache_path, hash_files, sha256_file

    try:
        if not path.is_file():
            return None
        if recipe_dir is None:
            return f"sha256:{sha256_file(path)[0]}"
        done = hash_files([path], DigestCache(default_cache_path(recipe_dir)))
        return f"sha256:{next(iter(done.values())).sha256}"
    except OSError:
        return None


def _builder(loaded: Any, route: RouteModel, env: dict[str, Any]) -> tuple[str | None, str | None]:
    if route.deploys != "engine":
        return None, None
    module = route.environment.builder_module
    if module is None and route.engine is not None and getattr(loaded, "recipe", None) is not None:
        eng = loaded.recipe.engines.get(route.engine)
        module = getattr(eng, "builder_module", None) if eng is not None else None
    for b in env.get("builders") or []:
        if module is None or b.get("module") == module:
            return str(b.get("module")), str(b.get("version"))
    return module, None


def facts(
    loaded: Any,
    route_name: str,
    route: RouteModel,
    env: dict[str, Any],
    *,
    bundle: str | None,
    lock: str | None,
) -> dict[str, Fact]:
    """Every fact a verdict on this route rests on, given the environment, the bundle digest and the lock digest."""
    out: dict[str, Fact] = {}

    def put(key: str, kind: str, label: str, value: Any) -> None:
        out[key] = {"kind": kind, "label": label, "value": value}

    module, version = _builder(loaded, route, env)
    if route.deploys == "engine":
        put("builder", "builder", module or "builder", version)
        put("cuda_driver", "cuda_driver", "CUDA driver", env.get("cuda_driver"))
        put("cuda_runtime", "cuda_runtime", "CUDA runtime", env.get("cuda_runtime"))
        gpu = env.get("gpu_name")
        cc = env.get("compute_capability")
        put("gpu", "gpu", "GPU", f"{gpu} (SM {cc})" if gpu and cc else gpu)
    if route.deploys == "onnx" or route.runtime == "onnxruntime":
        put("onnxruntime", "onnxruntime", "onnxruntime", env.get("onnxruntime"))
    put("python", "python", "Python", env.get("python"))
    put("trtls", "trtls", "trtls", __version__)
    put("checkpoint", "checkpoint", "checkpoint revision", route.checkpoint.revision)
    put("lock", "lock", "lock entry", lock)
    table = route.model_dump(mode="json", exclude={*LIFECYCLE_KEYS, "tolerances", "thresholds"})
    if (
        route.engine is not None
        and getattr(loaded, "recipe", None) is not None
        and route.engine in loaded.recipe.engines
    ):
        from trtls.gates.environment_evidence import effective_settings

        table["engine_settings"] = settings_digest(effective_settings(loaded, route.engine))
    put("recipe", "recipe", "route table", _digest(table))
    for output, tol in sorted(route.tolerances.items()):
        for field, value in sorted(tol.model_dump(mode="json").items()):
            put(f"tolerances.{output}.{field}", "tolerances", f"tolerances.{output}.{field}", value)
    for field, value in sorted(route.thresholds.model_dump(mode="json").items()):
        put(f"thresholds.{field}", "thresholds", f"thresholds.{field}", value)
    put("bundle", "bundle", "bundle", bundle)
    return out


def current_facts(
    loaded: Any, route_name: str, route: RouteModel, environment: dict[str, Any] | None = None
) -> dict[str, Fact]:
    """The facts as they are now (this machine's environment unless one is given; the bundle and lock on disk)."""
    from trtls.gates.environment_probe import discover_environment

    env = dict(environment) if environment is not None else discover_environment()
    base = Path(loaded.base_dir)
    return facts(
        loaded,
        route_name,
        route,
        env,
        bundle=bundle_digest(loaded.resolve(route.bundle), base),
        lock=lock_digest(base, route_name),
    )


def _show(value: Any) -> str:
    if value is None:
        return "none"
    text = str(value)
    return text[:19] + "…" if text.startswith("sha256:") else text


def drifts(then: dict[str, Fact], now: dict[str, Fact], counted: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """What changed from `then` to `now`, one entry per fact: key, kind, label, was, now, and `message`
    ("onnxruntime 1.20.1 → 1.21.0"). `counted` limits the drift kinds that count (the route's `revalidate_on`);
    what was promoted itself (bundle, checkpoint, lock) always counts."""
    kinds = set(counted if counted is not None else DRIFT_KINDS) | set(ALWAYS_COUNTS)
    out = []
    for key in sorted(set(then) | set(now)):
        was, cur = then.get(key), now.get(key)
        kind = (cur or was or {}).get("kind", "recipe")
        if kind not in kinds:
            continue
        a = was.get("value") if was else None
        b = cur.get("value") if cur else None
        if a == b:
            continue
        label = (cur or was or {}).get("label", key)
        out.append(
            {
                "key": key,
                "kind": kind,
                "label": label,
                "was": a,
                "now": b,
                "message": f"{label} {_show(a)} → {_show(b)}",
            }
        )
    return out
