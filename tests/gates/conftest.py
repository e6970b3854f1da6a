"""Every route summary the gates tests wrote in this session loads as its model and writes back byte for byte
(tests/core/test_route_summary_record.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session", autouse=True)
def route_summaries_round_trip(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    yield
    from tests.core.test_route_summary_record import assert_route_summaries_round_trip

    assert_route_summaries_round_trip(tmp_path_factory.getbasetemp())
