"""Gate 5's scratch folder: copies of the user's bundles for the rollback drill, and a smoke run of the artifact the
route deploys, taken from a bundle, through the runtime under test. The gates never write the user's files: every
write of the drill lands on these copies."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trtls.fs import Kind, atomic_writer, ensure_folder, open_regular
from trtls.gates.files import scratch
from trtls.gates.release.rollback import ENGINE_SECTIONS, MODEL_SECTIONS, SmokeFn, extract_section, finite_smoke
from trtls.runtimes import RunResult, RuntimeSpec, run_inputs


def copy_in(source: Path, dest: Path, *, within: Path) -> None:
    """Copy a user file (read only, a regular file) into the scratch folder `within`: the copy is what the drill may
    overwrite."""
    ensure_folder(dest.parent, within=within)
    with (
        open_regular(source, limit=None, follow=True) as src,
        atomic_writer(dest, kind=Kind.scratch, within=within) as out,
    ):
        shutil.copyfileobj(src, out, 1024 * 1024)


def deployed_smoke(spec: RuntimeSpec, deploys: str, inputs: Sequence[Any]) -> SmokeFn:
    """A smoke run of the artifact the route deploys, from the bundle at `path`, through the runtime under test."""
    from trtls.gates.parity import on_artifact

    def smoke(path: Path) -> RunResult:
        names = ENGINE_SECTIONS if deploys == "engine" else MODEL_SECTIONS
        with scratch("trtls-smoke-") as tmp:
            try:
                from trtls.bundle import BundleError, read_bundle

                b = read_bundle(path)
            except (BundleError, OSError) as exc:
                return RunResult("error", f"bundle unreadable: {exc}")
            section = next((n for n in names if n in b.sections), None)
            if section is None:
                return RunResult("error", f"the bundle carries no {deploys} section")
            try:
                target = extract_section(b, section, tmp / ("model.engine" if deploys == "engine" else "model.onnx"))
            except (BundleError, OSError) as exc:
                return RunResult("error", f"the {section} section cannot be extracted: {exc}")
            kind = "tensorrt" if deploys == "engine" else "onnxruntime"
            res = run_inputs(on_artifact(spec, (section, target, kind), path), list(inputs))
        return finite_smoke(res)

    return smoke
