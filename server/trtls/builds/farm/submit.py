"""Before a farm run: connect, look at the nodes, place every cell — or refuse the run with located findings."""

from __future__ import annotations

import asyncio
import functools
import threading

from trtls.builds.farm.placement import Placement, RemoteSpec, Request, builder_of, place_all
from trtls.builds.supervisor.matrix import PlannedCell
from trtls.core.farm import LOCAL
from trtls.core.findings import Finding, Origin, Severity
from trtls.core.recipe import LoadedRecipe


async def prepare(loaded: LoadedRecipe, planned: list[PlannedCell]) -> dict[str, RemoteSpec] | list[Finding]:
    """cell key → RemoteSpec, or the findings that stop the run (nothing was submitted)."""
    from trtls.builds.farm import cluster, driver_preload

    assert loaded.recipe is not None and loaded.recipe.cluster is not None
    table = loaded.recipe.cluster
    cluster.begin_run()
    try:
        await asyncio.to_thread(cluster.connect, table, driver_preload.start)
        nodes = await asyncio.to_thread(cluster.nodes)
    except cluster.FarmUnavailable as exc:
        return [Finding(exc.code, Severity.error, str(exc), ("cluster", "address"), Origin.build, True)]
    requests = [
        Request.of(
            p.engine,
            p.key,
            loaded.engine(p.engine).run_on,
            p.cell.labels if p.cell else _labels(loaded, p),
            _builder(loaded, p),
        )
        for p in planned
    ]
    placements, findings = place_all(requests, nodes)
    if findings:
        return findings
    cluster.mark("placed")
    _hosts_ahead(placements, bool(cluster.connection.get("warm")), table.keep_warm_s)
    shared = loaded.resolve(table.shared_dir) if table.shared_dir else None
    # a local farm listens on 127.0.0.1 only: its one node is this machine, so its workers write in place
    same_machine = shared is None and table.address == LOCAL
    return {
        p.key: RemoteSpec(pl, table.queue_timeout_s, shared, table.keep_warm_s, same_machine)
        for p, pl in zip(planned, placements, strict=False)
    }


def _hosts_ahead(placements: list[Placement], warm: bool, linger_s: float) -> None:
    """While the cells' bundles are reserved: the warm farm's hosts looked up and answered once, or this driver's own
    hosts made (their Ray workers start meanwhile) — on the nodes a CPU-only cell may get, and, for its own, only
    when those are no more than such cells (each node likely gets one; a host no cell claims lingers as one whose
    last cell left: `linger_s`, the farm's keep_warm_s, at least host_slot.LINGER_S)."""
    from trtls.builds.farm.host_slot import HOSTS, shares_host

    sharing = [pl for pl in placements if shares_host(pl)]
    node_ids = sorted({n for pl in sharing for n in pl.candidates})
    if not node_ids or (not warm and len(node_ids) > len(sharing)):
        return
    if warm:
        target, name = HOSTS.warm_up, "trtls-farm-warm-up"
    else:
        target, name = functools.partial(HOSTS.start_own, linger_s=linger_s), "trtls-farm-hosts-ahead"
    threading.Thread(target=target, args=(node_ids,), name=name, daemon=True).start()


def _labels(loaded: LoadedRecipe, p: PlannedCell) -> dict[str, str]:
    run_on = loaded.engine(p.engine).run_on
    if run_on is None:
        return {}
    return {k: v.format_map({"engine": p.engine, "cell": p.engine}) for k, v in run_on.labels.items()}


def _builder(loaded: LoadedRecipe, p: PlannedCell) -> str | None:
    eng = loaded.engine(p.engine)
    return builder_of(str(p.overrides.get("builder_module") or eng.builder_module), eng.worker is not None)
