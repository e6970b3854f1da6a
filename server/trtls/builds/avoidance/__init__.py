"""Runs in the parent process, before and instead of a build: the glue between a build and the engine store
(`trtls.store`, which knows nothing of builds) — the lookup that decides reuse or build (`lookup`), restoring an
entry to the output (`restore`, `reuse`), whether the output is up to date (`freshness`), rollback and pins.
Never imports TensorRT: a hit must not pay for it.
"""
