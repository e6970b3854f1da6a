"""One real supported sample (the route sample's ONNX Runtime route) per session; each test copies it."""

from __future__ import annotations

from collections.abc import Iterator
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


@pytest.fixture(scope="session", autouse=True)
def route_summaries_round_trip(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every route summary the route tests wrote in this session loads as its model and writes back byte for byte
    (tests/core/test_route_summary_record.py)."""
    yield
    from tests.core.test_route_summary_record import assert_route_summaries_round_trip

    assert_route_summaries_round_trip(tmp_path_factory.getbasetemp())
