"""The capability answer a build recorded, over its engine in the editor: a title-only code lens and the hover of the
engine's `onnx` key, in the words of `trtls report` and `trtls check --capability` (core.capability). The build is
the engine's last one — made in this editor session, or found among the recipe's recorded runs (`latest_runs`: a
build from a terminal, or from before the server started). It reads the build's evidence and never imports
TensorRT; the as-you-type answer (lsp/capability_diagnostics.py) is the same module's words on the capability
child's answer."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from trtls.builds.roots import state_root
from trtls.core.capability import capability_findings, capability_summary, recorded_capability

if TYPE_CHECKING:
    from trtls.core.summary_record import Summary

# whether an engine's model is still the one a recorded build read (lsp/recorded_runs.model_since): its sha256 now
# against the record's; `not_recorded`: the record names none (an older trtls's, or a model written while it built);
# `checking`: the model was written since it was last hashed, and is being hashed off the event loop now
ModelSince = Literal["changed", "unchanged", "not_recorded", "unreadable", "checking"]
MODEL_SINCE = {
    "changed": "_A record of that build, not re-checked now: the model changed since this build (another sha256)._",
    "unchanged": "_Model unchanged: it is the one that build read (same sha256)._",
    "not_recorded": "_Whether the model changed since this build is not known: its record names no model sha256._",
    "unreadable": "_Whether the model changed since this build is not known: the model cannot be read now._",
    "checking": "_Whether the model changed since this build is being checked: its file was written since it was last "
    "hashed, and is hashed now (hover again for the answer)._",
}
MAX_REMEMBERED = 10_000  # run folders whose record's facts are remembered (a server edits a few recipes)
# run folder → (its mtime as listed, the engine and start of an engine table's finished build, or None): a code lens
# is asked after every edit, and reading every record each time (50 runs of ~150 KB: about half a second) would hold
# the editor; a record is read again only when its folder changed (a summary is written by a rename into it)
_seen: dict[Path, tuple[float, tuple[str, float] | None]] = {}


def latest_runs(recipe: Path) -> dict[str, str]:
    """Engine → the id of its newest finished build recorded under the recipe's `.trtls/runs` (a matrix record and
    its cells are not an engine table's last build, as in the editor's own `last_build`). The listing is
    retention's (`scan_runs`): only real folders named as trtls names a run (the id returned is that folder's name,
    never a name a record holds), each summary read through the door (a regular file, never through a final link,
    bounded). A `.trtls` or `runs` that leads out of the recipe's folder is not read at all: {}."""
    from trtls.builds.supervisor.retention import scan_runs
    from trtls.core.paths import inside, real
    from trtls.report.evidence import runs_dir

    runs = runs_dir(recipe)
    try:
        if not runs.is_dir() or not inside(real(runs), real(runs.parent.parent)):
            return {}
    except OSError:
        return {}
    if len(_seen) > MAX_REMEMBERED:
        _seen.clear()
    newest: dict[str, tuple[float, str]] = {}
    try:
        listed = scan_runs(runs, read_summaries=False)
    except OSError:  # a run folder removed while it was listed (trtls gc): the next lens lists again
        return {}
    for run in listed:
        if run.running:
            continue
        known = _seen.get(run.path)
        if known is None or known[0] != run.started:  # unread, or its folder changed since
            known = _seen[run.path] = (run.started, _engine_build(run.path))
        if known[1] is not None:
            engine, started = known[1]
            newest[engine] = max(newest.get(engine, (started, run.id)), (started, run.id))
    return {engine: run_id for engine, (_, run_id) in newest.items()}


def newest_runs(session: dict[str, str], recorded: dict[str, str]) -> dict[str, str]:
    """Engine → its latest build: this editor session's (`session`) or a recorded one (`latest_runs`, maybe read
    before the session's build ended), whichever started later by its id (`<engine>-<date>-<time>-<hex>`,
    builds.supervisor.job.new_build_id); a recorded one wins a tie (a terminal's build after the session's, in
    the same second), as it wins an id that does not say when."""
    out = dict(session)
    for engine, run_id in recorded.items():
        if _id_start(out.get(engine, "")) <= _id_start(run_id):
            out[engine] = run_id
    return out


_ID_START = re.compile(r"-(\d{8}-\d{6})-[0-9a-f]{6}$")


def _id_start(run_id: str) -> str:
    found = _ID_START.search(run_id)
    return found.group(1) if found else ""


def _engine_build(run: Path) -> tuple[str, float] | None:
    """(engine, start) of the finished build of an engine table recorded in `run` (not a matrix, not a cell); None
    for any other record, or one that cannot be read or does not hold together."""
    from trtls.core.summary_record import SUMMARY_NAME, Summary, read_summary

    summary = read_summary(run / SUMMARY_NAME, within=state_root(run))  # a run folder linked out is no record
    if not isinstance(summary, Summary) or not summary.engine or summary.cell or summary.kind == "matrix":
        return None
    started = float(summary.startedAt) if summary.startedAt is not None else 0.0
    return summary.engine, started if math.isfinite(started) else 0.0  # a record's nonsense date sorts first


def recorded_answer(recipe: Path, build_id: str) -> tuple[Summary, dict[str, Any]] | None:
    """The build's record and its capability answer; None when the evidence cannot be read or recorded no answer."""
    from trtls.builds.supervisor.retention import RUN_ID
    from trtls.core.summary_record import SUMMARY_NAME, SummaryProblem, read_summary
    from trtls.report.evidence import runs_dir

    if not RUN_ID.fullmatch(build_id) or build_id.startswith("."):
        return None  # a build id is one folder name under .trtls/runs, as trtls names them
    record = runs_dir(recipe) / build_id / SUMMARY_NAME
    summary = read_summary(record, within=state_root(record))
    if isinstance(summary, SummaryProblem):
        return None
    answer = recorded_capability(summary)
    if answer.get("status") == "not_checked":
        return None
    return summary, answer


def capability_lens_title(recipe: Path, build_id: str) -> str | None:
    """`capability · <verdict>` of the build's `summary.json`; None when the evidence cannot be read or recorded no
    answer (a lens that says nothing was measured is not worth its line: the report says it)."""
    found = recorded_answer(recipe, build_id)
    return f"capability · {capability_summary(found[1])}" if found is not None else None


_MARKDOWN = re.compile(r"([\\`*_\[\]<>#|~])")


def _md(text: str) -> str:
    """Words from a record (a node's name, the parser's reason) as literal Markdown text: they are the model's and
    TensorRT's, never markup of ours."""
    from trtls.core.terminal_text import terminal_safe

    return _MARKDOWN.sub(r"\\\1", terminal_safe(text, keep_newlines=False))


def capability_hover_text(recipe: Path, engine: str, build_id: str, since: ModelSince | None) -> str | None:
    """What TensorRT's parser (and builder) said of the engine's model at its build `build_id`, for the hover of the
    `onnx` key (`capability_hover`'s words); None when the evidence cannot be read or recorded no answer."""
    found = recorded_answer(recipe, build_id)
    return capability_hover(engine, build_id, *found, since) if found is not None else None


def capability_hover(
    engine: str, build_id: str, summary: Summary, answer: dict[str, Any], since: ModelSince | None
) -> str:
    """The verdict of the lens, then each refused node or the builder's refusal in the words of the diagnostics (op
    type, node name, the parser's reason), dated. `since` (lsp/recorded_runs.model_since; None: not compared) says
    whether this is a record of another model: never re-checked here, and nothing is said of freshness that was not
    compared."""
    from trtls.core.display import ago

    started = summary.startedAt
    date = _local_time(started)
    verdict = _md(capability_summary(answer))
    parts = [f"**What TensorRT said at the build of {date}** ({ago(started)}, `{build_id}`): {verdict}"]
    said = [f"- {_md(finding.message)}" for finding in capability_findings(engine, answer)]
    if said:
        parts.append("\n".join(said))
    if since is not None:
        parts.append(MODEL_SINCE[since])
    return "\n\n".join(parts)


def _local_time(epoch: float | None) -> str:
    """`2026-12-03 10:40:15` (local time, as the report dates a build); `an unknown time` for none or nonsense."""
    from trtls.core.display import local_time

    return local_time(epoch, unknown="an unknown time")
