"""The acceptance run's scratch folder: every write of the run stays inside it (`trtls accept --scratch`)."""

from __future__ import annotations

from pathlib import Path

from trtls.core.paths import inside, real
from trtls.fs import scratch_dir


class AcceptError(Exception):
    """Bad input: the recipe, the engine or the scenario list (exit 2)."""


def scratch_for(folder: Path, parent: Path | None) -> Path:
    """The run's scratch folder, made in `parent` (`--scratch`; the system's temp folder when None). A parent inside
    the recipe's folder is refused before anything is made: the template copies the recipe's folder, so it would copy
    its own copy into itself, level after level, until the names were too long."""
    if parent is not None and inside(real(parent), real(folder)):
        raise AcceptError(
            f"--scratch {parent} is inside the recipe folder {folder}, which the run copies: choose another"
        )
    try:
        return scratch_dir(prefix="trtls-accept-", parent=parent)
    except OSError as exc:  # missing, not a folder, not writable: said, never a traceback
        raise AcceptError(f"--scratch {parent}: {exc.strerror or exc}") from None
