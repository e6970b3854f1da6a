"""One real supported sample (the route sample's ONNX Runtime route) per session; each test copies it."""

from __future__ import annotations

from pathlib import Path

import pytest
from _lifecycle_sample import ROUTE, copy, supported_sample, trtls


@pytest.fixture(scope="session")
def prepared(tmp_path_factory) -> Path:
    return supported_sample(tmp_path_factory.mktemp("lifecycle") / "route")


@pytest.fixture
def promoted(prepared, tmp_path) -> Path:
    """A copy of the supported sample with its route promoted (a ledger, a pointer and a rollback artifact)."""
    root = copy(prepared, tmp_path / "route")
    r = trtls("route", "promote", "--route", ROUTE, "--approver", "ci@example.com", cwd=root)
    assert r.returncode == 0, r.stdout + r.stderr
    return root
