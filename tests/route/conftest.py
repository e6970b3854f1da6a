"""One real supported sample (the route sample's ONNX Runtime route) per session; each test copies it."""

from __future__ import annotations

from pathlib import Path

import pytest
from _lifecycle_sample import supported_sample


@pytest.fixture(scope="session")
def prepared(tmp_path_factory) -> Path:
    return supported_sample(tmp_path_factory.mktemp("lifecycle") / "route")
