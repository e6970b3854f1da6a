"""What a verdict rests on, and what drifted since.

A gates run records `rested_on` in its summary: one fact per thing the verdict depended on — the builder module and
version, CUDA driver and runtime, GPU, ONNX Runtime, Python, trtls, the checkpoint's revision, the lock entry's
digest, the checkpoint's content (every file hashed as gate 1 hashes it: a changed file shows even without a re-lock),
the route table (its digest, and each key's value so a drift names the key), each tolerance and threshold value, the
bundle's digest and the rollback artifact's (`previous_bundle`: gone or changed is a drift). `current_facts` computes
the same facts now, without running a gate; `drifts` compares the two. One function computes each (`facts`), so a
gates run, `trtls route promote`, `trtls route status` and the editor agree on what "current" means.

A fact is `{"kind": <drift kind>, "label": <what to call it>, "value": <str | number | None>}`; the kinds are
`core.route_lifecycle.DRIFT_KINDS` plus what was promoted itself (`bundle`, `checkpoint`, `lock`,
`rollback_artifact`). A fact may carry `changes` (the checkpoint's changed files, in words) or `keys` (the route
table's keys, flattened), which `drifts` uses to say what changed by name.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
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


def recorded_inside(loaded: Any, recorded: Any) -> str | None:
    """A bundle path read out of the ledger (a promotion's rollback artifact), or None unless it is a path inside the
    recipe's real folder: a record never sends trtls to read a file elsewhere (an edited ledger naming /proc/kcore or
    another project's bundle). The route's own paths are the recipe's, judged when it loads."""
    from trtls.core.paths import inside, real

    if not isinstance(recorded, str) or not recorded or "\0" in recorded:
        return None
    return recorded if inside(real(loaded.resolve(recorded)), real(loaded.base_dir)) else None


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


# Facts trtls began to record after promotions already existed: a promotion that did not record one is not judged
# on it (it would read as a drift from "none" that nothing changed).
RECORDED_SINCE_0_2 = ("checkpoint_content", "rollback_artifact")
FILE_KINDS = ("bundle", "checkpoint", "rollback_artifact")  # a None value is a file that is not there


def content_fact(recipe_dir: Path, route_name: str, current: dict[str, dict[str, Any]] | str) -> Fact:
    """The checkpoint's content as a fact: "sha256:<files_digest>" (None when it cannot be read, with why), and the
    files that differ from the lock entry, in words."""
    from trtls.checkpoint.current import changes_since_lock, files_digest

    if isinstance(current, str):
        return {"kind": "checkpoint", "label": "checkpoint content", "value": None, "changes": current}
    fact: Fact = {"kind": "checkpoint", "label": "checkpoint content", "value": f"sha256:{files_digest(current)}"}
    changes = changes_since_lock(recipe_dir, route_name, current)
    if changes:
        fact["changes"] = f"not re-locked: {changes}"
    return fact


def current_content(
    loaded: Any,
    route_name: str,
    route: RouteModel,
    *,
    use_digest_cache: bool = True,
    cancel: Callable[[], bool] | None = None,
) -> Fact:
    """The checkpoint's content fact now (hashed through the digest cache: a stat per unchanged file; a stopped run
    stops the hashing too — a 1 TiB checkpoint is hashed for half an hour)."""
    from trtls.checkpoint.current import checkpoint_files

    base = Path(loaded.base_dir)
    if route.from_export:  # no checkpoint: the files the export ships are the content (route.export_route)
        from trtls.route.errors import RouteBuildError
        from trtls.route.export_route import read_export

        try:
            shipped = read_export(loaded, route)[0].files_digest
        except RouteBuildError as exc:
            return content_fact(base, route_name, str(exc))
        return {"kind": "checkpoint", "label": "export content", "value": f"sha256:{shipped}"}
    ck = route.source_checkpoint()
    files = checkpoint_files(base, ck.path, ck.revision, ck.id, use_digest_cache=use_digest_cache, cancel=cancel)
    return content_fact(base, route_name, files)


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    else:
        out[prefix] = value


def table_keys(table: dict[str, Any], engine_settings: dict[str, Any] | None) -> dict[str, Any]:
    """The route table (and the engine recipe's effective settings, under `engines.<name>.`), one value per dotted
    key: what a drift of the route table names."""
    out: dict[str, Any] = {}
    _flatten(table, "", out)
    if engine_settings is not None:
        _flatten(json.loads(json.dumps(engine_settings, default=str)), f"engines.{table.get('engine')}", out)
    return out


def facts(
    loaded: Any,
    route_name: str,
    route: RouteModel,
    env: dict[str, Any],
    *,
    bundle: str | None,
    lock: str | None,
    content: Fact | None = None,
    rollback_artifact: str | None = None,
) -> dict[str, Fact]:
    """Every fact a verdict on this route rests on, given the environment, the bundle, lock and rollback artifact
    digests and the checkpoint's content fact (`content_fact`)."""
    out: dict[str, Fact] = {}

    def put(key: str, kind: str, label: str, value: Any, **more: Any) -> None:
        out[key] = {"kind": kind, "label": label, "value": value, **more}

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
    put("checkpoint", "checkpoint", "checkpoint revision", route.checkpoint.revision if route.checkpoint else None)
    put("lock", "lock", "lock entry", lock)
    if content is not None:
        out["checkpoint_content"] = dict(content)
    table = route.model_dump(mode="json", exclude={*LIFECYCLE_KEYS, "tolerances", "thresholds"})
    settings = None
    if (
        route.engine is not None
        and getattr(loaded, "recipe", None) is not None
        and route.engine in loaded.recipe.engines
    ):
        from trtls.gates.environment_evidence import effective_settings

        settings = effective_settings(loaded, route.engine)
        table["engine_settings"] = settings_digest(settings)
    keys = table_keys({k: v for k, v in table.items() if k != "engine_settings"}, settings)
    put("recipe", "recipe", "route table", _digest(table), keys=keys)
    for output, tol in sorted(route.tolerances.items()):
        for field, value in sorted(tol.model_dump(mode="json").items()):
            put(f"tolerances.{output}.{field}", "tolerances", f"tolerances.{output}.{field}", value)
    for field, value in sorted(route.thresholds.model_dump(mode="json").items()):
        put(f"thresholds.{field}", "thresholds", f"thresholds.{field}", value)
    put("bundle", "bundle", f"bundle {route.bundle}", bundle)  # the path named: which file drifted
    if route.previous_bundle is not None:
        put("rollback_artifact", "rollback_artifact", f"rollback artifact {route.previous_bundle}", rollback_artifact)
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
        content=current_content(loaded, route_name, route),
        rollback_artifact=bundle_digest(loaded.resolve(route.previous_bundle), base) if route.previous_bundle else None,
    )


def run_facts(ctx: Any) -> dict[str, Fact]:
    """What a gates run's verdict rests on, from its `GateContext`: the environment gate 2 saw (else this
    machine's), the bundle gate 3 read (else the file now), the checkpoint content gate 1 hashed, the lock entry and
    the rollback artifact."""
    from trtls.gates.environment_probe import discover_environment

    env = ctx.gate2.environment if ctx.gate2 else (ctx.environment or discover_environment())
    bundle = ctx.record.get("bundle_digest") or bundle_digest(ctx.resolve(ctx.route.bundle))
    # the checkpoint's content as gate 1 hashed it in this run; without gate 1, hashed now (the same rules and cache)
    hashed = ctx.gate1.files if ctx.gate1 is not None else None
    content = (
        content_fact(Path(ctx.recipe_dir), ctx.route_name, hashed)
        if hashed
        else current_content(
            ctx.loaded, ctx.route_name, ctx.route, use_digest_cache=ctx.use_digest_cache, cancel=ctx.cancel
        )
    )
    previous = ctx.route.previous_bundle
    return facts(
        ctx.loaded,
        ctx.route_name,
        ctx.route,
        env,
        bundle=bundle,
        lock=lock_digest(ctx.recipe_dir, ctx.route_name),
        content=content,
        rollback_artifact=bundle_digest(ctx.resolve(previous), Path(ctx.recipe_dir)) if previous else None,
    )


def _show(value: Any, kind: str = "") -> str:
    if value is None:
        return "missing" if kind in FILE_KINDS else "none"
    text = str(value)
    return text[:19] + "…" if text.startswith("sha256:") else text


def _show_key(value: Any) -> str:
    return "unset" if value is None else json.dumps(value, default=str, ensure_ascii=False)


def _entry(key: str, kind: str, label: str, was: Any, now: Any, message: str) -> dict[str, Any]:
    return {"key": key, "kind": kind, "label": label, "was": was, "now": now, "message": message}


def drifts(then: dict[str, Fact], now: dict[str, Fact], counted: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """What changed from `then` to `now`, one entry per fact: key, kind, label, was, now, and `message`
    ("onnxruntime 1.20.1 → 1.21.0"). `counted` limits the drift kinds that count (the route's `revalidate_on`);
    what was promoted itself (bundle, checkpoint, lock, rollback artifact) always counts. A route table that changed
    is one entry per key that changed ("route table environment.onnxruntime "1.20" → "1.21""), when both sides
    recorded the keys."""
    kinds = set(counted if counted is not None else DRIFT_KINDS) | set(ALWAYS_COUNTS)
    out = []
    for key in sorted(set(then) | set(now)):
        was, cur = then.get(key), now.get(key)
        if was is None and key in RECORDED_SINCE_0_2:
            continue
        kind = (cur or was or {}).get("kind", "recipe")
        if kind not in kinds:
            continue
        a = was.get("value") if was else None
        b = cur.get("value") if cur else None
        if a == b:
            continue
        label = (cur or was or {}).get("label", key)
        old_keys, new_keys = (was or {}).get("keys"), (cur or {}).get("keys")
        if isinstance(old_keys, dict) and isinstance(new_keys, dict) and old_keys != new_keys:
            for name in sorted(set(old_keys) | set(new_keys)):
                x, y = old_keys.get(name), new_keys.get(name)
                if x != y:
                    message = f"{label} {name} {_show_key(x)} → {_show_key(y)}"
                    out.append(_entry(f"{key}.{name}", kind, f"{label} {name}", x, y, message))
            continue
        message = f"{label} {_show(a, kind)} → {_show(b, kind)}"
        if (cur or {}).get("changes"):
            message += f" ({cur['changes']})"  # type: ignore[index]
        out.append(_entry(key, kind, label, a, b, message))
    return out
