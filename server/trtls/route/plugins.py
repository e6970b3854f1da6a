"""The plugin libraries a route's engine loads (`engines.X.plugins.libraries`), as the bundle's provenance and SBOM
record them: each library's sha256 and size, with what `[routes.NAME.plugins]` says of it (gate 3 checks both:
TRT710)."""

from __future__ import annotations

from typing import Any

from trtls.core.route import RouteModel


def plugin_provenance(loaded: Any, route: RouteModel) -> list[dict[str, Any]]:
    from trtls.checkpoint.hashing import sha256_file

    recipe = getattr(loaded, "recipe", None)
    eng = recipe.engines.get(route.engine) if recipe is not None and route.engine else None
    if eng is None:
        return []
    described = {str(loaded.resolve(p.path)): p for p in route.plugins.values()}
    out = []
    for lib in eng.plugins.libraries:
        path = loaded.resolve(lib)
        sha, st = sha256_file(path)
        entry = described.get(str(path))
        out.append(
            {
                "library": lib,
                "sha256": f"sha256:{sha}",
                "size": st.st_size,
                **({k: getattr(entry, k) for k in ("source", "version", "review", "scan")} if entry else {}),
            }
        )
    return out
