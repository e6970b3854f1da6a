"""The one error a route build raises for bad input, located under `routes.<name>` when it can be."""

from __future__ import annotations

from typing import Any


class RouteBuildError(Exception):
    """The route cannot be built as asked (bad checkpoint, no exporter, …); nothing was promoted."""

    def __init__(self, message: str, path: tuple[Any, ...] = ()):
        super().__init__(message)
        self.path = path
