"""Gate 3 — bundle and manifest: the route's `.bundle` is sound, its digests are recorded and match, it was
built from the checkpoint and build the route now has, and its SBOM describes it.

`run_gate(ctx)` is found by `run.GATE_HOOKS` (module `trtls.gates.bundle`). The bundle is the route's
`bundle` key; its records are the header's `trtls` block, the sidecar `<bundle>.trtls.json` and the SBOM
`<bundle>.cdx.json` (all written by `trtls route build`). Nothing is followed out of the bundle: section
names are never used as paths, and the bundle is read with `bundle.inspect_json` (bounded, hostile-input safe).

Checks (docs/diagnostics-gate3.md):
  TRT701 bundle.present        the bundle file exists                                      hold
  TRT702 bundle.<problem>      container and header sound (one check per problem category) reject
  TRT703 bundle.<problem>      recorded digests (header trtls record, sidecar) match       reject; no sidecar → hold
  TRT704 bundle.origin         foreign bundle (no trtls record) promoted with its digests  hold until `trtls bundle promote`
  TRT705 bundle.provenance.checkpoint  provenance = gate 1's commit + files digest          hold (stale: rebuild)
  TRT706 bundle.provenance.build       provenance = latest successful build's buildConfigHash + builder version  hold
  TRT707 bundle.artifacts      the bundle's model.onnx / engine sections are the files gates 4–5 test    hold
  TRT708 bundle.sbom           SBOM present, CycloneDX 1.5, lists the bundle, checkpoint files, ONNX, engine, builder  hold
`ctx.record["bundle_digest"]` = "sha256:<file sha256>" whenever the file could be read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trtls.bundle import (
    CHECK_FILE_DIGEST,
    CHECK_SECTION_DIGEST,
    CHECK_SIDECAR,
    CHECK_TRTLS_BLOCK,
    inspect_json,
    sidecar_path,
)
from trtls.core.gate_result import GateCheck
from trtls.route.build import SBOM_SUFFIX, sbom_path

GATE = 3
DIGEST_CHECKS = (CHECK_TRTLS_BLOCK, CHECK_SECTION_DIGEST, CHECK_FILE_DIGEST, CHECK_SIDECAR)  # TRT703; the rest TRT702
MAX_SBOM = 64 * 1024 * 1024
ONNX_SECTIONS = ("model.onnx", "onnx", "model")
ENGINE_SECTIONS = ("engine", "model.engine", "engine.plan")


def _check(
    name: str,
    status: str,
    message: str,
    code: str,
    path: tuple,
    evidence: dict[str, Any] | None = None,
    on_value: bool = True,
) -> GateCheck:
    return GateCheck(GATE, name, status, message, code, tuple(path), on_value, dict(evidence or {}))  # type: ignore[arg-type]


def _rebuild(route_name: str) -> str:
    return f"run `trtls route build --route {route_name}`"


def run_gate(ctx: Any) -> list[GateCheck]:
    route, name = ctx.route, ctx.route_name
    base = ("routes", name)
    bpath = base + ("bundle",)
    bundle = ctx.resolve(route.bundle)
    checks: list[GateCheck] = []
    if not bundle.is_file():
        what = "is not a regular file" if bundle.exists() else "not found"
        return [
            _check(
                "bundle.present",
                "hold",
                f"bundle {what}: {bundle}; {_rebuild(name)}",
                "TRT701",
                bpath,
                {"bundle": str(bundle)},
            )
        ]
    info = inspect_json(bundle)
    if info["file_sha256"]:
        ctx.record["bundle_digest"] = f"sha256:{info['file_sha256']}"
    checks.append(
        _check(
            "bundle.present",
            "pass",
            f"bundle {bundle.name}: {info['size']} bytes, sha256 {str(info['file_sha256'])[:12]}…",
            "TRT701",
            bpath,
            {"bundle": str(bundle), "sha256": info["file_sha256"], "size": info["size"]},
        )
    )

    # -- TRT702 / TRT703: verify_bundle's problems, one check per category
    by_check: dict[str, list[dict[str, Any]]] = {}
    for p in info["problems"]:
        by_check.setdefault(p["check"], []).append(p)
    for check_id, problems in by_check.items():
        code = "TRT703" if check_id in DIGEST_CHECKS else "TRT702"
        shown = "; ".join(
            p["message"] + (f" (byte {p['offset']})" if p.get("offset") is not None else "") for p in problems[:5]
        )
        more = f" (+{len(problems) - 5} more)" if len(problems) > 5 else ""
        checks.append(
            _check(
                check_id,
                "reject",
                shown + more,
                code,
                bpath,
                {"problems": problems[:50], "offsets": [p.get("offset") for p in problems[:50]]},
            )
        )
    container_bad = any(c not in DIGEST_CHECKS for c in by_check)
    if not container_bad:
        checks.append(
            _check(
                "bundle.container",
                "pass",
                f"container and header sound: {len(info['sections'])} sections, required fields present",
                "TRT702",
                bpath,
                {"sections": [s["name"] for s in info["sections"]]},
            )
        )
    if info["header"] is None:
        return checks  # nothing more can be read from a container that did not parse

    trtls_block = info["trtls"] if isinstance(info["trtls"], dict) else None
    sidecar = info["sidecar"]
    digests_bad = any(c in DIGEST_CHECKS for c in by_check)

    # -- TRT703 (recorded) and TRT704 (origin)
    if trtls_block is None:
        if sidecar is None:
            checks.append(
                _check(
                    "bundle.origin",
                    "hold",
                    "foreign bundle (no trtls record in its header) and no digests recorded: verify it, then record them with `trtls bundle promote FILE`",
                    "TRT704",
                    bpath,
                )
            )
        else:
            checks.append(
                _check(
                    "bundle.origin",
                    "pass",
                    f"foreign bundle promoted: digests recorded in {sidecar_path(bundle).name} ({sidecar.get('recorded_at')})",
                    "TRT704",
                    bpath,
                    {"origin": sidecar.get("origin")},
                )
            )
    else:
        checks.append(
            _check(
                "bundle.origin",
                "pass",
                "written by trtls (header trtls record)",
                "TRT704",
                bpath,
                {"format": trtls_block.get("format")},
            )
        )
    if not digests_bad:
        if sidecar is None:
            if trtls_block is not None:
                checks.append(
                    _check(
                        "bundle.digests",
                        "hold",
                        f"no sidecar {sidecar_path(bundle).name}: the whole-file digest is not recorded; {_rebuild(name)} or promote it",
                        "TRT703",
                        bpath,
                    )
                )
        else:
            recorded = "header trtls record and sidecar" if trtls_block is not None else "sidecar"
            checks.append(
                _check(
                    "bundle.digests",
                    "pass",
                    f"every section and the whole file match the {recorded}",
                    "TRT703",
                    bpath,
                    {"file_sha256": info["file_sha256"]},
                )
            )

    # -- TRT705 / TRT706: provenance vs what the route has now
    provenance = (trtls_block or {}).get("provenance") if trtls_block else (sidecar or {}).get("provenance")
    if not isinstance(provenance, dict):
        msg = "the bundle records no provenance (checkpoint revision, files digest, buildConfigHash, builder version): its link to this checkpoint and build cannot be proven"
        checks.append(
            _check("bundle.provenance.checkpoint", "hold", msg, "TRT705", base + ("checkpoint",), on_value=False)
        )
        checks.append(_check("bundle.provenance.build", "hold", msg, "TRT706", base + ("engine",)))
    else:
        checks.append(_provenance_checkpoint(ctx, provenance))
        checks.append(_provenance_build(ctx, provenance))

    # -- TRT707: the sections are the artifacts the later gates test
    if not container_bad:
        checks.append(_artifacts(ctx, info))

    # -- TRT708: SBOM
    checks.append(_sbom(ctx, bundle, info))
    return checks


# ----------------------------------------------------------------------------------------- provenance


def _current_checkpoint(ctx: Any) -> tuple[str | None, str | None, str]:
    """(commit, files digest, source) from gate 1 when it ran, else computed here the same way (read-only)."""
    g1 = getattr(ctx, "gate1", None)
    if g1 is not None:
        return g1.record.get("commit"), g1.record.get("files_digest"), "gate 1"
    from trtls.route.build import RouteBuildError, read_checkpoint

    try:
        state = read_checkpoint(ctx.loaded, ctx.route)
    except (RouteBuildError, OSError) as exc:
        return None, None, f"the checkpoint as found here ({exc})"
    return state.commit, state.files_digest, "the checkpoint as found here (gate 1 did not run)"


def _provenance_checkpoint(ctx: Any, prov: dict[str, Any]) -> GateCheck:
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
            "checkpoint files changed since the build"
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
            "bundle is stale: " + "; ".join(problems) + f": rebuild ({_rebuild(ctx.route_name)})",
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


def _changed_files(ctx: Any, prov: dict[str, Any]) -> list[str]:
    g1 = getattr(ctx, "gate1", None)
    now = {rel: f.get("sha256") for rel, f in (g1.files if g1 is not None else {}).items()}
    was = prov.get("checkpoint_files") if isinstance(prov.get("checkpoint_files"), dict) else {}
    if not now or not was:
        return []
    return sorted({r for r in now if was.get(r) != now[r]} | {r for r in was if r not in now})


def _current_build(ctx: Any) -> tuple[dict[str, Any] | None, str]:
    g2 = getattr(ctx, "gate2", None)
    if g2 is not None:
        return g2.evidence, "gate 2"
    from trtls.gates.environment import latest_successful_build

    linked = latest_successful_build(Path(ctx.recipe_dir), ctx.route.engine)
    if linked is None:
        return None, "build evidence (gate 2 did not run)"
    path, s = linked
    return {
        "path": str(path),
        "buildId": s.get("buildId"),
        "buildConfigHash": s.get("buildConfigHash"),
        "tensorrtVersion": s.get("tensorrtVersion"),
        "builderModule": s.get("builderModule"),
    }, "build evidence (gate 2 did not run)"


def _provenance_build(ctx: Any, prov: dict[str, Any]) -> GateCheck:
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
            f"no successful build of engine '{ctx.route.engine}' to compare with ({source}); {_rebuild(ctx.route_name)}",
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
            f"buildConfigHash {str(prov.get('build_config_hash'))[:12]}… differs from the latest successful build {ev_build.get('buildId')}'s {str(ev_build.get('buildConfigHash'))[:12]}…"
        )
    if str(prov.get("builder_version")) != str(ev_build.get("tensorrtVersion")):
        problems.append(
            f"built with {prov.get('builder')} {prov.get('builder_version')}, the latest build used {ev_build.get('builderModule')} {ev_build.get('tensorrtVersion')}"
        )
    if problems:
        return _check(
            "bundle.provenance.build",
            "hold",
            "bundle is stale: " + "; ".join(problems) + f": rebuild ({_rebuild(ctx.route_name)})",
            "TRT706",
            path,
            ev,
        )
    return _check(
        "bundle.provenance.build",
        "pass",
        f"buildConfigHash {str(prov.get('build_config_hash'))[:12]}… and {prov.get('builder')} {prov.get('builder_version')} match build {ev_build.get('buildId')}",
        "TRT706",
        path,
        ev,
    )


# ----------------------------------------------------------------------------------------- artifacts


def _file_sha(path: Path) -> str | None:
    from trtls.checkpoint.hashing import sha256_file

    try:
        return sha256_file(path)[0] if path.is_file() else None
    except OSError:
        return None


def _artifacts(ctx: Any, info: dict[str, Any]) -> GateCheck:
    """The ONNX and engine the bundle carries are the files gates 4–5 run (the recipe's onnx / output)."""
    path = ("routes", ctx.route_name, "engine")
    eng = ctx.loaded.engine(ctx.route.engine)
    sections = {s["name"]: s for s in info["sections"]}
    onnx_name = next((n for n in ONNX_SECTIONS if n in sections), None)
    engine_name = next((n for n in ENGINE_SECTIONS if n in sections), None)
    if onnx_name is None and engine_name is None:
        return _check(
            "bundle.artifacts",
            "hold",
            f"the bundle has no model section ({', '.join(ONNX_SECTIONS + ENGINE_SECTIONS)}): what gates 4–5 test cannot be linked to it",
            "TRT707",
            path,
        )
    pairs = []
    if onnx_name:
        pairs.append((onnx_name, ctx.resolve(eng.onnx)))
    if engine_name:
        pairs.append((engine_name, ctx.resolve(eng.output)))
    ev: dict[str, Any] = {}
    problems = []
    for section, file in pairs:
        file_sha = _file_sha(file)
        ev[section] = {"section_sha256": sections[section]["sha256"], "file": str(file), "file_sha256": file_sha}
        if file_sha is None:
            problems.append(f"{file.name} is missing, so section {section!r} cannot be matched to it")
        elif file_sha != sections[section]["sha256"]:
            problems.append(
                f"section {section!r} (sha256 {str(sections[section]['sha256'])[:12]}…) is not {file.name} on disk ({file_sha[:12]}…)"
            )
    if problems:
        return _check(
            "bundle.artifacts",
            "hold",
            "bundle is stale: "
            + "; ".join(problems)
            + f" — gates 4–5 test the files on disk; rebuild ({_rebuild(ctx.route_name)})",
            "TRT707",
            path,
            ev,
        )
    return _check(
        "bundle.artifacts",
        "pass",
        "sections "
        + ", ".join(repr(s) for s, _ in pairs)
        + " are byte-identical to "
        + ", ".join(f.name for _, f in pairs),
        "TRT707",
        path,
        ev,
    )


# ---------------------------------------------------------------------------------------------- SBOM


def _sbom(ctx: Any, bundle: Path, info: dict[str, Any]) -> GateCheck:
    path = ("routes", ctx.route_name, "bundle")
    sp = sbom_path(bundle)
    name = "bundle.sbom"
    if not sp.is_file():
        return _check(
            name,
            "hold",
            f"no SBOM {sp.name} (`<bundle>{SBOM_SUFFIX}`); {_rebuild(ctx.route_name)}",
            "TRT708",
            path,
            {"sbom": str(sp)},
        )
    try:
        if sp.stat().st_size > MAX_SBOM:
            raise ValueError(f"larger than {MAX_SBOM} bytes")
        doc = json.loads(sp.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return _check(name, "hold", f"SBOM {sp.name} does not parse: {exc}", "TRT708", path, {"sbom": str(sp)})
    problems = sbom_problems(doc, info)
    ev = {"sbom": str(sp), "problems": problems}
    if problems:
        return _check(
            name,
            "hold",
            f"SBOM {sp.name} does not describe this bundle: "
            + "; ".join(problems[:5])
            + f"; {_rebuild(ctx.route_name)}",
            "TRT708",
            path,
            ev,
        )
    n = len(doc.get("components") or [])
    return _check(
        name,
        "pass",
        f"SBOM {sp.name}: CycloneDX {doc.get('specVersion')}, {n} components (checkpoint files, ONNX, engine, builder) with matching sha256",
        "TRT708",
        path,
        ev,
    )


def _sha_of(component: Any) -> str | None:
    if not isinstance(component, dict):
        return None
    for h in component.get("hashes") or []:
        if isinstance(h, dict) and h.get("alg") == "SHA-256":
            return h.get("content")
    return None


def sbom_problems(doc: Any, info: dict[str, Any]) -> list[str]:
    """Why a CycloneDX document does not describe the bundle `info` (from `inspect_json`); empty = it does."""
    if not isinstance(doc, dict):
        return ["not a JSON object"]
    problems = []
    if doc.get("bomFormat") != "CycloneDX" or doc.get("specVersion") != "1.5":
        problems.append(
            f"bomFormat/specVersion are {doc.get('bomFormat')!r}/{doc.get('specVersion')!r}, expected 'CycloneDX'/'1.5'"
        )
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    if _sha_of(meta.get("component")) != info.get("file_sha256"):
        problems.append(
            f"metadata.component sha256 {str(_sha_of(meta.get('component')))[:12]}… is not the bundle's {str(info.get('file_sha256'))[:12]}…"
        )
    comps = [c for c in (doc.get("components") or []) if isinstance(c, dict)]
    by_ref = {c.get("bom-ref"): c for c in comps}
    sections = {s["name"]: s.get("sha256") for s in info.get("sections") or []}
    prov = ((info.get("trtls") or {}).get("provenance") or {}) if isinstance(info.get("trtls"), dict) else {}
    ck = by_ref.get("checkpoint")
    if ck is None or ck.get("type") != "machine-learning-model":
        problems.append("no checkpoint component (machine-learning-model)")
    else:
        listed = {c.get("name"): _sha_of(c) for c in (ck.get("components") or []) if isinstance(c, dict)}
        files = prov.get("checkpoint_files") if isinstance(prov.get("checkpoint_files"), dict) else None
        if not listed:
            problems.append("the checkpoint component lists no files")
        elif files is not None and listed != files:
            diff = sorted(set(listed) ^ set(files) | {k for k in listed if k in files and listed[k] != files[k]})
            problems.append("checkpoint files differ from the bundle's provenance: " + ", ".join(diff[:10]))
        if prov.get("checkpoint_commit") and ck.get("version") != prov.get("checkpoint_commit"):
            problems.append(
                f"checkpoint version {ck.get('version')!r} is not the bundle's commit {prov.get('checkpoint_commit')!r}"
            )
    for ref, names in (("onnx", ONNX_SECTIONS), ("engine", ENGINE_SECTIONS)):
        section = next((n for n in names if n in sections), None)
        if section is None:
            continue
        if ref not in by_ref:
            problems.append(f"no {ref} component")
        elif _sha_of(by_ref[ref]) != sections[section]:
            problems.append(f"{ref} component sha256 is not section {section!r}'s")
    builder = by_ref.get("builder")
    if builder is None or not builder.get("version"):
        problems.append("no builder component with a version")
    elif prov.get("builder_version") and str(builder.get("version")) != str(prov.get("builder_version")):
        problems.append(f"builder version {builder.get('version')} is not the bundle's {prov.get('builder_version')}")
    return problems
