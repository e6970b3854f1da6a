"""Gate 3's provenance checks: the checkpoint and the build the bundle records are the ones the route has now."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from trtls.core.gate_result import GateCheck, gate_check
from trtls.gates.context import GateContext

GATE = 3
_check = partial(gate_check, GATE)


def rebuild_advice(route_name: str) -> str:
    return f"run `trtls route build --route {route_name}`"


def _current_checkpoint(ctx: GateContext) -> tuple[str | None, str | None, str]:
    """(commit, files digest, source) from gate 1 when it ran, else computed here the same way (read-only)."""
    g1 = ctx.gate1
    if g1 is not None:
        return g1.record.get("commit"), g1.record.get("files_digest"), "gate 1"
    from trtls.route.checkpoint import read_checkpoint
    from trtls.route.errors import RouteBuildError
    from trtls.route.export_route import read_export

    try:
        if ctx.route.from_export:  # the files the export ships stand where a checkpoint's would
            state = read_export(ctx.loaded, ctx.route)[0]
            return None, state.files_digest, "the export's files as found here (no checkpoint)"
        state = read_checkpoint(ctx.loaded, ctx.route)
    except (RouteBuildError, OSError) as exc:
        return None, None, f"the checkpoint as found here ({exc})"
    return state.commit, state.files_digest, "the checkpoint as found here (gate 1 did not run)"


def check_checkpoint_provenance(ctx: GateContext, prov: dict[str, Any]) -> GateCheck:
    path = ("routes", ctx.route_name, "checkpoint")
    commit, digest, source = _current_checkpoint(ctx)
    ev = {
        "bundle_commit": prov.get("checkpoint_commit"),
        "bundle_files_sha256": prov.get("checkpoint_files_sha256"),
        "current_commit": commit,
        "current_files_sha256": digest,
        "source": source,
    }
    if digest is None:
        return _check(
            "bundle.provenance.checkpoint",
            "hold",
            f"the checkpoint's current files digest is unknown ({source}): provenance cannot be compared",
            "TRT705",
            path,
            ev,
            False,
        )
    problems = []
    if prov.get("checkpoint_commit") != commit:
        problems.append(f"built from commit {prov.get('checkpoint_commit')}, the route now resolves {commit}")
    if prov.get("checkpoint_files_sha256") != digest:
        changed = _changed_files(ctx, prov)
        problems.append(
            (
                "the export's files changed since the build"
                if ctx.route.from_export
                else "checkpoint files changed since the build"
            )
            + (
                f" ({', '.join(changed)})"
                if changed
                else f" (files digest {str(prov.get('checkpoint_files_sha256'))[:12]}… → {digest[:12]}…)"
            )
        )
        ev["changed"] = changed
    if problems:
        return _check(
            "bundle.provenance.checkpoint",
            "hold",
            "bundle is stale: " + "; ".join(problems) + f": rebuild ({rebuild_advice(ctx.route_name)})",
            "TRT705",
            path,
            ev,
            False,
        )
    return _check(
        "bundle.provenance.checkpoint",
        "pass",
        f"built from commit {commit}, files digest {digest[:12]}… ({source})",
        "TRT705",
        path,
        ev,
        False,
    )


def _changed_files(ctx: GateContext, prov: dict[str, Any]) -> list[str]:
    g1 = ctx.gate1
    now = {rel: f.get("sha256") for rel, f in (g1.files if g1 is not None else {}).items()}
    if ctx.route.from_export:  # the export's files, hashed here (gate 1 reads none)
        from trtls.route.errors import RouteBuildError
        from trtls.route.export_route import read_export

        try:
            now = {rel: f["sha256"] for rel, f in read_export(ctx.loaded, ctx.route)[0].files.items()}
        except RouteBuildError:
            return []
    was = prov.get("checkpoint_files") if isinstance(prov.get("checkpoint_files"), dict) else {}
    if not now or not was:
        return []
    return sorted({r for r in now if was.get(r) != now[r]} | {r for r in was if r not in now})


def _current_build(ctx: GateContext) -> tuple[dict[str, Any] | None, str]:
    g2 = ctx.gate2
    if g2 is not None:
        return g2.evidence, "gate 2"
    from trtls.gates.environment_evidence import latest_successful_build

    engine = ctx.route.engine
    linked = latest_successful_build(Path(ctx.recipe_dir), engine) if engine is not None else None
    if linked is None:
        return None, "build evidence (gate 2 did not run)"
    path, s = linked
    return {
        "path": str(path),
        "buildId": s.buildId,
        "buildConfigHash": s.buildConfigHash,
        "tensorrtVersion": s.tensorrtVersion,
        "builderModule": s.builderModule,
    }, "build evidence (gate 2 did not run)"


def _export_provenance(ctx: GateContext, prov: dict[str, Any]) -> GateCheck:
    """A route that deploys the ONNX: the bundle's ONNX is the one the route build exported (gate 2's record)."""
    path = ("routes", ctx.route_name, "onnx")
    g2 = ctx.gate2
    if g2 is not None:
        recorded = (g2.evidence or {}).get("onnx_sha256")
    else:  # `--gate 3` alone: read the route build's record itself, as gate 2 would have linked it
        from trtls.gates.environment_evidence import route_build_record

        _, rec = route_build_record(ctx.loaded, ctx.route_name, ctx.resolve(ctx.route.bundle))
        rprov = rec.get("provenance") if isinstance(rec, dict) else None
        recorded = rprov.get("onnx_sha256") if isinstance(rprov, dict) else None
    ev = {"bundle_onnx_sha256": prov.get("onnx_sha256"), "route_build_onnx_sha256": recorded}
    if recorded is None:
        return _check(
            "bundle.provenance.build",
            "hold",
            f"no route build record to compare the bundle's ONNX with; {rebuild_advice(ctx.route_name)}",
            "TRT706",
            path,
            ev,
        )
    if prov.get("onnx_sha256") != recorded:
        return _check(
            "bundle.provenance.build",
            "hold",
            f"bundle is stale: its ONNX sha256 {str(prov.get('onnx_sha256'))[:12]}… is not the last route build's "
            f"{str(recorded)[:12]}…: {rebuild_advice(ctx.route_name)}",
            "TRT706",
            path,
            ev,
        )
    message = f"ONNX {str(recorded)[:12]}… as the last route build exported it"
    return _check("bundle.provenance.build", "pass", message, "TRT706", path, ev)


def check_build_provenance(ctx: GateContext, prov: dict[str, Any]) -> GateCheck:
    if ctx.route.deploys == "onnx":
        return _export_provenance(ctx, prov)
    path = ("routes", ctx.route_name, "engine")
    ev_build, source = _current_build(ctx)
    ev = {
        "bundle_build_id": prov.get("build_id"),
        "bundle_build_config_hash": prov.get("build_config_hash"),
        "bundle_builder_version": prov.get("builder_version"),
        "source": source,
    }
    if ev_build is None:
        return _check(
            "bundle.provenance.build",
            "hold",
            f"no successful build of engine '{ctx.route.engine}' to compare with ({source}); "
            f"{rebuild_advice(ctx.route_name)}",
            "TRT706",
            path,
            ev,
        )
    ev.update(
        current_build_id=ev_build.get("buildId"),
        current_build_config_hash=ev_build.get("buildConfigHash"),
        current_builder_version=ev_build.get("tensorrtVersion"),
    )
    problems = []
    if prov.get("build_config_hash") != ev_build.get("buildConfigHash"):
        problems.append(
            f"buildConfigHash {str(prov.get('build_config_hash'))[:12]}… differs from the latest successful build "
            f"{ev_build.get('buildId')}'s {str(ev_build.get('buildConfigHash'))[:12]}…"
        )
    if str(prov.get("builder_version")) != str(ev_build.get("tensorrtVersion")):
        problems.append(
            f"built with {prov.get('builder')} {prov.get('builder_version')}, the latest build used "
            f"{ev_build.get('builderModule')} {ev_build.get('tensorrtVersion')}"
        )
    if problems:
        return _check(
            "bundle.provenance.build",
            "hold",
            "bundle is stale: " + "; ".join(problems) + f": rebuild ({rebuild_advice(ctx.route_name)})",
            "TRT706",
            path,
            ev,
        )
    return _check(
        "bundle.provenance.build",
        "pass",
        f"buildConfigHash {str(prov.get('build_config_hash'))[:12]}… and {prov.get('builder')} "
        f"{prov.get('builder_version')} match build {ev_build.get('buildId')}",
        "TRT706",
        path,
        ev,
    )
