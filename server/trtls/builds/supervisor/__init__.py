"""Runs in the parent process (the CLI's or the language server's, asyncio): starts build workers and follows them —
the `Build` record folded from their events, spawning and killing (`spawn`, `killable`), orphan recovery, the end of a
build (evidence, the output commit guard), retention, the history that estimates time left, and the matrix.
Never imports TensorRT: the builder lives only in the worker child (`trtls.builds.worker`).
"""
