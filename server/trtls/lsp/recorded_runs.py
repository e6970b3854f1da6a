"""A build this server did not start that the editor shows all the same: the latest recorded run of an engine of an
open recipe (report/capability_lens.latest_runs), whose Evidence lens names it after a `trtls build` in a terminal
or a server restart. trtls.showEvidence and trtls.buildReport answer it from its evidence as they answer a reuse
(a finished RestoredRun); it is not registered, so trtls.listBuilds still lists only this server's runs, and an id
the registry forgot that no lens shows stays unknown."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trtls.builds.supervisor.runs import RestoredRun
    from trtls.lsp.language_server import TrtlsServer


def recorded_build(ls: TrtlsServer, run_id: str) -> RestoredRun | None:
    """The finished build `run_id` when it is the latest recorded build of an engine of a recipe open here (the id is
    a run folder's name, found by listing, never a path taken from the client), its record read through the door and
    naming that very id; None otherwise."""
    from trtls.builds.supervisor.runs import RestoredRun
    from trtls.core.summary_record import SUMMARY_NAME, Summary, read_summary
    from trtls.report.capability_lens import latest_runs
    from trtls.report.evidence import runs_dir

    for loaded in list(ls.recipes.values()):
        if run_id not in latest_runs(loaded.path).values():
            continue
        summary = read_summary(runs_dir(loaded.path) / run_id / SUMMARY_NAME)
        if isinstance(summary, Summary) and summary.buildId == run_id:
            return RestoredRun(summary, loaded.path)
    return None
