"""`request_matrix`: a matrix or farm run — every cell keyed and looked up in the store before anything starts, the
cells the store cannot serve built under one parent (on a `[cluster]`, each on a node that can hold it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from trtls.app.build import Say
from trtls.app.request import refused_recipe
from trtls.app.results import MatrixStarted, Refused, request_error
from trtls.builds.avoidance import cells as avoidance
from trtls.builds.supervisor.matrix import PlannedCell, plan, start_matrix
from trtls.builds.supervisor.runs import RunRegistry
from trtls.builds.supervisor.supervisor import Supervisor
from trtls.core.recipe import LoadedRecipe
from trtls.core.summary_record import Summary

if TYPE_CHECKING:
    from trtls.builds.farm.placement import RemoteSpec

FollowerDone = Callable[[str, Summary | None, str], None]
# the lookup's answer, before anything is placed or started: the store's warnings and the cells it served
LookedUp = Callable[[list[str], list[tuple[PlannedCell, Summary]]], None]


async def request_matrix(
    supervisor: Supervisor,
    loaded: LoadedRecipe,
    engines: list[str] | None,
    title: str,
    *,
    matrix: bool = False,
    cell: str | None = None,
    overrides: dict[str, Any] | None = None,
    no_store: bool = False,
    rebuild: bool = False,
    runs: RunRegistry | None = None,
    scope: str = "",
    say: Say | None = None,
    on_looked_up: LookedUp | None = None,
    on_follower: FollowerDone | None = None,
    on_warning: Callable[[str, str], None] | None = None,
) -> MatrixStarted | Refused:
    """`engines` (None: every engine), each once or — `matrix`, or one `cell` by name — each cell of its
    `[engines.NAME.matrix]`. A refusal starts nothing: a recipe with errors, an engine it lacks (TRT107), a cell no
    matrix has (TRT177), a cell no node of the cluster can hold (located findings, nothing submitted).

    `on_looked_up(warnings, served cells)`: once every cell is looked up, before the cluster is asked for nodes (a
    served cell's engine is in place whatever follows). `on_follower(cell, summary or None, what happened)`: a cell
    of the same key as one this run builds, restored from its entry after it (or not). `runs`/`scope`: the parent and
    every cell registered, a cell that starts later (it waited for a node) at its first event. `say`: a line for a
    person (connecting to the cluster). `on_warning(cell, line)`: the store's warnings that come with a cell's end
    (its engine's upload to the remote store stopped, or failed)."""
    if loaded.recipe is None:
        return Refused("invalid_recipe", list(loaded.errors))
    names = list(engines) if engines else list(loaded.recipe.engines)
    refused = refused_recipe(loaded, names)
    if refused is not None:
        return refused
    planned = plan(loaded, names, matrix or bool(cell), overrides or {})
    if cell:
        planned = [p for p in planned if p.cell and p.cell.name == cell]
        if not planned:
            return Refused("bad_request", [request_error("TRT177", f"no matrix cell named {cell}")])
    found = await avoidance.avoid_cells(loaded, planned, no_store=no_store, rebuild=rebuild)
    served = [(p, Summary.written(record)) for p, record in found.reused]
    if on_looked_up is not None:
        on_looked_up(found.warnings, served)
    if not found.left:  # every cell is up to date: no run starts
        return MatrixStarted(None, [], served, found.warnings)
    try:
        remote_for = await _placed(loaded, found.left, say)
        if isinstance(remote_for, Refused):  # nothing was submitted: the keys' locks go
            found.release()
            return Refused(remote_for.because, remote_for.findings, found.warnings)
        # each cell's node publishes its engine to the remote store itself (builds/farm/node_store.py)
        mb = start_matrix(supervisor, loaded, found.left, title, avoidance.with_node_store(remote_for, found.uses))
    except BaseException:
        found.release()
        raise
    avoidance.attach_cells(mb, found.uses, None if on_follower is None else _with_summary(on_follower), on_warning)
    if runs is not None:
        registry = runs
        registry.add(mb, "matrix", scope)
        for b in mb.cells:
            registry.add(b, "build", scope)
        mb.listeners.append(lambda m, b, ev: registry.add(b, "build", scope) if b is not None else None)
    return MatrixStarted(mb, found.left, served, found.warnings)


def _with_summary(on_follower: FollowerDone) -> avoidance.FollowerDone:
    """`on_follower` as the store calls it, with the restored cell's record as it built it (a dict)."""
    return lambda cell, record, said: on_follower(cell, None if record is None else Summary.written(record), said)


async def _placed(
    loaded: LoadedRecipe, left: list[PlannedCell], say: Say | None
) -> Callable[[PlannedCell], RemoteSpec] | Refused | None:
    """On a `[cluster]`: each cell's place (its RemoteSpec), or the refusal when no node can hold some cell. Local
    cells: None."""
    if loaded.recipe is None or loaded.recipe.cluster is None:
        return None
    from trtls.builds.farm.submit import prepare  # no Ray import unless the recipe asks for a cluster

    if say is not None:
        say(f"connecting to the Ray cluster ({loaded.recipe.cluster.address})…")
    specs = await prepare(loaded, left)
    if isinstance(specs, list):
        return Refused("no_node", specs)
    return lambda p: specs[p.key]
