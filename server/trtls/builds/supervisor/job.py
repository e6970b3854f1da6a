"""The worker's job, built from a checked recipe: exactly what the worker receives as its first line (the contract
`core.worker_job.WorkerJob` declares), and what the store's key is computed from (`store.key.engine_key`), so what
was looked up is what is built. Apart from the supervisor's `Build` (builds/supervisor/build.py) because a store hit
needs the job and the key but none of a build's state, events or view: a hit imports none of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trtls.builds.roots import judged_write_root
from trtls.builds.run_ids import new_run_id
from trtls.core.build_config import flat_settings
from trtls.core.protocol import PROTOCOL_VERSION
from trtls.core.recipe import EngineRecipe, LoadedRecipe


def state_dir(recipe_path: Path) -> Path:
    return recipe_path.parent / ".trtls"


def new_build_id(engine: str) -> str:
    return new_run_id(engine)  # one format for every run's id (builds/run_ids.py)


def worker_job(
    loaded: LoadedRecipe,
    engine: str,
    build_id: str,
    overrides: dict[str, Any] | None = None,
    faults: dict | None = None,
) -> dict[str, Any]:
    eng: EngineRecipe = loaded.engine(engine)
    settings = flat_settings(eng.builder)
    overrides = overrides or {}
    settings.update(overrides.get("settings", {}))  # a matrix cell replaces settings, profiles, onnx, output
    cache = None
    if eng.timing_cache is not None:
        path = loaded.resolve(eng.timing_cache.path)
        mode = overrides.get("cache_mode", eng.timing_cache.mode)
        cache = {"path": str(path), "mode": mode, "write_root": str(judged_write_root(loaded, path))}
    return {
        "v": PROTOCOL_VERSION,
        "type": "job",
        "build_id": build_id,
        "engine": engine,
        "onnx": str(loaded.resolve(overrides.get("onnx", eng.onnx))),
        "output": str(loaded.resolve(overrides.get("output", eng.output))),
        # where the engine's rename must still land when it happens (a folder swapped for a symlink is refused)
        "write_root": str(judged_write_root(loaded, loaded.resolve(overrides.get("output", eng.output)))),
        "timing_cache": cache,
        "settings": settings,
        "profiles": overrides["profiles"] if "profiles" in overrides else eng.job_profiles(),
        "precision": {**eng.precision.model_dump(), "cache_dir": str(state_dir(loaded.path) / "precision")},
        "plugins": {
            **eng.plugins.model_dump(),
            "libraries": [str(loaded.resolve(p)) for p in eng.plugins.libraries],
            "serialize": [str(loaded.resolve(p)) for p in eng.plugins.serialize],
        },
        "builder_module": overrides.get("builder_module", eng.builder_module),
        "keep_evidence": eng.keep_evidence,
        "quarantine_dir": str(state_dir(loaded.path) / "quarantine"),
        "faults": faults or {},
        "no_monitor": bool(overrides.get("no_monitor")),
    }
