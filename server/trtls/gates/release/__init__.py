"""Gate 5 — release, canary, rollback.

What is measured (the artifact the route deploys, extracted from its bundle, through the runtime under test, in
its child process, `runtimes.benchmark`): latency p50/p95/p99 of `iterations` serial requests after `warmup`
untimed ones, throughput (requests/s over the timed loop), peak memory (max RSS of the runtime child; device
memory when the runtime reports it), warm-up cost (model load + first request), and the cold build time
(`durationS` of the build evidence, or of the route build for a route with no engine).

How it is judged (documented in docs/codes/gate-release.md):

* a configured threshold that is exceeded → **reject** (latency, memory, throughput, warm-up, build time);
* a figure with no threshold was judged against nothing → **not_checked** (holds unless waived), never a pass;
* the stored baseline (`<root>/.trtls/routes/<route>/baseline.json`, written atomically) is missing → **hold**;
  a regression over `max_regression` (default 25 %) of p95 latency or peak memory → **reject**;
* canary: the deployed artifact on the canary inputs — every request must answer, with no NaN/Inf, each
  within `latency_p99_ms` when set; any failure → **reject**; no canary inputs or cannot run here → not_checked;
* rollback is exercised, not assumed (`rollback_drill`), on copies in a scratch folder (`release.scratch`): the
  previous bundle is restored over the deployment slot through `trtls.fs`, its sha256 verified (and against its
  sidecar record), a smoke run made on the restored bundle's deployed artifact, then the new bundle is restored
  and verified. No previous bundle → **hold**; a digest mismatch or a failed smoke run → **reject**; the smoke
  run cannot run here → not_checked. The user's bundle, previous bundle and sidecars are only read.
* gate 3 ran and did not pass → canary and rollback are not run (`not_run` in the summary).

Codes: TRT901 latency · TRT902 throughput · TRT903 memory · TRT904 warm-up · TRT905 build time ·
TRT906 baseline · TRT907 canary · TRT908 rollback · TRT909 measurement failed/unavailable · TRT910 a path
outside the recipe folder · TRT912 the measured ONNX Runtime session is not the one the bundle records.
"""

from trtls.gates.release.baseline import BASELINE_FORMAT, baseline_path, check_baseline, load_baseline, write_baseline
from trtls.gates.release.gate import GATE, check_release, record_of, run_gate
from trtls.gates.release.measure import Measurement, Thresholds, measure, measurement_of
from trtls.gates.release.performance import check_build_time, check_canary, check_performance
from trtls.gates.release.rollback import bundle_model, bundle_smoke, restore, rollback_drill

__all__ = [
    "BASELINE_FORMAT",
    "GATE",
    "Measurement",
    "Thresholds",
    "baseline_path",
    "bundle_model",
    "bundle_smoke",
    "check_baseline",
    "check_build_time",
    "check_canary",
    "check_performance",
    "check_release",
    "load_baseline",
    "measure",
    "measurement_of",
    "record_of",
    "run_gate",
    "restore",
    "rollback_drill",
    "write_baseline",
]
