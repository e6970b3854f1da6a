"""A run's id names its evidence folder: whatever leads it (an engine, a route, a reference model's file name for a
divergence search) it is a plain folder name — a file stem carrying an escape sequence made a folder whose name held
it raw, and one of 245 characters a folder no filesystem takes (`trtls reduce --diverge` could not run at all)."""

from __future__ import annotations

import re

from trtls.builds.run_ids import new_run_id
from trtls.triage.diverge_pair import new_build_id as diverge_id  # the name the divergence search makes its id with

PLAIN = re.compile(r"[A-Za-z0-9_.-]+-\d{8}-\d{6}-[0-9a-f]{6}")


def test_a_run_id_is_a_plain_folder_name_whatever_leads_it() -> None:
    assert new_run_id("demo").startswith("demo-") and PLAIN.fullmatch(new_run_id("demo.cell_1"))
    hostile = new_run_id("diverge-r\x1b]0;pwn\x07\x1b[31m")
    assert PLAIN.fullmatch(hostile) and hostile.startswith("diverge-r__0_pwn___31m-"), hostile
    long = diverge_id("diverge-" + "r" * 245)
    assert PLAIN.fullmatch(long) and len(long) <= 96 + len("-20261206-000000-abcdef"), len(long)
