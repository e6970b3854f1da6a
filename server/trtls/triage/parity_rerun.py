"""`trtls reduce --route NAME --fix`, its last step: the route's parity gate (gate 4, the real gate code:
`gates.run.run_gates(gates=[4])`) run again with the fix the search settled on.

Nothing the user owns is written. The recipe edit is the quick fix's (`exclude_edit.exclude_nodes_fix`: the nodes
added to the conversion's `exclude_nodes`), applied to the recipe's text in memory and loaded from there
(`load_recipe(path, text=…)`). The model converted with that edit is copied into the reduction's folder
(`.trtls/reduce/<id>/converted.onnx`), and what gate 4 runs depends on what the route deploys:

* a route that deploys its ONNX (no engine, `[routes.X.precision]`): the artifact is the bundle's model.onnx. The
  re-run runs gate 4 on a what-if bundle, `.trtls/reduce/<id>/fixed.bundle`: the route's bundle with its model.onnx
  section replaced by the fixed conversion (every other section, the header and the provenance as they are, the
  provenance adding a `what_if` record). Its runtime under test, ONNX Runtime, executes that artifact here, so the
  gate's verdict is measured whole — TRT811 included — as `trtls route build` then `trtls gates` would measure it.
* a route that deploys a TensorRT engine, with ONNX Runtime (or the ONNX reference evaluator) as its runtime under
  test: that runtime runs the fixed conversion (`runtime_options.model`, in memory); the engine itself is not
  rebuilt or executed, and TRT811 holds saying so.
* a route whose runtime under test runs the TensorRT engine would need the engine rebuilt and a GPU to run it: the
  re-run says so and is not made.

The gates' own evidence (`.trtls/routes/<route>/`) is not written: this run is a what-if, recorded in
`divergence.json` (`parityRerun`).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from trtls.builds.roots import state_root
from trtls.core.cancel import CancelToken
from trtls.core.recipe import LoadedRecipe, load_recipe
from trtls.core.tomlpos import apply_edits
from trtls.fs import Kind, atomic_writer, ensure_folder, open_regular
from trtls.triage.exclude_edit import exclude_nodes_fix

ONNX_RUNTIMES = ("onnxruntime", "onnx.reference", "onnx_reference")


def rerun_parity(
    loaded: LoadedRecipe,
    route: str,
    engine: str | None,
    added: list[str],
    converted: Path,
    folder: Path,
    token: CancelToken,
    unfixed: Path | None = None,
) -> dict[str, Any]:
    """Gate 4 on the route with `added` excluded from the conversion (the engine's, or with no engine the route's);
    the record of what ran and its decision (`status`: `ran`, `not_run` with the reason, or `cancelled`). `unfixed`:
    the conversion as the recipe reads now, to say whether the route's bundle deploys it (`bundleIsTheConversion`)."""
    from trtls.core.route import route_model

    fix = exclude_nodes_fix(loaded, engine, added, route=route)
    record: dict[str, Any] = {"gates": [4], "excludeNodesAdded": list(added), "recipeEdit": fix}
    if fix is None:
        return {**record, "status": "not_run", "reason": "no place in the recipe for the exclude_nodes edit"}
    model = route_model(loaded, route)
    if model.deploys == "engine" and model.runtime not in ONNX_RUNTIMES:
        return {
            **record,
            "status": "not_run",
            "reason": f"the route's runtime under test ({model.runtime}) runs the TensorRT engine: the re-run needs "
            "the engine rebuilt from the fixed conversion and a GPU TensorRT accepts to run it",
        }
    root = state_root(folder)  # the recipe's folder: the copy stays under its `.trtls/reduce/<id>/`
    ensure_folder(folder, within=root)
    deployed = folder / "converted.onnx"
    # the reduction's copy: the precision cache's file (trtls's own, never read through a link) stays as it is
    with open_regular(converted, limit=None) as src, atomic_writer(deployed, kind=Kind.evidence, within=root) as out:
        shutil.copyfileobj(src, out, 1 << 20)
    edited = load_recipe(loaded.path, text=apply_edits(loaded.text, fix["edits"]))
    if edited.recipe is None:
        problems = "; ".join(f.message for f in edited.errors[:3])
        return {**record, "status": "not_run", "reason": f"the edited recipe does not load: {problems}"}
    rel = deployed.relative_to(loaded.base_dir).as_posix()
    raw = edited.data["routes"][route]
    if model.deploys == "onnx":
        what_if = _what_if_bundle(loaded, model, deployed, folder / "fixed.bundle", added, unfixed)
        if isinstance(what_if, str):
            return {**record, "status": "not_run", "reason": what_if}
        raw["bundle"] = (folder / "fixed.bundle").relative_to(loaded.base_dir).as_posix()
        record.update(bundle=raw["bundle"], **what_if)
    else:
        raw["runtime_options"] = {**dict(raw.get("runtime_options") or {}), "model": rel}
    if token.is_set:
        return {**record, "status": "cancelled"}
    from trtls.gates.run import run_gates

    result = run_gates(edited, route, gates=[4], cancel=lambda: token.is_set, write_evidence=False)
    if result.cancelled:
        return {**record, "status": "cancelled"}
    checks = [c for c in result.checks if c.gate == 4]
    tolerance = [c for c in checks if c.name.startswith("parity.tolerance")]
    return {
        **record,
        "status": "ran",
        "runtimeModel": rel,
        "decision": result.gates_decision,
        "parityPasses": bool(tolerance) and all(c.status == "pass" for c in tolerance),
        "checks": [
            {"name": c.name, "status": c.status, "code": c.code, "message": c.message}
            | ({"stats": c.evidence.get("stats")} if c in tolerance else {})
            | ({"waived": c.waived} if c.waived is not None else {})
            for c in checks
        ],
    }


def _what_if_bundle(
    loaded: LoadedRecipe, route: Any, model: Path, target: Path, added: list[str], unfixed: Path | None
) -> dict[str, Any] | str:
    """The route's bundle with its model.onnx replaced by `model`, at `target` (`route.what_if`); the facts to
    record, or why it cannot be written."""
    from trtls.core.sha256 import sha256_file
    from trtls.route.what_if import what_if_bundle

    by = {"by": "trtls reduce --route --fix", "exclude_nodes_added": list(added)}
    done = what_if_bundle(loaded.resolve(route.bundle), route.bundle, model, target, by)
    if isinstance(done, str):
        return done
    return {
        "bundleSection": done["section"],
        "bundleIsTheConversion": None if unfixed is None else sha256_file(unfixed) == done["replacedSha256"],
    }
