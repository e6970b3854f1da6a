"""The door's read with `within` holds when a folder on the way is swapped for a link out between its check and its
open (found by the 20,000-state run of 2026-12-04: `.trtls` swapped as `route promote` opened its gates record, which
then read as "no complete gates run" — and would have read the outside file had the twin held one). The swap is
made for real, at the very `open` the door makes (an audit hook: the same clock the hostile run uses)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from trtls.core.paths import UnsafeWrite
from trtls.fs import read_bytes

_swap: dict[str, str] = {}


def _hook(event: str, args: tuple) -> None:
    if event == "open" and _swap and args and isinstance(args[0], str | Path) and str(args[0]) == _swap["at"]:
        folder, twin = _swap.pop("folder"), _swap.pop("twin")
        _swap.clear()
        os.rename(folder, folder + ".aside")
        os.symlink(twin, folder)


sys.addaudithook(_hook)


@pytest.mark.parametrize("twin_holds_the_file", [True, False])
def test_a_folder_swapped_for_a_link_out_as_the_record_is_opened_is_refused(
    tmp_path: Path, twin_holds_the_file: bool
) -> None:
    project, outside = tmp_path / "project", tmp_path / "outside"
    record = project / ".trtls" / "routes" / "r" / "complete-summary.json"
    record.parent.mkdir(parents=True)
    record.write_text('{"decision": "supported", "here": true}')
    twin = outside / "twin-trtls"
    (twin / "routes" / "r").mkdir(parents=True)
    if twin_holds_the_file:
        (twin / "routes" / "r" / "complete-summary.json").write_text('{"decision": "supported", "outside": true}')
    _swap.update(at=str(record), folder=str(project / ".trtls"), twin=str(twin))

    with pytest.raises(UnsafeWrite) as refused:
        read_bytes(record, limit=1 << 20, within=project)
    assert not _swap, "the swap was made at the door's open"
    assert "leads out of" in str(refused.value) and str(project.resolve()) in str(refused.value)


def test_a_read_inside_is_still_a_read() -> None:
    here = Path(__file__)
    assert read_bytes(here, limit=1 << 20, within=here.parent) == here.read_bytes()
