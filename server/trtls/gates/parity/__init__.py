"""Gate 4 — parity: the artifact the route deploys (from its bundle) through the runtime under test, against a
reference independent of the export (the checkpoint's own forward pass, or golden outputs; `gates.reference_outputs`),
on the route's reference inputs.

Verdicts come from Polygraphy's own comparator (`SimpleCompareFunc`, what `polygraphy run
--atol/--rtol/--check-error-stat` uses), not a copy of its semantics:

* per output `atol`, `rtol` (defaults 1e-5 each); `tolerances` maps output name → tolerance, `*` = the rest;
* `check_error_stat = "elemwise"` (default): an element fails when it is outside both atol and rtol;
  `max` / `mean` / `median` / `quantile` (with `quantile`, Polygraphy's `error_quantile`, default 0.99):
  the output fails when the statistic of the absolute error exceeds atol AND the same statistic of the
  relative error (|out - ref| / |ref|) exceeds rtol — either one within tolerance passes;
* NaN/Inf (`--validate`): a non-finite value the reference does not have is a failure on its own;
* output names, shapes and dtypes must match exactly.

Statistics recorded per output (evidence of the tolerance check): max / mean / median / p95 / p99 of the
absolute and the relative error, over every reference input.

Also checked: malformed inputs (wrong shape, wrong dtype, NaN, empty, oversized) reach the runtime under test
unfiltered and what it does is the result — a hang, a crash, or outputs for a wrong shape or dtype fail the
check; N concurrent requests must give exactly the serial outputs (bitwise by default, `concurrency_exact=False`
uses the output tolerance); the tokenizer: the token ids the runtime side reports
(`runtime_options.tokenizer_command`) must be identical to the checkpoint tokenizer's, else it is not_checked.

A runtime that cannot run here (TensorRT without a GPU it accepts) gives a `hold` with the reason — never a
pass — and TRT811 says plainly that the deployed artifact was not executed. A runtime with FAULT INJECTION
(`perturb > 0`) is always held, whatever its numbers.

Codes: TRT801 runtime unavailable · TRT802 run failed · TRT803 signature · TRT804 NaN/Inf · TRT805 tolerance
· TRT806 tokenizer · TRT807 malformed inputs · TRT808 concurrency · TRT809 fault injection · TRT810 config
· TRT811 deployed artifact executed · TRT812 reference independent of the export.
"""

from trtls.core.route import Tolerance
from trtls.gates.parity.check import ROUTE_KEYS, check_parity, toml_path
from trtls.gates.parity.compare import (
    DEFAULT_QUANTILE,
    OutputComparison,
    as_tolerance,
    compare_output,
    error_arrays,
    error_stats,
    nonfinite_problems,
    signature_problems,
    tolerance_for,
)
from trtls.gates.parity.robustness import MALFORMED_CASES, check_concurrency, check_malformed, malformed_cases
from trtls.gates.parity.route import (
    GATE,
    RUNTIME_ALIASES,
    RUNTIME_OPTIONS,
    on_artifact,
    route_runtimes,
    run_gate,
    runtime_spec,
)
from trtls.gates.parity.tokenizer import TokenizerParity, check_tokenizer, route_tokenizer

__all__ = [
    "DEFAULT_QUANTILE",
    "GATE",
    "MALFORMED_CASES",
    "ROUTE_KEYS",
    "RUNTIME_ALIASES",
    "RUNTIME_OPTIONS",
    "OutputComparison",
    "TokenizerParity",
    "Tolerance",
    "as_tolerance",
    "check_concurrency",
    "check_malformed",
    "check_parity",
    "check_tokenizer",
    "compare_output",
    "error_arrays",
    "error_stats",
    "malformed_cases",
    "nonfinite_problems",
    "on_artifact",
    "route_runtimes",
    "route_tokenizer",
    "run_gate",
    "runtime_spec",
    "signature_problems",
    "tolerance_for",
    "toml_path",
]
