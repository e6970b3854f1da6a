"""Gate 3 on a route: the bundle is there, its container sound, its digests recorded, its origin known; then provenance,
artifacts and SBOM (`run_gate`, the hook `trtls.gates.run` calls)."""

from __future__ import annotations

from functools import partial
from typing import Any

from trtls.bundle import (
    CHECK_FILE_DIGEST,
    CHECK_SECTION_DIGEST,
    CHECK_SIDECAR,
    CHECK_TRTLS_BLOCK,
    inspect_json,
    sidecar_path,
)
from trtls.bundle.optimized import CHECK_OPTIMIZED
from trtls.bundle.trtmc import CHECK_TRTMC_LOAD
from trtls.core.gate_result import GateCheck, gate_check
from trtls.gates.bundle.contents import check_artifacts, check_sbom
from trtls.gates.bundle.provenance import (
    _current_checkpoint,
    check_build_provenance,
    check_checkpoint_provenance,
    rebuild_advice,
)
from trtls.gates.bundle.receipt_check import check_receipt
from trtls.gates.context import GateContext

GATE = 3
_check = partial(gate_check, GATE)
DIGEST_CHECKS = (CHECK_TRTLS_BLOCK, CHECK_SECTION_DIGEST, CHECK_FILE_DIGEST, CHECK_SIDECAR)  # TRT703; the rest TRT702


def run_gate(ctx: GateContext) -> list[GateCheck]:
    route, name = ctx.route, ctx.route_name
    base = ("routes", name)
    bpath = base + ("bundle",)
    bundle = ctx.resolve(route.bundle)
    checks: list[GateCheck] = []
    from trtls.gates.deployed import RefusedPath, contained

    try:
        contained(ctx, route.bundle)
    except RefusedPath as exc:  # never read through `..` or a symlink out of the recipe folder
        return [_check("bundle.paths", "hold", str(exc), "TRT709", bpath, {"bundle": route.bundle})]
    if not bundle.is_file():
        what = "is not a regular file" if bundle.exists() else "not found"
        return [
            _check(
                "bundle.present",
                "hold",
                f"bundle {what}: {bundle}; {rebuild_advice(name)}",
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
        if p["check"] != CHECK_TRTMC_LOAD:  # TRTMC's load: TRT711 and bundle.trtmc_load below judge it for the route
            by_check.setdefault(p["check"], []).append(p)
    for check_id, problems in by_check.items():
        code = "TRT703" if check_id in DIGEST_CHECKS else "TRT712" if check_id == CHECK_OPTIMIZED else "TRT702"
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
    full = (
        dict(info["header"])
        if "trtls" in info["header"] or info["trtls"] is None
        else {**info["header"], "trtls": info["trtls"]}
    )  # inspect keeps trtls's record apart; TRTMC's reader does not
    checks.append(_shadow_check(full, bpath))
    if ctx.route.bundle_format == "trtmc" and not container_bad:
        checks.append(_trtmc_check(ctx, bundle, base + ("bundle_format",)))

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
                    "foreign bundle (no trtls record in its header) and no digests recorded: verify it, then record "
                    "them with `trtls bundle promote FILE`",
                    "TRT704",
                    bpath,
                )
            )
        else:
            checks.append(
                _check(
                    "bundle.origin",
                    "pass",
                    f"foreign bundle promoted: digests recorded in {sidecar_path(bundle).name} "
                    f"({sidecar.get('recorded_at')})",
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
                        f"no sidecar {sidecar_path(bundle).name}: the whole-file digest is not recorded; "
                        f"{rebuild_advice(name)} or promote it",
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

    # -- TRT713 / TRT714: a bundle trtls did not write (native TRTMC output) has its provenance in a build receipt
    if trtls_block is None:
        commit, _, _ = _current_checkpoint(ctx)  # gate 1's record when it ran
        checks.append(check_receipt(bundle, info["file_sha256"], bpath, commit))

    # -- TRT705 / TRT706: provenance vs what the route has now
    provenance = (trtls_block or {}).get("provenance") if trtls_block else (sidecar or {}).get("provenance")
    if not isinstance(provenance, dict):
        msg = (
            "the bundle records no provenance (checkpoint revision, files digest, buildConfigHash, builder "
            "version): its link to this checkpoint and build cannot be proven"
        )
        checks.append(
            _check("bundle.provenance.checkpoint", "hold", msg, "TRT705", base + ("checkpoint",), on_value=False)
        )
        checks.append(_check("bundle.provenance.build", "hold", msg, "TRT706", base + ("engine",)))
    else:
        checks.append(check_checkpoint_provenance(ctx, provenance))
        checks.append(check_build_provenance(ctx, provenance))

    # -- TRT707: the sections are the artifacts the later gates test
    if not container_bad:
        checks.append(check_artifacts(ctx, info, provenance if isinstance(provenance, dict) else None))

    # -- TRT708: SBOM
    checks.append(check_sbom(ctx, bundle, info))
    return checks


def _shadow_check(header: dict[str, Any], path: tuple) -> GateCheck:
    """TRT711: a top-level field TRTMC reads that is missing but appears nested would be read from the nested one."""
    from trtls.bundle.trtmc import shadowed_fields

    found = shadowed_fields(header)
    if found:
        said = "; ".join(f"'{f['field']}' is read from {f['at']} = {str(f['value'])[:60]!r}" for f in found)
        return _check(
            "bundle.header_shadow",
            "reject",
            f"header fields missing at the top level would be read from nested keys by TensorRT Model Connect's "
            f"reader (first occurrence anywhere): {said}",
            "TRT711",
            path,
            {"shadowed": found},
        )
    return _check(
        "bundle.header_shadow", "pass", "no nested key stands in for a missing top-level field", "TRT711", path
    )


def _trtmc_check(ctx: GateContext, bundle: Any, path: tuple) -> GateCheck:
    """TRT702 `bundle.trtmc_load`: a route that promotes a TRTMC-format bundle gets one TRTMC's native loader would
    load — read as that loader reads it (`bundle.trtmc.read_trtmc`): dispatch record, engine_plan, tokenizer.json,
    top-level header fields, and the engine's I/O recorded in the bundle's io_map against the contract TRTMC's BERT
    pipeline feeds (`bundle.trtmc_contract`); a bundle with no io_map holds (the engine is not readable without a
    GPU). Checked against TRTMC's format and source; no TRTMC runtime runs here."""
    from trtls.bundle import BundleError
    from trtls.bundle.trtmc import read_trtmc

    try:
        view = read_trtmc(bundle)
    except (BundleError, OSError, UnicodeDecodeError) as exc:
        return _check("bundle.trtmc_load", "hold", f"cannot read the bundle as TRTMC does: {exc}", "TRT702", path)
    problems = view.load_problems(ctx.route.max_input_tokens, routed=True)
    io_not_checked = view.engine_io(ctx.route.max_input_tokens, routed=True)[
        1
    ]  # no io_map / recipe profiles: not read here (no GPU to deserialize it)
    io_map = view.header.get("io_map")
    # what the build did not record is not_checked (waivable); no io_map at all is a hold (nothing of it was read)
    ev = {
        "runtime_strategy": view.dispatch("runtime_strategy"),
        "engine_backend": view.dispatch("engine_backend"),
        "trt_version": view.dispatch("trt_version"),
        "trt_abi": view.dispatch("trt_abi"),
        "sections": sorted(view.sections),
        "problems": problems,
        "engine_io_not_checked": io_not_checked,
        "engine_io_source": (view.header.get("io_map") or {}).get("source")
        if isinstance(view.header.get("io_map"), dict)
        else None,
        "runtime_ran": False,
    }
    ev["max_input_tokens"] = ctx.route.max_input_tokens
    if problems or io_not_checked:
        unread = not problems and isinstance(io_map, dict)
        problems = problems + [f"{n}: TRTMC's input contract is unverified" for n in io_not_checked]
        return _check(
            "bundle.trtmc_load",
            "not_checked" if unread else "hold",
            'the route asks for bundle_format = "trtmc", but TensorRT Model Connect\'s runtime would not load and run '
            "this bundle as TRTMC supports it: " + "; ".join(problems[:5]) + f"; {rebuild_advice(ctx.route_name)}",
            "TRT702",
            path,
            ev,
        )
    return _check(
        "bundle.trtmc_load",
        "pass",
        f"TensorRT Model Connect layout: runtime_strategy {ev['runtime_strategy']}, engine_backend "
        f"{ev['engine_backend']}, TensorRT ABI {ev['trt_abi']}, engine_plan and tokenizer.json present; the engine's "
        "recorded I/O is what TRTMC's BERT pipeline feeds and reads (int32 [n] input_ids/attention_mask, one float32 "
        "output [n, hidden], max_cache_length = profile max) (checked against TRTMC's source; no TRTMC runtime ran)",
        "TRT702",
        path,
        ev,
    )
