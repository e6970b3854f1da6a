"""`OpenPhases`: the progress monitor's name → id map for TensorRT's phases (core.phase_tree's module doc says what the
ids are). Its own module, standard library only: the worker imports it before TensorRT, and core.phase_tree (the
supervisor's tree, core.display, two dataclasses) is none of the worker's business; core.phase_tree uses it."""

from __future__ import annotations


class OpenPhases:
    """Name → id for the phases open right now. Not thread-safe by itself: the monitor holds a lock."""

    def __init__(self, first_root: int = 0) -> None:
        self._open: dict[str, str] = {}  # name → id; TensorRT keeps open names unique
        # parent id → children started so far; first_root > 0 when the worker's own phases (the precision
        # step) come before TensorRT's, so TensorRT's root is "1" and ids stay positions in one tree
        self._children: dict[str | None, int] = {None: first_root}

    def start(self, name: str, parent_name: str | None) -> tuple[str, str | None]:
        parent_id = self._open.get(parent_name) if parent_name is not None else None
        index = self._children.get(parent_id, 0)
        self._children[parent_id] = index + 1
        phase_id = str(index) if parent_id is None else f"{parent_id}.{index}"
        self._open[name] = phase_id
        return phase_id, parent_id

    def id_of(self, name: str) -> str | None:
        return self._open.get(name)

    def finish(self, name: str) -> str | None:
        return self._open.pop(name, None)

    def open_ids(self) -> list[str]:
        return list(self._open.values())
