"""Gate 4 on a route: the runtimes and options the recipe names, and the hook `trtls.gates.run` calls."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from trtls.core.findings import TomlPath
from trtls.core.gate_result import GateCheck, gate_check
from trtls.gates.context import GateContext
from trtls.gates.files import scratch
from trtls.gates.parity.check import check_parity
from trtls.gates.parity.text_malformed import adapted_limits, route_text_limits
from trtls.gates.parity.tokenizer import check_tokenizer, check_tokenizer_reference, route_tokenizer
from trtls.gates.parity.trtmc_feed import trtmc_feed
from trtls.runtimes import RunResult, RuntimeSpec, load_npz

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
    "inter_threads",
    "graph_optimization",
    "provider",
    "timeout_s",
    "command",
    "perturb",
    "perturb_seed",
    "max_input_bytes",
    "model",
    "concurrency",
    "malformed",
    "concurrency_exact",
    "tokenizer_command",
)


# runtime_options that are RuntimeSpec fields (the ONNX Runtime session settings among them: threads = intra-op)
SPEC_OPTIONS = (
    "threads",
    "inter_threads",
    "graph_optimization",
    "provider",
    "timeout_s",
    "perturb",
    "perturb_seed",
    "max_input_bytes",
)


def route_runtimes(ctx: GateContext) -> tuple[RuntimeSpec | None, RuntimeSpec | None, dict[str, Any], list[GateCheck]]:
    """(runtime under test, reference runtime or None, gate-4 options, config checks) from a `run.GateContext`.

    The runtime under test is given the recipe's model path here; `run_gate` and gate 5 point it at the artifact
    the route deploys, extracted from the bundle (`gates.deployed`). tensorrt / tensorrt_rtx run an engine, onnxruntime
    and onnx.reference an ONNX model, `trtmc` / `command` run `runtime_options.command` (argv list or a shell-style
    string, from the recipe folder). The reference is None when it is `checkpoint` or `golden`
    (`gates.reference_outputs` computes those outputs; no runtime runs them).
    """
    import shlex

    from trtls.core.route import INDEPENDENT_REFERENCES

    route = ctx.route
    base: TomlPath = ("routes", ctx.route_name)
    opts = dict(route.runtime_options)
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
    if route.engine is not None:
        eng = ctx.loaded.engine(route.engine)
        onnx_path, engine_path = ctx.resolve(eng.onnx), ctx.resolve(eng.output)
    else:
        assert route.onnx is not None  # the route model: an ONNX route (no engine) names its ONNX
        onnx_path, engine_path = ctx.resolve(route.onnx), None

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
        kw = {k: options[k] for k in SPEC_OPTIONS if k in options}
        try:
            made = RuntimeSpec(
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
        wrong = [p for p in made.problems() if p.startswith(("threads", "inter_threads", "graph_optimization"))]
        if wrong:  # said at the key, not later as a failed runtime call
            problems.append(
                _check(
                    "parity.config",
                    "hold",
                    "runtime options: " + "; ".join(wrong),
                    "TRT810",
                    base + ("runtime_options",),
                )
            )
            return None
        return made

    under_test = spec_for(route.runtime, opts, "runtime")
    reference = None if route.reference in INDEPENDENT_REFERENCES else spec_for(route.reference, {}, "reference")
    return under_test, reference, opts, problems


def on_artifact(spec: RuntimeSpec, artifact: Any, bundle: Path) -> RuntimeSpec:
    """The runtime under test pointed at the deployed artifact extracted from the bundle (a command runner is told
    where the bundle is, in TRTLS_BUNDLE)."""
    import dataclasses

    if isinstance(artifact, str):
        return spec
    if spec.kind == "command":
        return dataclasses.replace(spec, env={**spec.env, "TRTLS_BUNDLE": str(bundle)})
    _, extracted, kind = artifact
    return dataclasses.replace(spec, model=str(extracted)) if kind == spec.kind else spec


def run_gate(ctx: GateContext) -> list[GateCheck]:
    """Gate 4 for `trtls.gates.run`: the runtime under test, on the artifact the route deploys (extracted from its
    bundle into a scratch folder), against the reference outputs (`gates.reference_outputs`), plus TRT811 (was the
    deployed artifact executed?), TRT812 (is the reference independent of the export?), the tokenizer from the
    runtime side, malformed inputs unfiltered, concurrency. Writes validation_status / deployed_artifact."""

    from trtls.core.gate_result import decide
    from trtls.gates.deployed import RefusedPath, contained, deployed_check, extract_artifact
    from trtls.gates.parity.independence import bit_identical, export_digests, reference_independence
    from trtls.gates.reference_outputs import checkpoint_outputs, golden_outputs

    route = ctx.route
    base: TomlPath = ("routes", ctx.route_name)
    under_test, reference_spec, opts, checks = route_runtimes(ctx)
    if under_test is None or checks or (reference_spec is None and route.reference not in ("checkpoint", "golden")):
        checks.append(deployed_check(ctx, None, None, "the runtime under test is not configured", base + ("runtime",)))
        ctx.record["validation_status"] = {"supported": "pass", "reject": "reject"}.get(decide(checks), "hold")
        return checks
    from trtls.core.route import input_set_paths

    # (set name, file, TOML key) per reference input set; a route with none still computes its reference (evidence)
    sets: list[tuple[str, str | None, TomlPath]] = list(input_set_paths(route, base)) or [
        ("reference", None, base + ("reference_inputs",))
    ]
    with scratch("trtls-gate4-") as tmp:
        artifact = extract_artifact(ctx, tmp)
        deployed_io = _deployed_io_map(ctx) if not isinstance(artifact, str) else None
        bundle = Path(ctx.recipe_dir) / route.bundle
        spec = on_artifact(under_test, artifact, bundle)
        ctx.record["deployed_artifact"] = (
            f"{route.bundle}:{artifact[0]}" if not isinstance(artifact, str) else f"not available: {artifact}"
        )
        per_set: list[tuple[str, list[GateCheck]]] = []
        evidence_by_set: dict[str, dict[str, Any]] = {}
        test_runs: list[RunResult] = []
        for index, (set_name, rel, p_in) in enumerate(sets):
            inputs: list[Path] = []
            refused: str | None = None
            if rel:
                try:
                    inputs = [contained(ctx, rel)]
                except RefusedPath as exc:
                    refused = str(exc)
            feeds: list[dict[str, np.ndarray]] = []
            try:
                feeds = [load_npz(p) for p in inputs]
            except (OSError, ValueError) as exc:
                refused = f"reference inputs unreadable: {exc}"
            reference: RuntimeSpec | RunResult
            set_evidence: dict[str, Any] = {}
            if reference_spec is not None:
                reference = reference_spec
            elif route.reference == "golden":
                reference, set_evidence = golden_outputs(ctx, inputs, len(feeds))
            else:
                reference, set_evidence = checkpoint_outputs(ctx, feeds)
            evidence_by_set[set_name] = set_evidence
            runs: dict[str, RunResult] = {}
            if isinstance(artifact, str):  # nothing deployed to run: never the recipe's files on disk instead
                break
            if refused is not None:
                per_set.append((set_name, [_check("parity.run", "not_checked", refused, "TRT802", p_in)]))
                continue
            adapter = trtmc_feed(deployed_io)  # a model with TRTMC's BERT I/O: fed row by row (gates.parity.trtmc_feed)
            set_checks = check_parity(
                reference,
                spec,
                feeds,
                tolerances=dict(route.tolerances or {}),
                concurrency=int(opts.get("concurrency", 4)),
                concurrency_exact=bool(opts.get("concurrency_exact", True)),
                malformed=bool(opts.get("malformed", True)) and index == 0,  # probed once, on the first set
                paths={"route": base, "reference_inputs": p_in},
                runs=runs,
                text_limits=route_text_limits(ctx)  # TRTMC's I/O: over_long from the engine profile
                if adapter is None
                else adapted_limits(route_text_limits(ctx), deployed_io, route.max_input_tokens),
                adapter=adapter,
            )
            if adapter is not None:
                set_evidence["adapter"] = adapter.evidence()
            per_set.append((set_name, set_checks))
            if "under_test" in runs:
                test_runs.append(runs["under_test"])
        if isinstance(artifact, str):
            checks = [_check("parity.run", "not_checked", f"nothing to run: {artifact}", "TRT802", base + ("bundle",))]
        elif route.named_input_sets:
            checks = merge_set_checks(per_set)
        else:
            checks = per_set[0][1]
        # TRT811 judges a run that did not answer before one that did: every set must have executed the artifact
        test_run = next((r for r in test_runs if not r.ok), test_runs[0] if test_runs else None)
        ref_evidence = dict(next(iter(evidence_by_set.values()), {}))
        if route.named_input_sets and ref_evidence:
            ref_evidence["input_sets"] = evidence_by_set
        checks.append(deployed_check(ctx, spec, test_run, artifact, base + ("runtime",)))
        exports = export_digests(ctx, artifact) if route.reference == "golden" else {}
        checks.append(reference_independence(route, ref_evidence, base, exports, bit_identical(checks)))
        if route.tokenizer_texts:
            tokenizer, why_not = route_tokenizer(ctx, route.tokenizer_texts, opts)
            p_tok = base + ("tokenizer_texts",)
            if tokenizer is None:
                checks.append(_check("parity.tokenizer", "not_checked", why_not, "TRT806", p_tok))
            else:
                checks.append(check_tokenizer(tokenizer, p_tok))
            checks.append(check_tokenizer_reference(ctx, route.tokenizer_texts, p_tok))
    ctx.record["runtime_under_test"] = spec.label
    ctx.record["reference"] = ref_evidence or {"reference": route.reference}
    ctx.record["validation_status"] = {"supported": "pass", "reject": "reject"}.get(decide(checks), "hold")
    return checks


def _deployed_io_map(ctx: GateContext) -> Any:
    """The deployed model's I/O as the bundle records it (`io_map`), or None where the bundle records none."""
    from trtls.bundle import BundleError, read_bundle
    from trtls.gates.deployed import RefusedPath, contained

    try:
        return read_bundle(contained(ctx, ctx.route.bundle)).header.get("io_map")
    except (RefusedPath, BundleError, OSError):
        return None


_STATUS_RANK = {"pass": 0, "not_checked": 1, "hold": 2, "reject": 3}


def merge_set_checks(per_set: Sequence[tuple[str, Sequence[GateCheck]]]) -> list[GateCheck]:
    """One check per name from gate 4's checks on each named reference input set: the worst status (reject > hold >
    not_checked > pass); the message names each set that did not pass ("set long: logits max abs error …"), or every
    set when all passed; the evidence is the worst set's, with `input_set` (its name) and `input_sets` (every set's
    status, message and evidence)."""
    order: list[str] = []
    by_name: dict[str, list[tuple[str, GateCheck]]] = {}
    for set_name, checks in per_set:
        for c in checks:
            if c.name not in by_name:
                order.append(c.name)
                by_name[c.name] = []
            by_name[c.name].append((set_name, c))
    out: list[GateCheck] = []
    for name in order:
        entries = by_name[name]
        worst_set, worst = max(entries, key=lambda e: _STATUS_RANK.get(e[1].status, 0))  # the first of the worst
        failing = sorted((e for e in entries if e[1].status != "pass"), key=lambda e: -_STATUS_RANK.get(e[1].status, 0))
        message = "; ".join(f"set {n}: {c.message}" for n, c in failing or entries)
        passed = [n for n, c in entries if c.status == "pass"]
        if failing and passed:
            message += f" (passes on set{'s' if len(passed) > 1 else ''} {', '.join(passed)})"
        evidence = {
            **worst.evidence,
            "input_set": worst_set,
            "input_sets": {n: {"status": c.status, "message": c.message, **c.evidence} for n, c in entries},
        }
        out.append(GateCheck(worst.gate, name, worst.status, message, worst.code, worst.path, worst.on_value, evidence))
    return out
