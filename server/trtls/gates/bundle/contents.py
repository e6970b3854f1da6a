"""Gate 3's content checks: the bundle's sections are the artifacts the later gates test (TRT707), and its SBOM
names them with their digests (TRT708)."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from trtls.bundle.sbom import SBOM_SUFFIX, sbom_path
from trtls.bundle.sections import ENGINE_SECTIONS, engine_section  # one list: trtls's and TRTMC's names
from trtls.core.gate_result import GateCheck, gate_check
from trtls.fs import TooLarge, parse_json, read_text
from trtls.gates.bundle.provenance import rebuild_advice
from trtls.gates.context import GateContext

GATE = 3
_check = partial(gate_check, GATE)
MAX_SBOM = 64 * 1024 * 1024
ONNX_SECTIONS = ("model.onnx", "onnx", "model")


def _file_sha(path: Path) -> str | None:
    from trtls.checkpoint.hashing import sha256_file

    try:
        return sha256_file(path)[0] if path.is_file() else None
    except OSError:
        return None


def check_artifacts(ctx: GateContext, info: dict[str, Any], provenance: dict[str, Any] | None = None) -> GateCheck:
    """The bundle carries what the route deploys (its engine; or, for a route with no engine, its ONNX and no
    engine), byte-identical to the files the recipe names — or, for an ONNX route with `[routes.X.precision]`, the
    conversion of its ONNX on disk with the recipe's settings, as the bundle's provenance records it
    (`precision_conversion`: input and output sha256, settings)."""
    deploys_onnx = ctx.route.deploys == "onnx"
    path = ("routes", ctx.route_name, "onnx" if deploys_onnx else "engine")
    sections = {s["name"]: s for s in info["sections"]}
    onnx_name = next((n for n in ONNX_SECTIONS if n in sections), None)
    engine_name = engine_section(sections)
    if deploys_onnx and (onnx_name is None or engine_name is not None):
        return _check(
            "bundle.artifacts",
            "hold",
            "the route deploys the ONNX model, but the bundle "
            + ("has no model.onnx section" if onnx_name is None else f"carries an engine section {engine_name!r}"),
            "TRT707",
            path,
        )
    if not deploys_onnx and engine_name is None:
        return _check(
            "bundle.artifacts",
            "hold",
            f"the route deploys engine '{ctx.route.engine}', but the bundle has no engine section "
            f"({', '.join(ENGINE_SECTIONS)})",
            "TRT707",
            path,
        )
    pairs: list[tuple[str, Path]] = []
    if deploys_onnx:
        assert onnx_name is not None and ctx.route.onnx is not None  # refused above; an ONNX route names its ONNX
        pairs.append((onnx_name, ctx.resolve(ctx.route.onnx)))
    else:
        assert engine_name is not None and ctx.route.engine is not None  # refused above; an engine route names it
        eng = ctx.loaded.engine(ctx.route.engine)
        if onnx_name:
            pairs.append((onnx_name, ctx.resolve(eng.onnx)))
        pairs.append((engine_name, ctx.resolve(eng.output)))
    ev: dict[str, Any] = {}
    problems = []
    converted = ctx.route.precision if deploys_onnx else None
    for section, file in pairs:
        file_sha = _file_sha(file)
        ev[section] = {"section_sha256": sections[section]["sha256"], "file": str(file), "file_sha256": file_sha}
        if file_sha is None:
            problems.append(f"{file.name} is missing, so section {section!r} cannot be matched to it")
        elif converted is not None:
            conversion = (provenance or {}).get("precision_conversion")
            ev[section]["precision_conversion"] = conversion
            problems += _conversion_problems(section, sections[section]["sha256"], file, file_sha, conversion, ctx)
        elif file_sha != sections[section]["sha256"]:
            problems.append(
                f"section {section!r} (sha256 {str(sections[section]['sha256'])[:12]}…) is not {file.name} on disk "
                f"({file_sha[:12]}…)"
            )
    if problems:
        return _check(
            "bundle.artifacts",
            "hold",
            "bundle is stale: "
            + "; ".join(problems)
            + f" — gates 4–5 test the files on disk; rebuild ({rebuild_advice(ctx.route_name)})",
            "TRT707",
            path,
            ev,
        )
    if converted is not None:
        section, file = pairs[0]
        message = (
            f"section {section!r} is the {converted.convert} conversion of {file.name} on disk with the recipe's "
            "precision settings (the bundle's provenance: input and output sha256, settings)"
        )
        return _check("bundle.artifacts", "pass", message, "TRT707", path, ev)
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


def _conversion_problems(
    section: str, section_sha: str, file: Path, file_sha: str, conversion: Any, ctx: GateContext
) -> list[str]:
    """Why the section is not the conversion of `file` with the route's precision settings (empty: it is), judged
    from the conversion record the route build wrote in the bundle's provenance."""
    from trtls.builds.precision import conversion_settings

    assert ctx.route.precision is not None
    if not isinstance(conversion, dict):
        return [
            f"the route converts {file.name} ([routes.{ctx.route_name}.precision]) but the bundle records no "
            "precision conversion"
        ]
    out = []
    wanted = conversion_settings(ctx.route.precision.model_dump())
    recorded = {k: conversion.get(k) for k in wanted}
    for key in wanted:
        have = sorted(recorded[key] or []) if isinstance(wanted[key], list) else recorded[key]
        if have != wanted[key]:
            out.append(
                f"section {section!r} was converted with {key} = {recorded[key]!r}, the recipe says {wanted[key]!r}"
            )
    if conversion.get("input_sha256") != file_sha:
        out.append(
            f"section {section!r} was converted from an ONNX (sha256 {str(conversion.get('input_sha256'))[:12]}…) "
            f"that is not {file.name} on disk ({file_sha[:12]}…)"
        )
    if conversion.get("output_sha256") != section_sha:
        out.append(f"section {section!r} (sha256 {section_sha[:12]}…) is not the conversion its provenance records")
    return out


# ---------------------------------------------------------------------------------------------- SBOM


def check_sbom(ctx: GateContext, bundle: Path, info: dict[str, Any]) -> GateCheck:
    path = ("routes", ctx.route_name, "bundle")
    sp = sbom_path(bundle)
    name = "bundle.sbom"
    if not sp.is_file():
        return _check(
            name,
            "hold",
            f"no SBOM {sp.name} (`<bundle>{SBOM_SUFFIX}`); {rebuild_advice(ctx.route_name)}",
            "TRT708",
            path,
            {"sbom": str(sp)},
        )
    try:
        doc = parse_json(read_text(sp, limit=MAX_SBOM, follow=True))
    except TooLarge:
        exc_text = f"larger than {MAX_SBOM} bytes"
        return _check(name, "hold", f"SBOM {sp.name} does not parse: {exc_text}", "TRT708", path, {"sbom": str(sp)})
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
            + f"; {rebuild_advice(ctx.route_name)}",
            "TRT708",
            path,
            ev,
        )
    n = len(doc.get("components") or [])
    return _check(
        name,
        "pass",
        f"SBOM {sp.name}: CycloneDX {doc.get('specVersion')}, {n} components with matching sha256",
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
    meta: dict[str, Any] = doc["metadata"] if isinstance(doc.get("metadata"), dict) else {}
    if _sha_of(meta.get("component")) != info.get("file_sha256"):
        problems.append(
            f"metadata.component sha256 {str(_sha_of(meta.get('component')))[:12]}… is not the bundle's "
            f"{str(info.get('file_sha256'))[:12]}…"
        )
    comps = [c for c in (doc.get("components") or []) if isinstance(c, dict)]
    by_ref = {c.get("bom-ref"): c for c in comps}
    sections = {s["name"]: s.get("sha256") for s in info.get("sections") or []}
    prov = ((info.get("trtls") or {}).get("provenance") or {}) if isinstance(info.get("trtls"), dict) else {}
    ck = by_ref.get("checkpoint")
    if ck is None or ck.get("type") != "machine-learning-model":
        problems.append("no checkpoint component (machine-learning-model)")
    else:
        listed = {str(c.get("name")): _sha_of(c) for c in (ck.get("components") or []) if isinstance(c, dict)}
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
        section = engine_section(sections) if ref == "engine" else next((n for n in names if n in sections), None)
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
