"""Triage for a model that fails: reduce a failing build to the smallest model that still fails the same way
(`reduce_build`), and find the first tensor where a converted model leaves tolerance (`diverge`).

Both are long jobs run like a build: every trial is a real worker build (or a real ONNX Runtime run), observable,
stoppable through the same cancel token, and written atomically under `.trtls/reduce/<id>/` (docs/triage.md).
This package imports `onnx`, Polygraphy's reduction markers and ONNX Runtime, never TensorRT; the divergence search
also imports `onnx_graphsurgeon` (the `precision` extra it needs brings it), a build reduction does not.
"""
