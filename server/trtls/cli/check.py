"""`trtls check [RECIPE] [--format text|json|sarif]`: everything the editor would flag, without building.

The same findings as the editor's diagnostics (`trtls.onnx_files.profile_checks.check_recipe`: the recipe, and
every engine against the inputs its ONNX model declares). Exit 0 when there is nothing to report, 2 when there
is any error or warning (the documented bad-input code of `trtls build`).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from trtls.cli.exits import EXIT_BAD_INPUT, EXIT_OK
from trtls.cli.usage import output_file, recipe_argument
from trtls.core.findings import Finding, Severity

PROBLEM_SEVERITIES = (Severity.error, Severity.warning)


def register(subparsers: Any) -> None:
    c = subparsers.add_parser(
        "check",
        help="report every problem the editor would flag in a recipe, without building",
        epilog="exit codes: 0 nothing to report, 2 any error or warning",
    )
    recipe_argument(c)
    c.add_argument("--format", choices=("text", "json", "sarif"), default="text", help="report format (default: text)")
    c.add_argument("--output", "-o", type=output_file, help="write the report here (atomically) instead of stdout")
    c.add_argument(
        "--builder",
        action="store_true",
        help="also check the build keys against the TensorRT module a build would load (probed in a child "
        "process): legacy precision flags it lacks (TRT141), keys it cannot apply (TRT140), and where each engine "
        "will load (TRT153)",
    )
    c.add_argument(
        "--capability",
        action="store_true",
        help="also ask TensorRT's ONNX parser and builder, in a child process, whether they take each engine's model "
        "(nodes the parser refuses: TRT130; a network the builder refuses: TRT131)",
    )
    c.set_defaults(func=cmd_check)


def cmd_check(args: argparse.Namespace) -> int:
    from trtls.cli.common import find_recipe, recipe_file_or_report
    from trtls.cli.usage import JsonErrors
    from trtls.onnx_files.profile_checks import check_recipe

    if args.format == "json":  # the report is JSON: so is a failure (one error record on stdout, the text on stderr)
        JsonErrors.enabled = True
    path = find_recipe(args.recipe)
    if not recipe_file_or_report(path, "trtls check takes a trtls.toml recipe or the folder that holds one"):
        return EXIT_BAD_INPUT
    loaded = check_recipe(path)
    if getattr(args, "builder", False):
        loaded.findings.extend(_builder_findings(loaded))
    answers: dict[str, Any] = {}
    if getattr(args, "capability", False):
        answers = _capability(loaded)
        for engine, answer in answers.items():
            from trtls.core.capability import capability_findings

            loaded.findings.extend(capability_findings(engine, answer))
    findings = loaded.in_file_order(loaded.findings)  # as a person reads the recipe, not as the models validated it
    problems = [f for f in findings if f.severity in PROBLEM_SEVERITIES]
    if args.format == "json":
        report = as_json(loaded, findings, len(problems))
        if answers:
            report["capability"] = answers
        text = json.dumps(report, indent=2, default=str) + "\n"
    elif args.format == "sarif":
        text = json.dumps(as_sarif(loaded, findings), indent=2, default=str) + "\n"
    else:
        text = as_text(loaded, findings, len(problems))
    if args.output:
        from trtls.cli.output import write_output

        fmt = "text" if args.format == "text" else "json"
        refused = write_output(args.output, text, fmt=fmt, recipes=(loaded.path,))
        if refused is not None:
            return refused
    else:
        sys.stdout.write(text)
    return EXIT_BAD_INPUT if problems else EXIT_OK


def _builder_findings(loaded: Any) -> list[Finding]:
    from trtls.core.build_config_checks import capability_findings
    from trtls.core.loads_on import loads_on_findings
    from trtls.debug_info import probe_builder
    from trtls.onnx_files.profile_checks import valid_engines

    probe = probe_builder()
    if "capabilities" not in probe:
        print(f"trtls check --builder: no builder module to check against ({probe.get('error')})", file=sys.stderr)
        return []
    module = f"{probe['module']} {probe['version']}"
    engines = valid_engines(loaded)
    return capability_findings(engines, probe["capabilities"], module) + loads_on_findings(engines, module)


def _capability(loaded: Any) -> dict[str, Any]:
    """Each engine's capability answer (trtls.builds.worker.capability), one child per engine, in the recipe's order."""
    from trtls.builds.supervisor.capability_client import ask_blocking, capability_request, engines_to_ask
    from trtls.onnx_files.profile_checks import valid_engines

    engines = engines_to_ask(loaded.findings, valid_engines(loaded))
    return {name: ask_blocking(capability_request(loaded, eng)) for name, eng in engines.items()}


def _region(loaded: Any, f: Finding) -> tuple[int, int, int, int]:
    """1-based line/column, end exclusive (what SARIF and most CI annotations take)."""
    r = loaded.source_map.range(f.path, f.on_value)
    return r.start_line + 1, r.start_col + 1, r.end_line + 1, r.end_col + 1


def as_text(loaded: Any, findings: list[Finding], problems: int) -> str:
    from trtls.cli.common import finding_line

    lines = [finding_line(loaded, f) for f in findings]
    lines.append(
        f"{loaded.path}: {problems} problem{'s' if problems != 1 else ''}" if problems else f"{loaded.path}: ok"
    )
    return "\n".join(lines) + "\n"


def as_json(loaded: Any, findings: list[Finding], problems: int) -> dict[str, Any]:
    out = []
    for f in findings:
        line, col, end_line, end_col = _region(loaded, f)
        out.append(
            {
                "code": f.code,
                "severity": f.severity.value,
                "message": f.message,
                "path": list(f.path),
                "line": line,
                "column": col,
                "endLine": end_line,
                "endColumn": end_col,
                "docUrl": f.doc_url,
                "data": f.data,
            }
        )
    return {"recipe": str(loaded.path), "problems": problems, "findings": out}


def as_sarif(loaded: Any, findings: list[Finding]) -> dict[str, Any]:
    from trtls import __version__
    from trtls.gates.reports import to_sarif

    by_path = {f.path: f for f in findings}

    def locate(path: Any) -> Any:
        f = by_path.get(tuple(path))
        return _region(loaded, f) if f is not None else None

    return to_sarif(findings, locate, loaded.path, __version__)
