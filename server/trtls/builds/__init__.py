"""Builds, by the process each module runs in: `worker/` (the child that runs TensorRT), `supervisor/` (the parent
that starts and follows workers), `avoidance/` (the parent's store lookup and restore before a build), `farm/` (cells
on a Ray cluster). The modules at this level are imported by both processes: output paths (`roots`, `artifacts`),
the builder's identity (`cuda`), the timing cache file, the build-config hash, and the precision step (run by the
worker, or by a route or triage in the parent).
"""
