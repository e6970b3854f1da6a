"""What the route deploys, taken from its bundle, and whether the runtime under test really executed it.

A route deploys its TensorRT engine (a route with `engine`) or its ONNX model (a route with `onnx` and no engine;
runtime target ONNX Runtime). Gates 4 and 5 run the runtime under test on *that artifact as the bundle carries
it*, extracted into a scratch folder — never on the recipe's files on disk, and never writing next to the user's
bundle. `parity.deployed_artifact` (TRT811) passes only when the runtime under test executed that artifact: the
engine through TensorRT (or a native runner given the bundle) for an engine route, the ONNX through ONNX Runtime
for an ONNX route. Anything else holds with the plain reason (for example: no GPU that TensorRT accepts here).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trtls.bundle.sections import ENGINE_SECTIONS, engine_section  # one list: trtls's and TRTMC's names
from trtls.core.gate_result import GateCheck
from trtls.fs import Kind, atomic_writer
from trtls.runtimes import RunResult, RuntimeSpec

DEPLOYED_CHECK = "parity.deployed_artifact"
ONNX_SECTIONS = ("model.onnx", "onnx", "model")
TENSORRT_KINDS = ("tensorrt",)


class RefusedPath(Exception):
    """A path the route names resolves outside the recipe folder (through `..` or a symlink): never read."""


def contained(ctx: Any, rel: str) -> Path:
    """`rel` resolved inside the recipe folder, or RefusedPath: no `..` or symlink leads out of it."""
    root = Path(ctx.recipe_dir).resolve()
    path = (Path(ctx.recipe_dir) / rel).absolute()
    real = path.resolve()
    if not real.is_relative_to(root):
        via = (
            "a symlink"
            if path.is_relative_to(Path(ctx.recipe_dir).absolute()) and ".." not in Path(rel).parts
            else "`..`"
        )
        raise RefusedPath(f"{rel} resolves outside the recipe folder ({real}, through {via}): refused, not read")
    return real


def extract_artifact(ctx: Any, scratch: Path) -> tuple[str, Path, str] | str:
    """(section, extracted file, kind to run it with) of the artifact the route deploys, or why it cannot be had.

    Read from the route's bundle (inside the recipe folder) into `scratch`; the bundle itself is only read."""
    from trtls.bundle import BundleError, read_bundle

    try:
        bundle_path = contained(ctx, ctx.route.bundle)
    except RefusedPath as exc:
        return str(exc)
    try:
        bundle = read_bundle(bundle_path)
    except (BundleError, OSError) as exc:
        return f"the bundle {ctx.route.bundle} cannot be read: {exc}"
    names = ENGINE_SECTIONS if ctx.route.deploys == "engine" else ONNX_SECTIONS
    section = (
        engine_section(bundle.sections)
        if ctx.route.deploys == "engine"
        else next((n for n in names if n in bundle.sections), None)
    )
    if section is None:
        what = "engine" if ctx.route.deploys == "engine" else "ONNX model"
        return f"the bundle {ctx.route.bundle} carries no {what} section ({', '.join(names)})"
    target = scratch / ("model.engine" if ctx.route.deploys == "engine" else "model.onnx")
    try:
        with atomic_writer(target, kind=Kind.scratch, within=scratch, mode=0o600) as out:
            for part in bundle.iter_section(section):
                out.write(part)
    except (BundleError, OSError) as exc:
        return f"the {section} section of {ctx.route.bundle} cannot be extracted: {exc}"
    return section, target, "tensorrt" if ctx.route.deploys == "engine" else "onnxruntime"


def deployed_check(ctx: Any, spec: RuntimeSpec | None, run: RunResult | None, artifact: Any, path: tuple) -> GateCheck:
    """TRT811: did the runtime under test execute the artifact the route deploys? (See the module doc.)"""
    route = ctx.route
    what = (
        f"the TensorRT engine the route deploys ({route.bundle}: engine)"
        if route.deploys == "engine"
        else f"the ONNX model the route deploys ({route.bundle}: model.onnx) on ONNX Runtime"
    )

    def check(status: str, message: str, **ev: Any) -> GateCheck:
        return GateCheck(4, DEPLOYED_CHECK, status, message, "TRT811", tuple(path), True, ev)  # type: ignore[arg-type]

    if isinstance(artifact, str):
        return check("hold", f"{what} was not executed: {artifact}")
    wanted = TENSORRT_KINDS + ("command",) if route.deploys == "engine" else ("onnxruntime",)
    if spec is None or spec.kind not in wanted:
        runs = spec.kind if spec is not None else "nothing"
        return check(
            "hold",
            f"{what} was not executed: the runtime under test ({route.runtime}) runs {runs}, not that artifact; "
            "set `runtime` to the runtime the route deploys to",
            runtime=route.runtime,
        )
    if run is None or run.status == "unavailable":
        reason = run.message if run is not None else "it did not run"
        if route.deploys == "engine" and not _gpu_found(ctx):
            reason = f"no GPU that TensorRT accepts on this machine ({reason})"
        return check("hold", f"{what} was not executed: {reason}", runtime=spec.label)
    if not run.ok:
        return check("hold", f"{what} did not answer the reference inputs: {run.summary()}", runtime=spec.label)
    section, extracted, _ = artifact
    return check(
        "pass",
        f"{spec.kind} executed {what} on {len(run.outputs)} reference input(s)",
        runtime=spec.label,
        section=section,
        executed=str(extracted.name),
    )


def _gpu_found(ctx: Any) -> bool:
    env = getattr(getattr(ctx, "gate2", None), "environment", None) or {}
    return bool(env.get("gpu_name"))
