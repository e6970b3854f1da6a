"""Triage for a model that fails: reduce a failing build to the smallest model that still fails the same way
(`reduce_build`), and find the first tensor where a converted model leaves tolerance (`diverge`).

Both are long jobs run like a build: every trial is a real worker build (or a real ONNX Runtime run), observable,
stoppable through the same cancel token, and written atomically under `.trtls/reduce/<id>/` (docs/triage.md).
This package imports `onnx`, Polygraphy's reduction markers and ONNX Runtime, never TensorRT; the divergence search
also imports `onnx_graphsurgeon` (the `precision` extra it needs brings it), a build reduction does not.
"""

# Here, not in reduce_build: the command line's parser and the editor's argument models read it, and importing
# reduce_build (the build core, the recipe models, pydantic) for it put ~0.3 s before every `trtls` command.
MAX_TRIALS = 10_000  # far beyond any bisection (2·log2 of a million nodes is 40): a bound, not a target
