"""Before a farm run: connect, look at the nodes, place every cell — or refuse the run with located findings."""

from __future__ import annotations

import asyncio
import threading

from trtls.builds.farm.placement import RemoteSpec, Request, builder_of, place_all
from trtls.builds.supervisor.matrix import PlannedCell
from trtls.core.farm import LOCAL
from trtls.core.findings import Finding, Origin, Severity
from trtls.core.recipe import LoadedRecipe


async def prepare(loaded: LoadedRecipe, planned: list[PlannedCell]) -> dict[str, RemoteSpec] | list[Finding]:
    """cell key → RemoteSpec, or the findings that stop the run (nothing was submitted)."""
    from trtls.builds.farm import cluster

    assert loaded.recipe is not None and loaded.recipe.cluster is not None
    table = loaded.recipe.cluster
    cluster.begin_run()
    try:
        await asyncio.to_thread(cluster.connect, table)
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
    if cluster.connection.get("warm"):  # the farm's hosts answered once while the cells' bundles are reserved
        from trtls.builds.farm.host_slot import HOSTS, shares_host

        node_ids = sorted({n for pl in placements if shares_host(pl) for n in pl.candidates})
        threading.Thread(target=HOSTS.warm_up, args=(node_ids,), name="trtls-farm-warm-up", daemon=True).start()
    shared = loaded.resolve(table.shared_dir) if table.shared_dir else None
    # a local farm listens on 127.0.0.1 only: its one node is this machine, so its workers write in place
    same_machine = shared is None and table.address == LOCAL
    return {
        p.key: RemoteSpec(pl, table.queue_timeout_s, shared, table.keep_warm_s, same_machine)
        for p, pl in zip(planned, placements, strict=False)
    }


def _labels(loaded: LoadedRecipe, p: PlannedCell) -> dict[str, str]:
    run_on = loaded.engine(p.engine).run_on
    if run_on is None:
        return {}
    return {k: v.format_map({"engine": p.engine, "cell": p.engine}) for k, v in run_on.labels.items()}


def _builder(loaded: LoadedRecipe, p: PlannedCell) -> str | None:
    eng = loaded.engine(p.engine)
    return builder_of(str(p.overrides.get("builder_module") or eng.builder_module), eng.worker is not None)
