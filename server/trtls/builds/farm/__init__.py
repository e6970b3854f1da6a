"""The build farm: cells of a recipe built on a Ray cluster with the same live tree, Stop and evidence.

`submit.prepare(loaded, planned)` connects to the recipe's `[cluster]`, checks that some node can hold every
cell (located findings when not) and gives each cell its `RemoteSpec`; `remote_process.RemoteProcess` is the
transport the supervisor drives; `node_worker.NodeWorker` is the actor that runs the ordinary worker on a node.
Only `node_worker`, `remote_process` and `cluster` (lazily) import Ray, and only when a recipe has `[cluster]`.
"""
