#!/usr/bin/env bash
# The route sample from nothing to `supported` on this machine (a CPU is enough: the TensorRT-RTX engine is built
# ahead of time and bundled for real; gate 4 runs onnxruntime against onnx.reference on the bundled ONNX).
#
#   1. make_checkpoint.py                      the checkpoint (HF cache snapshot), model.onnx, reference/canary inputs
#   2. trtls route build --route tiny          the first bundle
#   3. trtls route build --route tiny          the second bundle; the first is kept as releases/tiny-previous.bundle,
#                                              the rollback target gate 5 exercises
#   4. trtls gates --route tiny --record-baseline
#                                              records gate 5's performance baseline; exits 3 (hold): this run had
#                                              no baseline to compare with yet (TRT906). In real use a person reviews
#                                              the gates' output before recording a baseline.
#   5. trtls gates --route tiny                every check of the five gates passes: exit 0, decision supported
#
# Exit code: that of step 5 (0 supported, 3 hold, 4 reject). PYTHON overrides the interpreter (default: the repo's
# .venv when there is one, else python3).
set -euo pipefail
cd "$(dirname "$0")"
repo_venv=../../.venv/bin/python
PY=${PYTHON:-$([ -x "$repo_venv" ] && echo "$repo_venv" || echo python3)}
trtls() { "$PY" -m trtls.cli.main "$@"; }

"$PY" make_checkpoint.py
trtls route build --route tiny
trtls route build --route tiny

rc=0
trtls gates --route tiny --record-baseline || rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 3 ]; then
    echo "run_sample.sh: recording the baseline run ended with exit $rc (expected 3: hold on TRT906 only)" >&2
    exit "$rc"
fi

exec "$PY" -m trtls.cli.main gates --route tiny
