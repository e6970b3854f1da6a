"""`stop_run`: a stop asked of a run by id (the editor's Stop, `trtls.cancelBuild`), and what it cut — the run
itself, only the upload of a built engine to the remote store, or nothing.

Once a build has its outcome a stop no longer stops it (`Build.cancel`), but its end may still be sending the engine
to the remote store (builds/supervisor/build_end.py awaits the store's publish, builds/avoidance/lookup.attach), and
the same stop cuts that upload (`Build.stop_end_with`: the store's cancel state). Asking `running` first, as the
editor did, answered "not running" and cut nothing while the upload went on to its bound; a matrix's stop cut its
cells' uploads but answered "not accepted" when no cell was waiting. What a stop cuts is read here, from the build's
state before the stop is applied (`Build.upload_a_stop_cuts`), and the stop goes through the run's own `cancel`, the one
mechanism the terminal's Ctrl-C uses too."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from trtls.core.terminal_text import terminal_safe

if TYPE_CHECKING:
    from trtls.builds.supervisor.build import Build
    from trtls.builds.supervisor.runs import Run

# what a stop cut: the run itself (a running build, a matrix's running or waiting cells, a gates run, a triage run);
# only the upload of a built engine to the remote store (the build stands); nothing (it had ended, or was stopping)
StopCut = Literal["run", "upload", "nothing"]


def upload_cut_text(whose: str, remotes: str, many: bool = False) -> str:
    """The upload a stop cuts, as every face says it: `the upload of its engine to the remote store <url> (the engine
    stays)`; `many`: `their engines … (the engines stay)`. `whose`: `its`, `their`, `demo/o1's`."""
    engines, stay = ("engines", "the engines stay") if many else ("engine", "the engine stays")
    return f"the upload of {whose} {engines} to the remote store {remotes} ({stay})"


@dataclass(frozen=True)
class UploadCut:
    """The upload of `name`'s engine (an engine, or `engine/cell`) to the remote store `remote` (as shown)."""

    name: str
    remote: str

    def text(self, whose: str | None = None) -> str:
        """`the upload of demo/o1's engine to …`; `whose`: the owner's word instead of the name (`its`)."""
        return upload_cut_text(whose or f"{self.name}'s", self.remote)


@dataclass(frozen=True)
class StopAnswer:
    """What a stop of the run `name` cut: `cut`, and the uploads it cut; `status` and `running`: the run's after the
    stop."""

    name: str
    cut: StopCut
    status: str
    running: bool
    uploads: tuple[UploadCut, ...] = ()

    @property
    def accepted(self) -> bool:
        """The stop cut something now."""
        return self.cut != "nothing"

    @property
    def text(self) -> str:
        """The sentence a face shows: `stopping demo`, `demo is built already; stopping the upload of …`, `nothing
        left to stop: demo has ended (built)`."""
        uploads = "; ".join(u.text() for u in self.uploads)
        if self.cut == "run":
            return f"stopping {self.name}" + (f"; stopping {uploads}" if uploads else "")
        if self.cut == "upload":
            if [u.name for u in self.uploads] == [self.name]:  # a build's own: as the terminal says it
                return f"{self.name} is built already; stopping {self.uploads[0].text('its')}"
            return f"{self.name}: stopping {uploads}"
        if self.running:
            return f"{self.name} is stopping already"
        return f"nothing left to stop: {self.name} has ended ({self.status})"


def run_name(build: Build) -> str:
    """A build as a stop's answer names it: its engine, or `engine/cell` for a matrix's cell."""
    return terminal_safe(f"{build.engine}/{build.cell}" if build.cell else build.engine, keep_newlines=False)


def stop_run(run: Run, source: str) -> StopAnswer:
    """Stop `run` (any kind the run registry holds) from `source`, and say what the stop cut. A build, or a matrix's
    cells, whose end still sends the engine to the remote store have that upload cut (the engine and its local store
    entry stand; the evidence says the upload was stopped)."""
    from trtls.builds.supervisor.build import Build
    from trtls.builds.supervisor.matrix import MatrixBuild

    builds = run.cells if isinstance(run, MatrixBuild) else [run] if isinstance(run, Build) else []
    uploads = tuple(UploadCut(run_name(b), url) for b in builds if (url := b.upload_a_stop_cuts()) is not None)
    stopped = (run.running or bool(uploads)) and run.cancel(source)  # a build's cancel cuts its end's upload too
    cut: StopCut = "run" if stopped else "upload" if uploads else "nothing"
    if isinstance(run, Build):
        name = run_name(run)
    else:  # a matrix by its title; another kind of run by its id
        name = terminal_safe(run.title if isinstance(run, MatrixBuild) else run.id, keep_newlines=False)
    return StopAnswer(name, cut, run.status, run.running, uploads)
