"""Every reply and notification the real server sends over its real stdio is its model in trtls.core.wire: each of the
16 commands, driven here, answers JSON that validates as its declared reply (extra="forbid": a field the protocol
does not declare fails) and that is exactly what the model dumps (every declared field sent, none hand-made); every
`trtls/buildTree` and every `$/progress` end of the session likewise. The runs of every kind are listed, shown and
reported by one rule per kind (lsp/run_kinds.py): a reduction's and a divergence search's evidence is the record they
wrote (result.json, divergence.json), and trtls.buildReport on one answers a located -32602, not an EvidenceError."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from trtls.core import wire

from .raw_stdio import RawServer

DEMO_MATRIX = (
    '\n[engines.demo.matrix]\noutput = "build/demo-{optimization_level}.engine"\noptimization_level = [0, 1]\n'
)
SMEM = "[engines.demo.builder]\noptimization_level = 3\n"
ROUTE = Path(__file__).resolve().parents[2] / "samples" / "route"

BUILDS = {"trtls.listTargets", "trtls.buildEngine", "trtls.buildMatrix", "trtls.cancelBuild", "trtls.listBuilds",
          "trtls.showEvidence", "trtls.buildReport", "trtls.rollbackEngine", "trtls.printDebugInformation"}  # fmt: skip
GATES = {"trtls.runGates", "trtls.allowLicense", "trtls.lockRoute", "trtls.listBuilds", "trtls.showEvidence"}
TRIAGE = {"trtls.buildEngine", "trtls.reduceEngine", "trtls.buildMinimal", "trtls.showDocument", "trtls.findDivergence",
          "trtls.listBuilds", "trtls.showEvidence"}  # fmt: skip


class Session:
    """A bare client on the server's stdio that checks every reply against its model as it comes, answers the
    server's own requests (a confirmation, an edit, a document to show) as an editor would, and at the end checks
    every notification the server sent."""

    def __init__(self, folders: list[Path]) -> None:
        self.srv = RawServer(cwd=folders[0])
        self.ids = (f"wire-{n}" for n in itertools.count())
        self.seen: set[str] = set()
        self.answered: set[Any] = set()
        params = {
            "processId": None,
            "rootUri": folders[0].as_uri(),
            "workspaceFolders": [{"uri": f.as_uri(), "name": f.name} for f in folders],
            "capabilities": {"window": {"workDoneProgress": True, "showDocument": {"support": True}},
                             "workspace": {"applyEdit": True, "codeLens": {"refreshSupport": True}}},
            "initializationOptions": {"buildTree": True},
        }  # fmt: skip
        assert "result" in self.srv.request("initialize", params)
        self.srv.notify("initialized", {})

    def open(self, recipe: Path, text: str | None = None) -> str:
        uri = recipe.as_uri()
        item = {"uri": uri, "languageId": "toml", "version": 1, "text": recipe.read_text() if text is None else text}
        self.srv.notify("textDocument/didOpen", {"textDocument": item})
        return uri

    def call(self, command: str, arg: dict[str, Any], answers: dict[str, Any] | None = None) -> dict[str, Any]:
        """The whole response to one command (result or error); the server's requests meanwhile answered."""
        answers = answers or {}
        rid = next(self.ids)
        self.srv.send({"id": rid, "method": "workspace/executeCommand",
                       "params": {"command": command, "arguments": [arg]}})  # fmt: skip
        while True:
            m = self.srv.wait_for(
                lambda m: (
                    (m.get("id") == rid and "method" not in m)
                    or (m.get("method") in answers and m.get("id") not in self.answered)
                ),
                timeout=600,
            )
            if "method" not in m:
                return m
            self.answered.add(m["id"])
            self.srv.send({"id": m["id"], "result": answers[m["method"]]})

    def command(self, command: str, arg: dict[str, Any], answers: dict[str, Any] | None = None) -> dict[str, Any]:
        """The reply, checked: it validates as the command's declared reply, and it is that model's JSON."""
        response = self.call(command, arg, answers)
        assert "result" in response, (command, response)
        reply = response["result"]
        model = wire.COMMAND_REPLIES[command].model_validate(reply)
        assert wire.to_wire(model) == reply, f"{command}: not the model's JSON"
        self.seen.add(command)
        return dict(reply)

    def refused(self, command: str, arg: dict[str, Any]) -> str:
        """A command answered with a located -32602 (invalid params), never -32603 (a handler's exception)."""
        response = self.call(command, arg)
        assert "error" in response, response
        assert response["error"]["code"] == -32602, response["error"]
        return str(response["error"]["message"])

    def trees(self, build_id: str | None = None) -> list[dict[str, Any]]:
        return [m["params"] for m in list(self.srv.messages) if m.get("method") == wire.BUILD_TREE
                and (build_id is None or m["params"]["buildId"] == build_id)]  # fmt: skip

    def finished(self, build_id: str) -> dict[str, Any]:
        """The build's last tree, once it says the build ended with its evidence written."""
        done = lambda m: (  # noqa: E731
            m.get("method") == wire.BUILD_TREE and m["params"]["buildId"] == build_id
            and m["params"]["running"] is False and m["params"]["evidencePath"] is not None
        )  # fmt: skip
        self.srv.wait_for(done, timeout=600)
        return self.trees(build_id)[-1]

    def change(self, uri: str, text: str) -> None:
        change = {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": text}]}
        self.srv.notify("textDocument/didChange", change)

    def run_row(self, run_id: str) -> dict[str, Any]:
        """The run's trtls.listBuilds row, once the run is over (asked again until then)."""
        deadline = time.monotonic() + 600
        while True:
            rows = [r for r in self.command("trtls.listBuilds", {})["builds"] if r["buildId"] == run_id]
            assert len(rows) == 1, rows
            if rows[0]["status"] not in ("starting", "running", "stopping"):
                return rows[0]
            assert time.monotonic() < deadline, f"{run_id} still running"
            time.sleep(0.2)

    def check_notifications(self) -> int:
        """Every `trtls/buildTree` and `$/progress` end of the session is its model's JSON. Returns how many."""
        sent = 0
        for m in list(self.srv.messages):
            if m.get("method") == wire.BUILD_TREE:
                params = m["params"]
                model: Any = wire.MatrixTree if params.get("kind") == "matrix" else wire.BuildTree
            elif m.get("method") == "$/progress" and m["params"]["value"].get("kind") == "end":
                params, model = m["params"]["value"], wire.ProgressEnd
            else:
                continue
            assert wire.to_wire(model.model_validate(params)) == params, m
            sent += 1
        return sent

    def close(self) -> None:
        self.srv.close()
        assert b"Traceback" not in self.srv.stderr, self.srv.stderr.decode(errors="replace")[-3000:]


@pytest.fixture
def sessions():
    opened: list[Session] = []

    def start(*folders: Path) -> Session:
        opened.append(Session(list(folders)))
        return opened[-1]

    yield start
    for s in opened:
        s.srv.close()


def test_the_commands_exercised_here_are_all_the_declared_ones() -> None:
    assert BUILDS | GATES | TRIAGE == set(wire.COMMAND_REPLIES)


def test_every_kind_of_run_has_one_rule_and_the_wire_declares_each() -> None:
    """The registry's kinds, the wire's and the table that decides each kind's row, evidence and report are one set."""
    from typing import get_args

    from trtls.builds.supervisor.runs import RunKind
    from trtls.lsp.run_kinds import KINDS

    assert set(KINDS) == set(get_args(RunKind)) == set(get_args(wire.RunKind))
    assert {k for k, rule in KINDS.items() if rule.page is not None} == {"build", "matrix"}


def test_build_replies_and_trees_are_their_models(sessions: Any, workspace: Path, tmp_path: Path) -> None:
    """Build, reuse from the store, matrix, matrix reused, roll back; a store that cannot be used; a bad recipe."""
    recipe = workspace / "trtls.toml"
    store = tmp_path / "store"
    recipe.write_text(recipe.read_text() + DEMO_MATRIX + f'\n[store]\npath = "{store}"\nmode = "read_write"\n')
    unusable = tmp_path / "unusable"  # a recipe whose store the recipe check passes and the build's lookup refuses
    shutil.copytree(workspace, unusable, ignore=shutil.ignore_patterns(".trtls", "build"))
    (unusable / "trtls.toml").write_text(recipe.read_text().replace(str(store), str(tmp_path / "store2")))
    s = sessions(workspace, unusable)
    uri = s.open(recipe)

    assert s.command("trtls.listTargets", {"uri": uri}) == {"engines": ["demo", "large"], "routes": []}
    first = s.command("trtls.buildEngine", {"uri": uri, "engine": "demo"})
    assert first["status"] == "started" and first["errors"] == [] and first["reusedFrom"] is None
    assert s.finished(first["buildId"])["outcome"] == "built"
    reused = s.command("trtls.buildEngine", {"uri": uri, "engine": "demo"})
    assert reused["status"] == "reused" and reused["reusedFrom"]["buildId"] == first["buildId"]
    assert s.finished(reused["buildId"])["outcome"] == "reused"
    assert s.command("trtls.cancelBuild", {"buildId": first["buildId"]})["accepted"] is False

    matrix = s.command("trtls.buildMatrix", {"uri": uri, "engine": "demo", "matrix": True})
    assert matrix["status"] == "started" and len(matrix["cells"]) == 2
    final = s.finished(matrix["buildId"])
    assert final["kind"] == "matrix" and final["outcome"] == "built" and len(final["cells"]) == 2
    assert s.command("trtls.buildMatrix", {"uri": uri, "engine": "demo", "matrix": True})["status"] == "reused"

    rows = {r["buildId"]: r for r in s.command("trtls.listBuilds", {})["builds"]}
    for run_id, kind in ((first["buildId"], "build"), (reused["buildId"], "build"), (matrix["buildId"], "matrix")):
        assert rows[run_id]["kind"] == kind and rows[run_id]["hasReport"] is True, rows[run_id]
        shown = s.command("trtls.showEvidence", {"buildId": run_id})
        assert shown["kind"] == kind and shown["path"] == rows[run_id]["evidencePath"]
        assert Path(shown["path"]).name == "summary.json" and Path(shown["path"]).is_file()
        page = s.command("trtls.buildReport", {"buildId": run_id})
        assert Path(page["path"]).is_file() and page["html"].startswith("<!")
    assert rows[matrix["buildId"]]["cells"] == [c["buildId"] for c in final["cells"]]

    back = s.command("trtls.rollbackEngine", {"uri": uri, "engine": "demo", "to": first["buildId"]})
    assert back["status"] == "rolled_back" and s.finished(back["buildId"])["outcome"] == "rolled_back"
    assert "text" in s.command("trtls.printDebugInformation", {})

    shutil.copytree(store, tmp_path / "store2", symlinks=True)
    shutil.rmtree(tmp_path / "store2" / "tmp")
    (tmp_path / "store2" / "tmp").symlink_to(tmp_path)  # a store folder swapped for a link (TRT339)
    other = s.open(unusable / "trtls.toml")
    failed = s.command("trtls.buildEngine", {"uri": other, "engine": "demo"})
    assert failed["status"] == "store_error" and failed["buildId"] is None, failed
    said = failed["errors"][0]  # located on the recipe's `[store] path`: the workspace holds two recipes
    assert said.startswith(f"{unusable / 'trtls.toml'}:") and ": TRT339 the store" in said, failed
    s.change(other, "[engines.demo]\nonnx = 3\n")  # the editor's text, not the file's
    assert s.command("trtls.buildEngine", {"uri": other, "engine": "demo"})["status"] == "invalid_recipe"

    assert s.check_notifications() >= 6
    assert s.seen == BUILDS
    s.close()


@pytest.fixture(scope="module")
def route_ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = tmp_path_factory.mktemp("route") / "ws"
    skip = shutil.ignore_patterns(".trtls", "build", "checkpoints", "inputs", "model.onnx", "trtls.lock.json")
    shutil.copytree(ROUTE, ws, ignore=skip)
    subprocess.run([sys.executable, str(ws / "make_checkpoint.py")], cwd=ws, check=True, capture_output=True)
    return ws


def test_gates_replies_are_their_models_and_a_gates_run_has_no_build_report(sessions: Any, route_ws: Path) -> None:
    s = sessions(route_ws)
    uri = s.open(route_ws / "trtls.toml")
    rejected = s.command("trtls.runGates", {"uri": uri, "route": "license", "gates": [1]})
    assert rejected["decision"] == "reject" and rejected["verdict"]["outcomeKind"] == "refused"
    allowed = s.command(
        "trtls.allowLicense",
        {"uri": uri, "route": "license", "license": "apache-2.0"},
        {"window/showMessageRequest": {"title": "Allow"}, "workspace/applyEdit": {"applied": True}},
    )
    assert allowed == {"applied": True}
    locked = s.command("trtls.lockRoute", {"uri": uri, "route": "tiny"},
                       {"window/showMessageRequest": {"title": "Lock these files"}})  # fmt: skip
    assert locked["locked"] is True and locked["files"]

    row = s.run_row(rejected["runId"])
    assert row["kind"] == "gates" and row["route"] == "license" and row["hasReport"] is False
    shown = s.command("trtls.showEvidence", {"buildId": rejected["runId"]})
    assert shown["kind"] == "gates" and shown["path"] == rejected["summaryPath"] and Path(shown["path"]).is_file()
    said = s.refused("trtls.buildReport", {"buildId": rejected["runId"]})
    assert said == f"no build report for a gates run: its evidence is {rejected['summaryPath']}"

    assert s.check_notifications() >= 1  # the gates' progress ends
    assert s.seen == GATES
    s.close()


def test_triage_runs_are_listed_shown_and_refused_a_report_by_their_kind(
    sessions: Any, workspace: Path, tmp_path: Path
) -> None:
    """A reduction of a build TensorRT refuses (TRT206), a build of its minimal model, the model shown; a divergence
    search on the made-up fp16 model. Their rows validate (today's `headline`, `route` and the `divergence` kind
    were not declared), their evidence is the record each wrote, and neither has a build report."""
    from tests.triage.diverge_model import RECIPE, write_model

    recipe = workspace / "trtls.toml"
    recipe.write_text(
        recipe.read_text().replace(SMEM, SMEM + "memory_pool_limits = { tactic_shared_memory_kib = 32 }\n")
    )
    diverge = tmp_path / "diverge-ws"
    (diverge / "models").mkdir(parents=True)
    write_model(diverge / "models" / "enc.onnx")
    (diverge / "trtls.toml").write_text(RECIPE)
    s = sessions(workspace, diverge)
    uri = s.open(recipe)

    failing = s.command("trtls.buildEngine", {"uri": uri, "engine": "demo"})
    assert s.finished(failing["buildId"])["outcome"] == "failed"
    reduction = s.command("trtls.reduceEngine", {"uri": uri, "engine": "demo"})
    row = s.run_row(reduction["reductionId"])
    result = Path(row["evidencePath"])
    assert row["kind"] == "reduction" and row["headline"].startswith("reduce demo · trial ")
    assert row["hasReport"] is False
    assert result.name == "result.json" and result.is_file()
    shown = s.command("trtls.showEvidence", {"buildId": reduction["reductionId"]})
    assert shown["kind"] == "reduction" and shown["path"] == str(result)
    assert shown["summary"] == json.loads(result.read_text())
    said = s.refused("trtls.buildReport", {"buildId": reduction["reductionId"]})
    assert said == f"no build report for a reduction: its evidence is {result}"

    minimal = s.command("trtls.buildMinimal", {"uri": uri, "reductionId": reduction["reductionId"], "engine": "demo"})
    assert s.finished(minimal["buildId"])["parentId"] == reduction["reductionId"]
    opened = s.command("trtls.showDocument", {"path": str(result.parent / "minimal.onnx")},
                       {"window/showDocument": {"success": True}})  # fmt: skip
    assert opened == {"shown": True}

    enc = s.open(diverge / "trtls.toml")
    search = s.command("trtls.findDivergence", {"uri": enc, "engine": "enc"})
    row = s.run_row(search["divergenceId"])
    record = Path(row["evidencePath"])
    assert row["kind"] == "divergence" and row["engine"] == "enc" and row["status"] == "done", row
    assert record.name == "divergence.json" and record.is_file()
    shown = s.command("trtls.showEvidence", {"buildId": search["divergenceId"]})
    assert shown["kind"] == "divergence" and shown["path"] == str(record)
    said = s.refused("trtls.buildReport", {"buildId": search["divergenceId"]})
    assert said == f"no build report for a divergence search: its evidence is {record}"

    assert s.check_notifications() >= 4
    assert s.seen == TRIAGE
    s.close()
