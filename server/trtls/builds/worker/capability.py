"""Will TensorRT take this model: the ONNX parser's own support query and the builder's, asked before any build.

Two questions, both TensorRT's own answers, never a table of ops kept here:
- the parser: `OnnxParser.supports_model_v2(bytes, path)`, then `is_subgraph_supported(i)` for each subgraph it cut and
  `get_error(i)` for each node it refused (node index, name, op type, its reason, where in the parser it was refused);
- the builder, when the parser takes the whole model: the model parsed as a build parses it, the engine's profiles and
  settings applied, then `IBuilder.is_network_supported(network, config)`. It answers in milliseconds and without a
  GPU, and it is what catches silero-vad's If-based export: the parser takes all 121 nodes, the builder refuses the
  network with the same internal error a build would end on (graphScope.cpp, measured with TensorRT-RTX 1.7.1).

The build worker asks the same two questions of what it already holds, with this module's functions: its parser's
answer after its parse (`worker_parse_answer`), and, when its build failed, the builder's verdict on its own network
and config (`ask_built_network`); it sends them in `build_finished.capability`.

This module runs in a child process (`python -m trtls.builds.worker.capability`, a request as JSON on stdin, the
answer as JSON on stdout): a parser that crashes or hangs on a hostile model takes down only the child, and the server
never imports TensorRT (tests/test_layers.py). `trtls.builds.supervisor.capability_client` starts it and reads the
answer; the words every face shows are `trtls.core.capability.capability_findings`.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import sys
import time
from typing import Any

from trtls.builds.worker.monitor import TIMING_PHASE

# ERRORs TensorRT logs on a machine with no CUDA driver after any refusal: a fact about the machine, not the model
_NO_DRIVER = ("CUDA driver version is insufficient", "cudaError 35")


def _parser_nodes(parser: Any) -> list[dict[str, Any]]:
    nodes = []
    for i in range(parser.num_errors):
        err = parser.get_error(i)
        stack = [str(s) for s in (err.local_function_stack() or [])] if hasattr(err, "local_function_stack") else []
        nodes.append(
            {
                "index": int(err.node()) if int(err.node()) >= 0 else None,
                "name": str(err.node_name() or ""),
                "op": str(err.node_operator() or ""),
                "reason": str(err.desc()).strip(),
                "where": f"{err.file()}:{err.line()}" if err.file() else None,
                "functions": stack,
            }
        )
    return nodes


def ask_parser(bm: Any, builder: Any, logger: Any, model: bytes, path: str) -> dict[str, Any]:
    """The parser's verdict on the whole model: supported, its subgraphs, and every node it refused."""
    network = builder.create_network(0)
    parser = bm.trt.OnnxParser(network, logger)
    return parser_answer(parser, bool(parser.supports_model_v2(model, path)))


def parser_answer(parser: Any, supported: bool) -> dict[str, Any]:
    """What a parser that has parsed the model holds: its subgraphs (TensorRT-RTX 1.7.1 fills them on
    `parse_from_file` as on `supports_model_v2`: one supported subgraph of every node when it took them all) and every
    node it refused. The build worker asks it of its own parser (no second parse)."""
    subgraphs = []
    for i in range(parser.num_subgraphs):
        nodes = [int(n) for n in parser.get_subgraph_nodes(i)]
        # a supported subgraph is a count; an unsupported one keeps its node indexes (the words name them)
        ok = bool(parser.is_subgraph_supported(i))
        subgraphs.append({"supported": ok, "count": len(nodes), **({} if ok else {"nodes": nodes})})
    return {"supported": supported, "subgraphs": subgraphs, "nodes": _parser_nodes(parser)}


def worker_parse_answer(parser: Any, errors: list[str]) -> dict[str, Any]:
    """The build worker's parse as a capability answer's `parser` (sent in `build_finished.capability`): the parser's
    own record, and, for a refusal the parser itself did not word (adapter.parse_onnx's: no graph outputs, rejected
    without a reason), the worker's words as an unplaced node."""
    out = parser_answer(parser, not errors) if parser is not None else {"supported": not errors, "subgraphs": []}
    if errors and not out.get("nodes"):
        out["nodes"] = [{"index": None, "name": "", "op": "", "reason": e} for e in errors]
    out.setdefault("nodes", [])
    return out


def builder_verdict(supported: bool, lines: list[tuple[str, str]]) -> dict[str, Any]:
    """`IBuilder.is_network_supported`'s answer with the ERRORs TensorRT logged while it was asked (`lines`, as
    (severity, message)): `supported` or `refused` with the first as its reason."""
    said = [m.strip() for s, m in lines if s in ("ERROR", "INTERNAL_ERROR") and not any(n in m for n in _NO_DRIVER)]
    out: dict[str, Any] = {"status": "supported" if supported else "refused", "errors": said}
    out["reason"] = None if supported else (said[0] if said else "is_network_supported returned False, logging nothing")
    return out


def ask_builder(
    bm: Any, builder: Any, logger: Any, lines: list[tuple[str, str]], request: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The builder's verdict on the parsed network with the engine's profiles and settings: `supported`, `refused`
    (with TensorRT's logged reason) or `not_checked` (why it could not be asked); and, for a network it supports, the
    trial build's answer (`trial_build`), else None."""
    from trtls.builds.worker import adapter
    from trtls.builds.worker import build_config_apply as bca

    network = builder.create_network(0)
    errors = adapter.parse_onnx(bm, builder, network, logger, request["onnx"])
    if errors:
        return {"status": "not_checked", "reason": "the ONNX parser refused the model: " + "; ".join(errors)}, None
    config = builder.create_builder_config()
    settings = {k: v for k, v in (request.get("settings") or {}).items() if v is not None}
    settings_note: str | None = None
    try:
        adapter.apply_builder_settings(
            bm, builder, config, {k: v for k, v in settings.items() if k not in bca.OWN_KEYS}
        )
        bca.apply_build_config(bm, builder, config, settings, [])
    except Exception as exc:  # a setting the build will refuse (TRT140/141 say which): asked with those set before it
        settings_note = f"a setting was refused ({type(exc).__name__}: {exc}); asked without it and those after it"
    dynamic = [network.get_input(i).name for i in range(network.num_inputs) if -1 in tuple(network.get_input(i).shape)]
    profiles = request.get("profiles") or []
    if dynamic and not profiles:
        return {"status": "not_checked", "reason": f"no optimization profile for the dynamic inputs {dynamic}"}, None
    try:
        adapter.add_profiles(bm, builder, config, profiles, network)
    except (ValueError, TypeError) as exc:
        return {"status": "not_checked", "reason": f"the profiles do not fit the model: {exc}"}, None
    del lines[:]
    out = builder_verdict(bool(builder.is_network_supported(network, config)), lines)
    if settings_note:
        out["settingsNote"] = settings_note
    if out["status"] != "supported":
        return out, None
    budget = float(request.get("trial_budget_s") or min(20.0, 0.4 * float(request.get("timeout_s") or 120)))
    return out, trial_build(bm, builder, network, config, lines, budget)


def _trial_monitor(bm: Any, deadline: float) -> Any:
    class TrialMonitor(bm.trt.IProgressMonitor):
        """Stops the trial at its first timing, or at the deadline; `reached` is the phase it stopped at."""

        def __init__(self) -> None:
            bm.trt.IProgressMonitor.__init__(self)
            self.reached: str | None = None
            self.over = False

        def phase_start(self, phase_name: str, parent_phase: str | None, num_steps: int) -> None:
            if self.reached is None and str(phase_name).startswith(TIMING_PHASE):
                self.reached = str(phase_name)

        def step_complete(self, phase_name: str, step: int) -> bool:
            self.over = self.over or time.monotonic() > deadline
            return self.reached is None and not self.over

        def phase_finish(self, phase_name: str) -> None:
            return None

    return TrialMonitor()


def trial_build(bm: Any, builder: Any, network: Any, config: Any, lines: list, budget_s: float) -> dict[str, Any]:
    """A build of the network with the engine's profiles and settings, stopped by its progress monitor when the
    builder starts timing tactics: what the builder does before it (graph analysis and optimization, each layer's
    runners and formats) is asked for real, and what a build spends its hours on (the timing) is never started.
    `supported`: the builder reached its first timing (or built: a network with nothing to time); `refused`: the build
    failed before it, with TensorRT's logged reason (the error the whole build would end on); `not_checked`: the
    budget ran out first. Without a GPU too (TensorRT-RTX 1.7.1): the formats are chosen before any device is used."""
    with contextlib.suppress(OSError):
        os.nice(10)  # asked as the user types: a build running beside it keeps the CPU first
    started = time.monotonic()
    monitor = _trial_monitor(bm, started + budget_s)
    config.progress_monitor = monitor
    del lines[:]
    plan = builder.build_serialized_network(network, config)
    seconds = round(time.monotonic() - started, 4)
    said = [m.strip() for s, m in lines if s in ("ERROR", "INTERNAL_ERROR") and not any(n in m for n in _NO_DRIVER)]
    base = {"seconds": seconds, "asked": "a build stopped at its first tactic timing"}
    if plan is not None:
        return {**base, "status": "supported", "reason": "it built: the network had nothing to time", "errors": []}
    if monitor.reached is not None:
        return {**base, "status": "supported", "reason": f"it reached '{monitor.reached}'", "errors": []}
    if monitor.over:
        why = f"the trial build did not reach its first timing within {budget_s:g} s"
        return {**base, "status": "not_checked", "reason": why, "errors": []}
    reason = said[0] if said else "the build failed before its first timing, logging nothing"
    return {**base, "status": "refused", "reason": reason, "errors": said}


def ask_built_network(worker: Any, builder: Any, network: Any, config: Any) -> dict[str, Any]:
    """The builder's verdict on a build worker's own network and config, asked after its build failed: no second
    parse, and milliseconds (17 ms for silero-vad's If export, TensorRT-RTX 1.7.1, no GPU). What TensorRT logs meanwhile
    is held from the build's log (the build's own error was read first) and kept as this answer's reason. Never asked of
    a stopped build: the stop would wait for it."""
    first, worker.held_logs = len(worker.logs), []
    try:
        supported = bool(builder.is_network_supported(network, config))
        worker.log_sync()
    except Exception as exc:  # a builder left unusable by its failure: said, not raised over the build's own error
        return {"status": "not_checked", "reason": f"is_network_supported raised {type(exc).__name__}: {exc}"}
    finally:
        worker.held_logs = None
    said = worker.logs[first:]
    del worker.logs[first:]
    return {**builder_verdict(supported, said), "asked": "after the build failed, on its own network and config"}


def build_trial(timed: str | None, error: str) -> dict[str, Any]:
    """What a failed build says as a trial (`trial_build`'s answer): it failed before its first timing (`refused`,
    with the build's error) or after it (`supported`: its layers had runners; the failure is another's)."""
    asked = "the build itself"
    if timed is not None:
        return {"status": "supported", "reason": f"the build reached '{timed}' before it failed", "asked": asked}
    return {"status": "refused", "reason": error, "asked": asked + ", which failed before its first tactic timing"}


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """The whole answer for one request ({onnx, profiles, settings, builder_module}). Never raises for the model:
    what could not be asked is `not_checked` with the reason."""
    from trtls.builds.worker import adapter
    from trtls.fs import read_bytes

    started = time.monotonic()
    try:
        bm = adapter.load_builder_module(request.get("builder_module") or "auto")
    except Exception as exc:
        return {"status": "not_checked", "reason": str(exc)}
    lines: list[tuple[str, str]] = []

    def keep(severity: str, msg: str) -> None:
        if severity in ("ERROR", "INTERNAL_ERROR"):
            lines.append((severity, msg))

    logger = adapter.make_logger(bm, keep)
    builder = bm.trt.Builder(logger)
    path = request["onnx"]
    try:
        model = read_bytes(path, limit=None, follow=True)
    except OSError as exc:
        return {"status": "not_checked", "reason": f"{path}: cannot read the model: {exc.strerror or exc}"}
    out: dict[str, Any] = {"module": f"{bm.name} {bm.version}", "parser": ask_parser(bm, builder, logger, model, path)}
    trial = None
    if out["parser"]["supported"]:
        out["builder"], trial = ask_builder(bm, builder, logger, lines, request)
    else:
        out["builder"] = {"status": "not_checked", "reason": "the parser refused nodes: the network is incomplete"}
    if trial is not None:
        out["trial"] = trial
    refused = not out["parser"]["supported"] or "refused" in (out["builder"]["status"], (trial or {}).get("status"))
    out["status"] = "refused" if refused else ("supported" if out["builder"]["status"] == "supported" else "parsed")
    out["seconds"] = round(time.monotonic() - started, 4)
    return out


def main() -> int:
    """Read one request on stdin, write one answer on stdout. TensorRT's own prints go to stderr: the answer's line
    is the only thing on the stdout the parent reads."""
    from trtls.fs import parse_json  # here, not at import: the child's start stays as light as before

    request = parse_json(sys.stdin.read())
    # a parent that died (the editor's server killed) cannot end a parse that hangs: the child ends itself
    signal.alarm(math.ceil(float(request.get("timeout_s") or 120)) + 5)
    answer_fd = os.dup(1)
    os.dup2(2, 1)
    result = answer(request)
    os.write(answer_fd, (json.dumps(result) + "\n").encode())
    os.close(answer_fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
