"""Gate 5's rollback drill: restore the previous bundle over the active one, verify it, smoke-run it, restore the
new one."""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from trtls.bundle import BundleError, read_bundle, sidecar_path
from trtls.bundle.sections import ENGINE_SECTIONS, engine_section  # one list: trtls's and TRTMC's names
from trtls.core.findings import TomlPath
from trtls.core.gate_result import CheckStatus, GateCheck, gate_check
from trtls.core.paths import real
from trtls.core.sha256 import sha256_file
from trtls.fs import Kind, atomic_write_bytes, atomic_writer, open_regular, read_bytes, remove_file
from trtls.gates.files import RECORD_LIMIT, read_json, scratch
from trtls.runtimes import RunResult, RuntimeSpec, run_inputs

GATE = 5
_check = partial(gate_check, GATE)
MODEL_SECTIONS = ("model.onnx", "onnx", "model")  # ONNX sections a smoke run can use (onnxruntime)


def restore(
    source: str | os.PathLike[str], target: str | os.PathLike[str], *, within: str | os.PathLike[str] | None = None
) -> str:
    """Copy `source` (a regular file) over `target` atomically, through the door: inside `within` (the drill's
    scratch folder; None: the target's own real folder). Returns the sha256 of what was written."""
    h = hashlib.sha256()
    root = within if within is not None else real(Path(target).parent)
    with (
        open_regular(source, limit=None, follow=True) as src,
        atomic_writer(target, kind=Kind.scratch, within=root) as out,
    ):
        for chunk in iter(lambda: src.read(1024 * 1024), b""):
            h.update(chunk)
            out.write(chunk)
    return h.hexdigest()


def _recorded_sha(path: Path) -> str | None:
    data = read_json(sidecar_path(path))
    value = data.get("file_sha256") if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


@contextlib.contextmanager
def bundle_model(bundle: str | os.PathLike[str]) -> Iterator[tuple[str, Path] | str]:
    """The bundle's runnable model extracted to a temp file: yields (kind, path), or a reason string."""
    try:
        b = read_bundle(bundle)
    except BundleError as exc:
        yield f"bundle unreadable: {exc}"
        return
    pick = next(((n, "onnxruntime") for n in MODEL_SECTIONS if n in b.sections), None) or next(
        ((n, "tensorrt") for n in [engine_section(b.sections)] if n is not None), None
    )
    if pick is None:
        yield f"the bundle holds no runnable model section ({', '.join(MODEL_SECTIONS + ENGINE_SECTIONS)})"
        return
    section, kind = pick
    with scratch("trtls-smoke-") as folder:
        try:
            target = extract_section(b, section, folder / ("model.onnx" if kind == "onnxruntime" else "model.engine"))
        except (BundleError, OSError) as exc:
            yield f"the {section} section cannot be extracted: {exc}"
            return
        yield kind, target


def extract_section(b: Any, section: str, target: Path) -> Path:
    """One section of a read bundle written to `target` in a scratch folder (through the door); raises BundleError
    or OSError. Every smoke run extracts its model this way."""
    with atomic_writer(target, kind=Kind.scratch, within=target.parent) as out:
        for part in b.iter_section(section):
            out.write(part)
    return target


def bundle_smoke(bundle: str | os.PathLike[str], inputs: Sequence[Any], *, timeout_s: float = 60.0) -> RunResult:
    """Smoke run: the bundle's model (ONNX section → onnxruntime; engine → tensorrt) on `inputs`; outputs finite."""
    with bundle_model(bundle) as got:
        if isinstance(got, str):
            return RunResult("unavailable" if "no runnable" in got or "not available" in got else "error", got)
        kind, model = got
        res = run_inputs(RuntimeSpec(kind, model=str(model), timeout_s=timeout_s), list(inputs))
    return finite_smoke(res)


def finite_smoke(res: RunResult) -> RunResult:
    """A smoke run passes only with finite outputs: the first NaN/Inf in a float (or complex) output makes it an
    error naming the request and the output. Every smoke run of gate 5 ends here (the drill's and the deployed
    artifact's)."""
    if res.ok:
        for i, out in enumerate(res.outputs):
            for name, arr in out.items():
                if arr.dtype.kind in "fc" and not np.isfinite(arr).all():
                    return RunResult("error", f"smoke request {i}: output {name!r} has NaN/Inf")
    return res


SmokeFn = Callable[[Path], RunResult]


def rollback_drill(
    active: str | os.PathLike[str],
    previous: str | os.PathLike[str] | None,
    smoke: SmokeFn | None,
    path: TomlPath = (),
    *,
    within: str | os.PathLike[str] | None = None,
) -> GateCheck:
    """TRT908: restore `previous` over `active` (atomic), verify sha256 + smoke run, then restore the new bundle and
    verify.

    `active` is where the runtime loads the bundle from (the new bundle is there now and is there again at
    the end, byte for byte, whatever happens in between). Sidecars (`<bundle>.trtls.json`) move with them. Every
    write stays in `within` (gate 5 runs the drill on copies in its scratch folder; None: the active bundle's real
    folder), through the door.
    """
    name = "release.rollback"
    if previous is None:
        return _check(name, "hold", "no previous bundle: rollback cannot be exercised", "TRT908", path)
    active, previous = Path(active), Path(previous)
    if not previous.is_file():
        return _check(name, "hold", f"previous bundle not found: {previous}", "TRT908", path)
    if not active.is_file():
        return _check(name, "hold", f"the new bundle is not in place: {active}", "TRT908", path)
    if active.resolve() == previous.resolve():
        return _check(name, "hold", "the previous bundle is the active bundle itself", "TRT908", path)
    if smoke is None:
        return _check(name, "hold", "no smoke run for the restored bundle (no smoke inputs)", "TRT908", path)
    sha_new = sha256_file(active)
    sha_prev = sha256_file(previous)
    recorded_prev = _recorded_sha(previous)
    ev: dict[str, Any] = {
        "active": str(active),
        "previous": str(previous),
        "new_sha256": sha_new,
        "previous_sha256": sha_prev,
        "previous_recorded_sha256": recorded_prev,
    }
    if sha_prev == sha_new:
        return _check(
            name,
            "hold",
            "the previous bundle is byte-identical to the new one: rollback would prove nothing",
            "TRT908",
            path,
            ev,
        )
    if recorded_prev is not None and recorded_prev != sha_prev:
        return _check(
            name,
            "reject",
            f"the previous bundle does not match its sidecar record (sha256 {sha_prev[:12]}… vs recorded "
            f"{recorded_prev[:12]}…)",
            "TRT908",
            path,
            ev,
        )

    side_active = sidecar_path(active)
    side_prev = sidecar_path(previous)
    root = Path(within) if within is not None else real(active.parent)
    move = partial(restore, within=root)
    try:
        active_sidecar_bytes = read_bytes(side_active, limit=RECORD_LIMIT, follow=False)
    except FileNotFoundError:
        active_sidecar_bytes = None
    stash = active.with_name(f".{active.name}.trtls-rollback-new")
    status: CheckStatus = "pass"
    message = ""
    try:
        sha_stash = move(active, stash)
        if sha_stash != sha_new:
            return _check(
                name,
                "reject",
                "could not keep an exact copy of the new bundle; rollback not attempted",
                "TRT908",
                path,
                ev,
            )
        # 1. roll back
        move(previous, active)
        if side_prev.is_file():
            move(side_prev, side_active)
        restored = sha256_file(active)
        ev["restored_sha256"] = restored
        if restored != sha_prev:
            status, message = (
                "reject",
                f"after rollback the active bundle's sha256 is {restored[:12]}…, not the previous bundle's "
                f"{sha_prev[:12]}…",
            )
        else:
            # 2. smoke run on the restored bundle, where the runtime loads it from
            res = smoke(active)
            ev["smoke"] = res.summary()
            if res.status == "unavailable":
                status, message = (
                    "not_checked",
                    f"previous bundle restored and verified (sha256 {sha_prev[:12]}…), but the smoke run of its "
                    f"deployed artifact cannot run here: {res.message}",
                )
            elif not res.ok:
                status, message = (
                    "reject",
                    f"previous bundle restored (sha256 verified) but its smoke run failed: {res.summary()}",
                )
    finally:
        # 3. roll forward: the new bundle back in place, always
        if stash.is_file():
            move(stash, active)
            remove_file(stash, kind=Kind.scratch, within=root)
        if active_sidecar_bytes is not None:
            atomic_write_bytes(side_active, active_sidecar_bytes, kind=Kind.scratch, within=root)
        elif side_active.is_file() and side_prev.is_file():
            remove_file(side_active, kind=Kind.scratch, within=root)
    final = sha256_file(active)
    ev["final_sha256"] = final
    if final != sha_new:
        return _check(
            name,
            "reject",
            f"the new bundle was not restored: sha256 {final[:12]}… instead of {sha_new[:12]}…",
            "TRT908",
            path,
            ev,
        )
    if status != "pass":
        return _check(name, status, message, "TRT908", path, ev)
    return _check(
        name,
        "pass",
        f"rollback exercised: previous bundle restored (sha256 {sha_prev[:12]}… verified), smoke run ok; new bundle "
        f"restored (sha256 {sha_new[:12]}… verified)",
        "TRT908",
        path,
        ev,
    )
