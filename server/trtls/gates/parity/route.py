"""Gate 4 on a route: the runtimes and options the recipe names, and the hook `trtls.gates.run` calls."""

from __future__ import annotations

import shlex
import tempfile
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from trtls.core.findings import TomlPath
from trtls.core.gate_result import GateCheck, decide, gate_check
from trtls.gates.parity.check import check_parity
from trtls.gates.parity.tokenizer import route_tokenizer
from trtls.runtimes import RuntimeSpec

GATE = 4

_check = partial(gate_check, GATE)


# Runtime names a route may use (core.route.KNOWN_RUNTIMES) → adapter kind.
RUNTIME_ALIASES = {
    "onnxruntime": "onnxruntime",
    "onnx.reference": "onnx_reference",
    "onnx_reference": "onnx_reference",
    "tensorrt": "tensorrt",
    "tensorrt_rtx": "tensorrt",
    "trtmc": "command",  # the native C++ task runtime: give its runner as `command`
    "command": "command",
}


def runtime_spec(
    name: str,
    model: str | Path | None = None,
    *,
    command: Sequence[str] | None = None,
    perturb: float = 0.0,
    timeout_s: float = 60.0,
    **extra: Any,
) -> RuntimeSpec:
    """A `RuntimeSpec` from a route's runtime name (`onnxruntime`, `onnx.reference`, `tensorrt`, `trtmc`, `command`).

    `perturb` is FAULT INJECTION (tests and the sample's failing variant only).
    """
    kind = RUNTIME_ALIASES.get(name, name)
    return RuntimeSpec(
        kind,
        model=str(model) if model is not None else None,
        command=list(command) if command else None,
        perturb=perturb,
        timeout_s=timeout_s,
        **extra,
    )


# ------------------------------------------------------------------------------ orchestrator hook (run.py)

RUNTIME_OPTIONS = (
    "threads",
    "timeout_s",
    "command",
    "perturb",
    "perturb_seed",
    "max_input_bytes",
    "model",
    "concurrency",
    "malformed",
    "concurrency_exact",
)


def route_runtimes(ctx: Any) -> tuple[RuntimeSpec | None, RuntimeSpec | None, dict[str, Any], list[GateCheck]]:
    """(runtime under test, reference, gate-4 options, config checks) from a `run.GateContext` (duck-typed).

    Models: onnxruntime / onnx.reference run the route engine's ONNX model; tensorrt / tensorrt_rtx run the
    engine file the recipe writes (`engines.X.output`); `trtmc` / `command` run `runtime_options.command`
    (argv list or a shell-style string, run from the recipe folder). `runtime_options.model` overrides the model.
    """
    route = ctx.route
    base: TomlPath = ("routes", ctx.route_name)
    opts = dict(getattr(route, "runtime_options", None) or {})
    problems: list[GateCheck] = []
    for key in opts:
        if key not in RUNTIME_OPTIONS:
            problems.append(
                _check(
                    "parity.config",
                    "hold",
                    f"unknown runtime option {key!r} (known: {', '.join(RUNTIME_OPTIONS)})",
                    "TRT810",
                    base + ("runtime_options", key),
                )
            )
    eng = ctx.loaded.engine(route.engine)
    onnx_path, engine_path = ctx.resolve(eng.onnx), ctx.resolve(eng.output)

    def spec_for(name: str, options: dict[str, Any], key: str) -> RuntimeSpec | None:
        kind = RUNTIME_ALIASES.get(name)
        if kind is None:
            problems.append(
                _check(
                    "parity.config",
                    "hold",
                    f"runtime {name!r} is not one gate 4 can run (known: {', '.join(RUNTIME_ALIASES)})",
                    "TRT810",
                    base + (key,),
                )
            )
            return None
        model = options.get("model")
        model_path = (
            ctx.resolve(model)
            if model
            else (engine_path if kind == "tensorrt" else onnx_path if kind != "command" else None)
        )
        command = options.get("command")
        if isinstance(command, str):
            command = shlex.split(command)
        kw = {
            k: options[k]
            for k in ("threads", "timeout_s", "perturb", "perturb_seed", "max_input_bytes")
            if k in options
        }
        try:
            return RuntimeSpec(
                kind,
                model=str(model_path) if model_path else None,
                command=list(command) if command else None,
                cwd=str(ctx.recipe_dir),
                **kw,
            )
        except TypeError as exc:
            problems.append(
                _check("parity.config", "hold", f"runtime options: {exc}", "TRT810", base + ("runtime_options",))
            )
            return None

    under_test = spec_for(route.runtime, opts, "runtime")
    reference = spec_for(route.reference, {}, "reference")
    return under_test, reference, opts, problems


def run_gate(ctx: Any) -> list[GateCheck]:
    """Gate 4 for `trtls.gates.run` (`hook(ctx) -> list[GateCheck]`); writes validation_status/runtime_target."""
    base: TomlPath = ("routes", ctx.route_name)
    under_test, reference, opts, checks = route_runtimes(ctx)
    if under_test is not None and reference is not None and not checks:
        ref_inputs = getattr(ctx.route, "reference_inputs", None)
        inputs = [ctx.resolve(ref_inputs)] if ref_inputs else []
        texts = getattr(ctx.route, "tokenizer_texts", None)
        p_tok = base + ("tokenizer_texts",)
        with tempfile.TemporaryDirectory(prefix="trtls-tokenizer-") as tmp:
            tokenizer, why_not = route_tokenizer(ctx, texts, Path(tmp)) if texts else (None, None)
            checks = check_parity(
                reference,
                under_test,
                inputs,
                tolerances=dict(getattr(ctx.route, "tolerances", None) or {}),
                concurrency=int(opts.get("concurrency", 4)),
                concurrency_exact=bool(opts.get("concurrency_exact", True)),
                malformed=bool(opts.get("malformed", True)),
                tokenizer=tokenizer,
                paths={"route": base, "tokenizer": p_tok},
            )
        if why_not is not None:
            checks.insert(
                0, _check("parity.tokenizer", "hold", f"tokenizer parity unproven: {why_not}", "TRT806", p_tok)
            )
        ctx.record["runtime_target"] = under_test.label
    ctx.record["validation_status"] = {"supported": "pass", "reject": "reject"}.get(decide(checks), "hold")
    return checks
