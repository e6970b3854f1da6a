"""The build farm: cells of a recipe built on a Ray cluster with the same live tree, Stop and evidence.

`submit.prepare(loaded, planned)` connects to the recipe's `[cluster]`, checks that some node can hold every
cell (located findings when not) and gives each cell its `RemoteSpec`; `remote_process.RemoteProcess` is the
transport the supervisor drives; `node_host.NodeHost` is the one actor per node that runs every CPU-only cell placed
there (each cell's CPUs reserved by its own placement group), `node_worker.NodeWorker` the actor of a cell that holds
a GPU; both run the ordinary worker through `cell_runner.CellRun`. Only the modules in tests/test_layers.py's
RAY_MODULES import Ray, and only when a recipe has `[cluster]`.
"""
