"""No command handler builds its reply, and nothing in the server builds a notification, by hand (issue 28, item 2):
each handler is declared to return its reply model in trtls.core.wire, the one function that sends a reply
(`wire.reply`) refuses anything else, and `trtls/buildTree` and the `$/progress` end go out from one function each,
as their models. tests/lsp/test_wire_commands.py drives every command over a real server and checks what arrives."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pydantic import BaseModel

from trtls.core import wire

SERVER = Path(__file__).resolve().parents[2] / "server" / "trtls"


def _handlers() -> dict[str, object]:
    """Every command's handler as written (lsp/server.py's, and the triage table's lazily imported ones)."""
    from trtls.lsp import rollback_command, server, triage_command, triage_commands_table

    found: dict[str, object] = {}
    tree = ast.parse((SERVER / "lsp" / "server.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for deco in node.decorator_list:
                if isinstance(deco, ast.Call) and ast.unparse(deco.func) == "command":
                    found[ast.literal_eval(deco.args[0])] = getattr(server, node.name)
    modules = {"triage_command": triage_command, "rollback_command": rollback_command}
    for name, (module, function, _) in triage_commands_table.COMMANDS.items():
        found[name] = getattr(modules[module], function)
    return found


def _declared_return(handler: object) -> set[type[BaseModel]]:
    annotation = handler.__annotations__["return"]  # type: ignore[attr-defined]
    value = eval(annotation, {"wire": wire, **vars(wire)})  # a string: `from __future__ import annotations`
    members = getattr(value, "__args__", (value,))
    return set(members)


def test_every_handler_is_declared_to_return_its_reply_model() -> None:
    handlers = _handlers()
    assert set(handlers) == set(wire.COMMAND_REPLIES)
    for name, handler in handlers.items():
        assert _declared_return(handler) == set(wire.reply_models(name)), name


def test_the_one_reply_function_refuses_a_hand_made_dict_or_another_commands_model() -> None:
    sent = {"buildId": "demo-1", "accepted": False, "status": "built", "stopped": "nothing", "message": "nothing"}
    made = wire.CancelBuildReply.model_validate(sent)
    assert wire.reply("trtls.cancelBuild", made) == sent
    with pytest.raises(TypeError, match="answered dict, not CancelBuildReply"):
        wire.reply("trtls.cancelBuild", sent)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="BuildEngineReply | BuildMatrixReply"):
        wire.reply("trtls.buildEngine", made)
    matrix = wire.BuildMatrixReply(buildId=None, status="reused")
    assert wire.reply("trtls.buildEngine", matrix)["status"] == "reused"  # a [cluster] recipe's one-cell farm run


def test_notifications_go_out_from_one_function_each() -> None:
    """`protocol.notify` is called in lsp/build_relay.notify_build_tree (trtls/buildTree) and lsp/progress_end.
    end_progress ($/progress end) only, and the method's name is spelled once (core/wire.py's BUILD_TREE)."""
    calls, spelled = [], []
    for path in sorted(SERVER.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Call) and ast.unparse(node.func).endswith(
                    ("protocol.notify", "send_notification")
                ):
                    calls.append((path.relative_to(SERVER).as_posix(), fn.name))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value == wire.BUILD_TREE:
                spelled.append(path.relative_to(SERVER).as_posix())
    assert sorted(set(calls)) == [("lsp/build_relay.py", "notify_build_tree"), ("lsp/progress_end.py", "end_progress")]
    receiving = {"accept/lsp_client.py"}  # the acceptance harness's client, which reads them
    assert set(spelled) - receiving == {"core/wire.py"}
