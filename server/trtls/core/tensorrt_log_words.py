"""TensorRT's own words for the failures trtls reads its logs for — one owner for each string, which
`core.builder_errors` (the record) and `core.evidence` (the retry advice) both match.

A module of constants and nothing else: `core.evidence` sits on the store's fast path, which restores an engine
without importing the recipe models (pydantic), and `core.builder_errors` imports them.
"""

from __future__ import annotations

# TensorRT's words for a node it found no tactic for: users report it is most often memory (the workspace or GPU
# memory each tactic needs), yet TensorRT logs no allocation failure beside it (with one,
# core.builder_errors.memory_exhaustion records out_of_memory instead)
NO_IMPLEMENTATION = "Could not find any implementation for node"
# TensorRT-RTX 1.7.1's for a layer it has no implementation of at all (tacticSupply.cpp, before any timing: osam's
# NonMaxSuppression model); not memory, which fails while tactics are timed
NO_RUNNERS = "has no runners that implement it"
