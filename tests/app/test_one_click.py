"""One click on Build Engine, over the real server on stdio, counted inside the server process
(tests/app/counted_trtls.py): the recipe is checked once and the worker's job is built once — from the command to
its reply and through the build's end (issue 28: the click used to check the recipe three times and build the job
twice)."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.lsp.conftest import accept_refresh, caps
from tests.lsp.lsp_helpers import execute, open_recipe, plain, until

COUNT_FILE = Path(tempfile.mkdtemp(prefix="trtls-one-click-")) / "counts"
atexit.register(shutil.rmtree, COUNT_FILE.parent, True)  # made at import (collection too): gone with the process
SERVER = [sys.executable, str(Path(__file__).with_name("counted_trtls.py")), "serve"]
ENV = {**os.environ, "TRTLS_TEST_COUNT_FILE": str(COUNT_FILE)}


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=ENV))
async def client(lsp_client: LanguageClient):
    accept_refresh(lsp_client)
    await lsp_client.initialize_session(
        lsp.InitializeParams(capabilities=caps(), initialization_options={"buildTree": True})
    )
    yield
    await lsp_client.shutdown_session()


def counted() -> list[str]:
    return COUNT_FILE.read_text().splitlines() if COUNT_FILE.exists() else []


def checks(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("check ")]


def build_jobs(lines: list[str]) -> list[str]:
    """The jobs built for the build: not the store's hints, which ask of every engine whether it is up to date
    (`job freshness`, one per engine, on the recipe already checked)."""
    return [line for line in lines if line.startswith("job ") and not line.startswith("job freshness ")]


async def test_one_click_checks_the_recipe_once_and_builds_the_job_once(
    client: LanguageClient, workspace: Path
) -> None:
    trees: list[dict[str, Any]] = []
    client.feature("trtls/buildTree")(lambda params: trees.append(plain(params)))
    uri = open_recipe(client, workspace)
    await until(lambda: len([line for line in counted() if line.startswith("job freshness ")]) == 2)  # didOpen's
    before = len(counted())

    reply = await execute(client, "trtls.buildEngine", {"uri": uri, "engine": "demo"})
    assert reply["status"] == "started", reply
    at_reply = counted()[before:]
    assert len(checks(at_reply)) == 1, at_reply
    assert [line.split()[1] for line in build_jobs(at_reply)] == [reply["buildId"]], at_reply  # keyed and built

    await until(lambda: any(t.get("buildId") == reply["buildId"] and not t["running"] for t in trees), timeout=600)
    # the build's end: its findings, then the store's hints computed again (one freshness job per engine)
    await until(lambda: len([line for line in counted()[before:] if line.startswith("job freshness ")]) == 2)
    listed = await execute(client, "trtls.listBuilds", {})
    assert [b["status"] for b in listed["builds"] if b["buildId"] == reply["buildId"]] == ["built"]
    click = counted()[before:]
    assert len(checks(click)) == 1, click
    assert len(build_jobs(click)) == 1, click


def test_trtls_build_checks_the_recipe_once_and_builds_the_job_once(workspace: Path) -> None:
    """The terminal's face of the same request: one check (before the worker's job), one job, keyed and then built."""
    count_file = COUNT_FILE.with_name("cli-counts")
    cmd = [
        sys.executable,
        str(Path(__file__).with_name("counted_trtls.py")),
        "build",
        str(workspace),
        "--engine",
        "demo",
    ]
    env = {**ENV, "TRTLS_TEST_COUNT_FILE": str(count_file)}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    lines = count_file.read_text().splitlines()
    assert len(checks(lines)) == 1, lines
    (job,) = build_jobs(lines)
    build_id = json.loads(next((workspace / ".trtls" / "runs").glob("*/summary.json")).read_text())["buildId"]
    assert job.split()[1] == build_id, lines
