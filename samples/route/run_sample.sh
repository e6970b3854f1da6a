#!/usr/bin/env bash
# The route sample from nothing to a decision for both routes, on this machine.
#
#   1. make_checkpoint.py                      the checkpoint (HF cache snapshot), model.onnx, reference/canary inputs
#   2. trtls route lock --route tiny …         records the two routes' checkpoint file digests in trtls.lock.json
#                                              (after reviewing the checkpoint; the gates only verify the lock)
#   3. trtls route build --route R, twice      the second build keeps the first bundle as releases/R-previous.bundle,
#                                              the rollback target gate 5 exercises (R = tiny_ort, then tiny)
#   4. trtls gates --route tiny_ort --record-baseline
#                                              records gate 5's performance baseline; exits 3 (hold): this run had
#                                              no baseline to compare with yet (TRT906). In real use a person reviews
#                                              the gates' output before recording a baseline.
#   5. trtls gates --route tiny                the TensorRT route: exit 3 (hold): no GPU TensorRT accepts, so the engine
#                                              it deploys cannot be executed here (the reason is in every format)
#   6. trtls gates --route tiny_ort            the ONNX Runtime route: every check ran: exit 0, supported
#
# Exit code: that of step 6 (0 supported, 3 hold, 4 reject). PYTHON overrides the interpreter (default: the repo's
# .venv when there is one, else python3).
set -euo pipefail
cd "$(dirname "$0")"
repo_venv=../../.venv/bin/python
PY=${PYTHON:-$([ -x "$repo_venv" ] && echo "$repo_venv" || echo python3)}
trtls() { "$PY" -m trtls.cli.main "$@"; }

"$PY" make_checkpoint.py
trtls route lock --route tiny --route tiny_ort
for route in tiny_ort tiny; do
    trtls route build --route "$route"
    trtls route build --route "$route"
done

rc=0
trtls gates --route tiny_ort --record-baseline || rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 3 ]; then
    echo "run_sample.sh: recording the baseline run ended with exit $rc (expected 3: hold on TRT906 only)" >&2
    exit "$rc"
fi

rc=0
trtls gates --route tiny || rc=$?
if [ "$rc" -ne 3 ]; then
    echo "run_sample.sh: the TensorRT route ended with exit $rc; on a machine without a GPU TensorRT accepts it holds (3)" >&2
fi

exec "$PY" -m trtls.cli.main gates --route tiny_ort
