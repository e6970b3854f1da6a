"""The same mistake reads the same in every face: a request naming an engine the recipe has no table of is TRT107, a
matrix cell no matrix has is TRT177 — in `trtls build` (exit 2, a JSON error line) and over the real language server
(invalid params whose message and `data.code` carry the code), because both ask trtls.app and render its refusal."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.lsp.conftest import SERVER, accept_refresh, caps
from tests.lsp.lsp_helpers import execute, open_recipe

MATRIX = """
[engines.demo.matrix]
output = "build/demo-{optimization_level}.engine"
optimization_level = [0, 1]
"""

MISTAKES = [  # (what the CLI is given, the editor's command and argument, the code both must say)
    (["--engine", "nope"], "trtls.buildEngine", {"engine": "nope"}, "TRT107"),
    (["--matrix", "--engine", "nope"], "trtls.buildMatrix", {"engine": "nope", "matrix": True}, "TRT107"),
    (["--engine", "demo", "--cell", "o9"], "trtls.buildMatrix", {"engine": "demo", "cell": "o9"}, "TRT177"),
]


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient):
    accept_refresh(lsp_client)
    await lsp_client.initialize_session(lsp.InitializeParams(capabilities=caps()))
    yield
    await lsp_client.shutdown_session()


def cli_codes(ws: Path, *args: str) -> tuple[int, list[str]]:
    r = subprocess.run(
        [sys.executable, "-m", "trtls", "build", str(ws), "--json", *args], capture_output=True, text=True, timeout=300
    )
    lines = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    return r.returncode, [rec["code"] for rec in lines if rec.get("type") == "error"]


@pytest.mark.parametrize(("cli_args", "command", "arg", "code"), MISTAKES)
async def test_the_same_mistake_gives_the_same_code_in_the_terminal_and_the_editor(
    client: LanguageClient, workspace: Path, cli_args: list[str], command: str, arg: dict[str, object], code: str
) -> None:
    (workspace / "trtls.toml").write_text((workspace / "trtls.toml").read_text() + MATRIX)
    assert cli_codes(workspace, *cli_args) == (2, [code])

    uri = open_recipe(client, workspace)
    with pytest.raises(JsonRpcInvalidParams) as refused:
        await execute(client, command, {"uri": uri, **arg})
    assert refused.value.message.startswith(f"{code} "), refused.value.message
    assert refused.value.data["code"] == code
    assert not (workspace / ".trtls" / "runs").exists() or not any((workspace / ".trtls" / "runs").iterdir())


async def test_a_rollback_of_an_unknown_engine_reads_the_same_in_both_faces(
    client: LanguageClient, workspace: Path
) -> None:
    """`trtls rollback` and `trtls.rollbackEngine` both ask trtls.app.rollback: TRT107, exit 2 / invalid params (the
    editor used to answer a bare "no engine 'nope' in a valid recipe" with no code)."""
    r = subprocess.run(
        [sys.executable, "-m", "trtls", "rollback", "nope", str(workspace)], capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 2 and "TRT107 no engine named nope" in r.stderr, r.stderr
    uri = open_recipe(client, workspace)
    with pytest.raises(JsonRpcInvalidParams) as refused:
        await execute(client, "trtls.rollbackEngine", {"uri": uri, "engine": "nope"})
    assert refused.value.message.startswith("TRT107 no engine named nope"), refused.value.message
    assert refused.value.data["code"] == "TRT107"


TRIAGE_MISTAKES = [  # (what `trtls reduce` is given, the editor's command and argument, the code both must say)
    (["--engine", "nope"], "trtls.reduceEngine", {"engine": "nope"}, "TRT107"),
    (
        ["--engine", "demo", "--fail-regex", "K exceeds ("],
        "trtls.reduceEngine",
        {"engine": "demo", "failRegex": ["K exceeds ("]},
        "TRT102",
    ),
    (["--engine", "nope", "--diverge"], "trtls.findDivergence", {"engine": "nope"}, "TRT107"),
]


@pytest.mark.parametrize(("cli_args", "command", "arg", "code"), TRIAGE_MISTAKES)
async def test_a_triage_request_reads_the_same_in_both_faces(
    client: LanguageClient, workspace: Path, cli_args: list[str], command: str, arg: dict[str, object], code: str
) -> None:
    """`trtls reduce` and the editor's Reduce / Find Divergence both ask trtls.app.triage: an unknown engine is TRT107
    and a failure pattern that does not compile TRT102 (the recipe's own `fail_regex` reads so), exit 2 / invalid
    params with the code (the editor used to answer "no buildable engine 'nope'" and a pydantic message, no code)."""
    r = subprocess.run(
        [sys.executable, "-m", "trtls", "reduce", str(workspace), "--json", *cli_args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    errors = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert (r.returncode, [e["code"] for e in errors if e.get("type") == "error"]) == (2, [code]), r.stderr
    uri = open_recipe(client, workspace)
    with pytest.raises(JsonRpcInvalidParams) as refused:
        await execute(client, command, {"uri": uri, **arg})
    assert refused.value.message.startswith(f"{code} "), refused.value.message
    assert refused.value.data["code"] == code
    assert refused.value.message == f"{code} {errors[0]['message']}"  # word for word what the terminal said
    assert not (workspace / ".trtls" / "reduce").exists()
