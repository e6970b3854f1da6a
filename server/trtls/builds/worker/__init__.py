"""Runs in a child process: the build worker (`python -m trtls.builds.worker`, docs/protocol.md) and the other
short-lived children that import TensorRT — the capability query (`capability`), the engine-validity question
(`engine_validity`) and the precision conversion (`autocast_child`). Nothing here imports the supervisor, the store
or pydantic: a child starts small, and a crash or a hang in TensorRT ends in the child, never in the editor.

Empty on purpose: importing a module of this package must not import the others.
"""
