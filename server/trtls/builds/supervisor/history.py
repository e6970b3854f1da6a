"""Per build-config history: how long each phase usually takes, and where builds were stopped.

Keyed by buildConfigHash (ONNX bytes + effective settings + builder version), so a baseline is only
ever compared with builds of the very same network and settings. Phase ids are tree positions, the
same across such builds. This is the stall evidence a person needs before pressing Stop:
"quiet 42 s · usual 30 s".

Each config also keeps the peak memory of its builds (`peaks`: buildId, startedAt, outcome and the worker's peak RSS,
for every outcome that measured one: a build that ran out of memory is the one to remember), said before the next
build as "last build peaked at 412 MiB" (core.display.peak_memory_text).

Each config also keeps its model's facts (`facts`: builder, device, ONNX bytes, layers, profiles: see
supervisor/similar_builds.py), so an engine with no history of its own can be estimated from similar builds of the
same project.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

from trtls.builds.roots import state_root
from trtls.builds.timing_cache import cache_lock
from trtls.fs import Kind, atomic_write_text, ensure_folder, parse_json, read_text

KEEP = 20  # durations kept per phase
KEEP_BUILDS = 100  # dated whole-build durations kept per config (the report's "build time over time")
KEEP_CONFIGS = 200  # build configs kept (the most recently used): every edit of a setting or a model is a new one
MAX_HISTORY_BYTES = 64 << 20  # 200 configs x 100 dated builds x ~100 phases stays far below this


class History:
    def __init__(self, path: Path):
        self.path = path
        self.root = state_root(path)  # the recipe's folder: every write stays in it (a swapped .trtls is refused)

    def _load(self) -> dict[str, Any]:
        """The history file, or {} when it is missing, damaged, a symlink or not a file (history is advice, never a
        reason to fail)."""
        try:
            data = parse_json(read_text(self.path, limit=MAX_HISTORY_BYTES))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {
            k: v
            for k, v in data.items()
            if isinstance(v, dict) and isinstance(v.get("phases", {}), dict) and isinstance(v.get("stops", []), list)
        }

    def baselines(self, config_hash: str) -> dict[str, float]:
        entry = self._load().get(config_hash, {})
        return {pid: round(statistics.median(d), 3) for pid, d in entry.get("phases", {}).items() if d}

    def builds(self, config_hash: str) -> list[dict[str, Any]]:
        """Successful builds of this config, oldest first: {buildId, startedAt (epoch s), durationS}.
        Histories written before dates were kept have none (an empty list, never invented dates)."""
        entry = self._load().get(config_hash, {})
        return [b for b in entry.get("builds", []) if isinstance(b, dict) and "startedAt" in b and "durationS" in b]

    def others(self, config_hash: str) -> list[tuple[dict[str, Any], list[float]]]:
        """Every other config that recorded its model's facts: (facts, whole-build durations), for the time left of
        an engine with no history of its own (supervisor/similar_builds.py)."""
        out = []
        for key, entry in self._load().items():
            facts = entry.get("facts")
            if key == config_hash or not isinstance(facts, dict):
                continue
            durations = [b.get("durationS") for b in entry.get("builds", []) if isinstance(b, dict)]
            kept = [float(d) for d in durations if isinstance(d, (int, float)) and d > 0]
            if kept:
                out.append((facts, kept))
        return out

    def peaks(self, config_hash: str) -> list[dict[str, Any]]:
        """The peak memory of this config's builds, oldest first: {buildId, startedAt, outcome, peakRssBytes}
        (histories written before peaks were kept have none)."""
        entry = self._load().get(config_hash, {})
        return [
            p
            for p in entry.get("peaks", [])
            if isinstance(p, dict)
            and isinstance(p.get("peakRssBytes"), int)
            and not isinstance(p["peakRssBytes"], bool)
        ]

    def stops(self, config_hash: str) -> list[str]:
        return list(self._load().get(config_hash, {}).get("stops", []))

    def record(
        self,
        config_hash: str,
        durations: dict[str, float] | None = None,
        stop_phase: str | None = None,
        build: dict[str, Any] | None = None,
        facts: dict[str, Any] | None = None,
        peak: dict[str, Any] | None = None,
    ) -> str | None:
        """Add a successful build's phase durations (and, with `build`, its date and total duration; with `facts`,
        its model's facts), or the phase a stopped build was in; with `peak`, a build's peak memory (any outcome:
        {buildId, startedAt, outcome, peakRssBytes}). The `builds`, `peaks` lists and `facts` are new; older readers
        ignore them. Never raises: history is advice. Returns why it was not recorded (a full disk, `.trtls` swapped
        for a symlink), or None."""
        try:
            self._record(config_hash, durations, stop_phase, build, facts, peak)
        except OSError as exc:
            return f"history not recorded: {exc.filename or self.path}: {exc.strerror or exc}"
        return None

    def _record(
        self,
        config_hash: str,
        durations: dict[str, float] | None,
        stop_phase: str | None,
        build: dict[str, Any] | None,
        facts: dict[str, Any] | None = None,
        peak: dict[str, Any] | None = None,
    ) -> None:
        ensure_folder(self.path.parent, within=self.root)
        with cache_lock(self.path, within=self.root):  # concurrent builds of one workspace share this file
            data = self._load()
            entry = data.setdefault(config_hash, {"phases": {}, "stops": []})
            for pid, secs in (durations or {}).items():
                entry["phases"].setdefault(pid, []).append(round(secs, 4))
                entry["phases"][pid] = entry["phases"][pid][-KEEP:]
            if build is not None:
                dated = {"buildId": build.get("buildId"), "startedAt": round(float(build["startedAt"]), 3)}
                dated["durationS"] = round(float(build["durationS"]), 3)
                builds = entry.get("builds") if isinstance(entry.get("builds"), list) else []
                entry["builds"] = (builds + [dated])[-KEEP_BUILDS:]
            if facts is not None:
                entry["facts"] = facts
            if peak is not None:
                peaks = entry.get("peaks") if isinstance(entry.get("peaks"), list) else []
                entry["peaks"] = (peaks + [peak])[-KEEP_BUILDS:]
            if stop_phase is not None:
                entry["stops"] = (entry["stops"] + [stop_phase])[-KEEP:]
            entry["lastUsed"] = round(time.time(), 3)
            _bound(data, KEEP_CONFIGS)
            self._write(data)

    def _write(self, data: dict[str, Any]) -> None:
        atomic_write_text(self.path, json.dumps(data, indent=1, sort_keys=True), kind=Kind.evidence, within=self.root)

    def prune(self, keep: int = KEEP_CONFIGS, dry_run: bool = False) -> int:
        """Drop all but the `keep` most recently used configs (`trtls gc`); how many were (or would be) dropped."""
        if not self.path.is_file():
            return 0
        with cache_lock(self.path, within=self.root):
            data = self._load()
            dropped = _bound(data, keep)
            if dropped and not dry_run:
                self._write(data)
        return dropped

    def repeated_stop_phase(self, config_hash: str, times: int = 2) -> str | None:
        """The phase the last `times` stops all happened in, if they agree."""
        stops = self.stops(config_hash)
        if len(stops) >= times and len(set(stops[-times:])) == 1:
            return stops[-1]
        return None


def _last_used(entry: dict[str, Any]) -> float:
    """When a config was last built or stopped (histories written before `lastUsed`: its newest dated build)."""
    if isinstance(entry.get("lastUsed"), (int, float)):
        return float(entry["lastUsed"])
    dated = [b.get("startedAt") for b in entry.get("builds", []) if isinstance(b, dict)]
    return max((float(t) for t in dated if isinstance(t, (int, float))), default=0.0)


def _bound(data: dict[str, Any], keep: int) -> int:
    """Keep the `keep` most recently used configs in `data` (in place); the number dropped."""
    if len(data) <= keep:
        return 0
    ranked = sorted(data, key=lambda k: _last_used(data[k]), reverse=True)
    for key in ranked[keep:]:
        del data[key]
    return len(ranked) - keep
