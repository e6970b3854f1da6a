"""Gate 5's baseline: the stored measurement a new release must not regress from (written atomically)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from trtls.core.findings import TomlPath
from trtls.core.gate_result import GateCheck, gate_check
from trtls.core.paths import real
from trtls.fs import Kind, atomic_write_text, ensure_folder
from trtls.gates.files import read_json
from trtls.gates.release.measure import Measurement, Thresholds

GATE = 5
_check = partial(gate_check, GATE)
BASELINE_FORMAT = "trtls.release-baseline/1"


def baseline_path(root: str | os.PathLike[str], route: str) -> Path:
    return Path(root) / ".trtls" / "routes" / route / "baseline.json"


def load_baseline(root: str | os.PathLike[str], route: str) -> dict[str, Any] | None:
    data = read_json(baseline_path(root, route))
    return (
        data
        if isinstance(data, dict)
        and data.get("format") == BASELINE_FORMAT
        and isinstance(data.get("measurement"), dict)
        else None
    )


def write_baseline(
    root: str | os.PathLike[str],
    route: str,
    m: Measurement,
    *,
    bundle_sha256: str | None = None,
    input_sets: Mapping[str, Any] | None = None,
    session: Mapping[str, Any] | None = None,
) -> Path:
    """Record `m` as the route's baseline, atomically, inside the recipe's real folder `root` (a `.trtls` swapped for
    a symlink leading out is refused: an OSError the caller reports)."""
    path = baseline_path(root, route)
    within = real(root)
    ensure_folder(path.parent, within=within)
    record = {
        "format": BASELINE_FORMAT,
        "route": route,
        "recorded_at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "bundle_sha256": bundle_sha256,
        "measurement": m.as_dict(),
        **({"input_sets": dict(input_sets)} if input_sets else {}),  # each set's own figures, never pooled
        **({"session": dict(session)} if session else {}),  # the ONNX Runtime session it was measured with
    }
    atomic_write_text(path, json.dumps(record, indent=2) + "\n", kind=Kind.evidence, within=within)
    return path


def check_baseline(m: Measurement, baseline: Mapping[str, Any] | None, t: Thresholds, path: TomlPath = ()) -> GateCheck:
    """TRT906: compare with the stored baseline (p95 latency, peak memory)."""
    if baseline is None:
        return _check(
            "release.baseline",
            "hold",
            "no stored baseline for this route: regressions cannot be judged (after reviewing a run, record one: "
            "`trtls gates --route NAME --record-baseline`)",
            "TRT906",
            path,
            {"measurement": m.as_dict()},
        )
    b = baseline.get("measurement", {})
    b = b if isinstance(b, Mapping) else {}
    regressions, under_floor, not_compared = [], [], []
    compared = {}
    for key, label, unit, floor in (
        ("p95_ms", "p95 latency", "ms", t.regression_floor_ms),
        ("peak_rss_mib", "peak memory", "MiB", t.regression_floor_mib),
    ):
        old, new = b.get(key), getattr(m, key)
        usable = isinstance(old, (int, float)) and not isinstance(old, bool) and math.isfinite(old) and old > 0
        if new is not None and not usable:  # said, never left out in silence: a pass rests only on what was compared
            not_compared.append(f"{label} not compared: the baseline's {key} is {old!r}, not a positive number")
        if usable and new is not None:
            change = new / old - 1.0
            compared[key] = {"baseline": old, "now": new, "change": change, "floor": floor}
            if change > t.max_regression:
                if new - old > floor:
                    regressions.append(
                        f"{label} {new:.3f} {unit} vs baseline {old:.3f} {unit} (+{change * 100:.0f} % > "
                        f"{t.max_regression * 100:.0f} %)"
                    )
                else:
                    under_floor.append(
                        f"{label} +{change * 100:.0f} % is only +{new - old:.3g} {unit}, under the {floor:g} {unit} "
                        "noise floor"
                    )
    ev = {
        "compared": compared,
        "baseline_recorded_at": baseline.get("recorded_at"),
        "under_noise_floor": under_floor,
        "not_compared": not_compared,
    }
    if regressions:
        return _check(
            "release.baseline",
            "reject",
            "regression against the baseline: " + "; ".join(regressions),
            "TRT906",
            path,
            ev,
        )
    if not compared:
        return _check("release.baseline", "hold", "the stored baseline has nothing comparable", "TRT906", path, ev)
    changes = ", ".join(f"{k} {v['change'] * 100:+.0f} %" for k, v in compared.items())
    within = f"no regression over {t.max_regression * 100:.0f} % against the baseline ({changes})"
    if under_floor:
        within += "; " + "; ".join(under_floor)
    if not_compared:
        within += "; " + "; ".join(not_compared)
    return _check("release.baseline", "pass", within, "TRT906", path, ev)
