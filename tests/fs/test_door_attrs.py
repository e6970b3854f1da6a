"""Issue 27: the immutable flag the acceptance run sets on a scratch output folder goes through the door
(`fs.attrs.set_immutable`, the ioctl chattr uses, on an O_NOFOLLOW descriptor) — it used to run `chattr` on a path,
outside the door, where a name swapped for a symlink changed whatever the link named."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trtls.core.paths import UnsafeWrite
from trtls.fs import Kind
from trtls.fs.attrs import set_immutable


def test_a_symlink_is_refused_and_what_it_names_keeps_its_flags(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "out").symlink_to(outside)
    with pytest.raises(UnsafeWrite, match="is a symlink"):
        set_immutable(scratch / "out", True, kind=Kind.scratch, within=scratch)
    (outside / "still-writable").write_text("x")  # the folder the link names was not made immutable
    with pytest.raises(UnsafeWrite):  # a folder outside `within` is never reached
        set_immutable(outside, True, kind=Kind.scratch, within=scratch)


def test_the_flag_holds_for_root_and_is_cleared(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    if not set_immutable(folder, True, kind=Kind.scratch, within=tmp_path):
        pytest.skip("this account or file system cannot set the immutable flag (not root, tmpfs, overlay)")
    try:
        with pytest.raises(PermissionError):
            (folder / "new").write_text("x")  # refused even for root: what the scenario needs
    finally:
        assert set_immutable(folder, False, kind=Kind.scratch, within=tmp_path)
    (folder / "new").write_text("x")
    assert os.path.isfile(folder / "new")
