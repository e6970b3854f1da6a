"""The peak memory of an engine's builds, before its next build: "last build peaked at 412.3 MiB (worker RSS; failed,
3 min ago)" in the hover of the engine's table and of its memory keys (`builder.memory_pool_limits.*`,
`max_aux_streams`, `max_num_tactics`), in the words of core.display.peak_memory_text.

The build is the engine's latest recorded run (`latest_runs`, any outcome); its record names its buildConfigHash,
and the history (`.trtls/history.json`, builds/supervisor/history.py) holds the peaks of every build of that config.
Read in a thread by the server (lsp/hover.memory_hover): the history may be large."""

from __future__ import annotations

from pathlib import Path

from trtls.builds.roots import state_root
from trtls.core.display import peak_memory_text

MEMORY_KEYS = ("memory_pool_limits", "max_aux_streams", "max_num_tactics")


def is_memory_path(path: tuple) -> bool:
    """The engine's table, or one of its builder keys that change how much memory a build takes."""
    if len(path) < 2 or path[0] != "engines":
        return False
    return len(path) == 2 or (len(path) >= 4 and path[2] == "builder" and path[3] in MEMORY_KEYS)


def recorded_peak_text(recipe: Path, build_id: str) -> str | None:
    """`peak_memory_text` of the peaks of the config `build_id` built; None when its record or the history names
    none."""
    from trtls.builds.supervisor.history import History
    from trtls.builds.supervisor.retention import RUN_ID
    from trtls.core.summary_record import SUMMARY_NAME, SummaryProblem, read_summary
    from trtls.report.evidence import runs_dir

    if not RUN_ID.fullmatch(build_id) or build_id.startswith("."):
        return None  # a build id is one folder name under .trtls/runs, as trtls names them
    record = runs_dir(recipe) / build_id / SUMMARY_NAME
    summary = read_summary(record, within=state_root(record))
    if isinstance(summary, SummaryProblem) or not summary.buildConfigHash:
        return None
    return peak_memory_text(History(runs_dir(recipe).parent / "history.json").peaks(summary.buildConfigHash))
