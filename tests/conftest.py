"""Shared test helpers. Real TensorRT-RTX builds, real processes; nothing here fakes the builder."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# The engine store (docs/store.md) would serve one test's engine to the next (same model, same settings: same key)
# and write into the user's cache: tests that want it name a store in their recipe (tests/store/).
os.environ["TRTLS_STORE"] = "off"

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"
QUICKSTART = REPO / "samples" / "quickstart"
MODELS_SAMPLE = REPO / "samples" / "models"


@pytest.fixture(scope="session")
def quickstart_models() -> Path:
    """The quickstart ONNX models, generated once per session by the sample's own script."""
    subprocess.run([sys.executable, str(QUICKSTART / "make_models.py")], check=True, capture_output=True)
    return QUICKSTART / "models"


@pytest.fixture
def workspace(tmp_path: Path, quickstart_models: Path) -> Path:
    """A throwaway copy of the quickstart sample (models included), so tests never touch the repo."""
    ws = tmp_path / "ws"
    shutil.copytree(QUICKSTART, ws, ignore=shutil.ignore_patterns(".trtls", "build"))
    return ws


@pytest.fixture(scope="session")
def sample_models() -> Path:
    """samples/models' generated ONNX models (two-input encoder, detector, int64, external data), written once
    per session by the sample's own script."""
    subprocess.run([sys.executable, str(MODELS_SAMPLE / "make_models.py")], check=True, capture_output=True)
    return MODELS_SAMPLE / "models"


@pytest.fixture
def models_ws(tmp_path: Path, sample_models: Path) -> Path:
    """A throwaway copy of samples/models (models included)."""
    ws = tmp_path / "models-ws"
    shutil.copytree(MODELS_SAMPLE, ws, ignore=shutil.ignore_patterns(".trtls", "build"))
    return ws
