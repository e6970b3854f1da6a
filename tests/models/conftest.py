"""Fixtures for model-support tests: the generated sample models (samples/models), copied per test."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

MODELS_SAMPLE = REPO / "samples" / "models"


@pytest.fixture(scope="session")
def sample_models() -> Path:
    """The sample's generated ONNX models, written once per session by the sample's own script."""
    subprocess.run([sys.executable, str(MODELS_SAMPLE / "make_models.py")], check=True, capture_output=True)
    return MODELS_SAMPLE / "models"


@pytest.fixture
def models_ws(tmp_path: Path, sample_models: Path) -> Path:
    """A throwaway copy of samples/models (models included)."""
    ws = tmp_path / "models-ws"
    shutil.copytree(MODELS_SAMPLE, ws, ignore=shutil.ignore_patterns(".trtls", "build"))
    return ws
