"""pydantic's plugin loader, imported only when a plugin may load.

pydantic looks for plugins the first time it makes a model's validator: `pydantic.plugin._loader` imports
`importlib.metadata` (~12 ms of a recipe's first check here, 2026-12-05 — on a build's path to its worker after an
edit to the recipe) and only then reads PYDANTIC_DISABLE_PLUGINS. trtls's program sets that variable to `__all__`
(cli/entry.py) unless the person set it, so the import buys nothing. `defer_plugin_loader` puts a stand-in where
pydantic imports its loader from: while the variable disables every plugin (pydantic's own values for that) it answers
"no plugins", as pydantic's loader would; otherwise it loads pydantic's real loader and hands it every call and name,
so a person's plugins load exactly as without trtls. Standard library only: it runs before pydantic is imported.
"""

from __future__ import annotations

import os
import sys
import types

LOADER = "pydantic.plugin._loader"
ALL_OFF = ("__all__", "1", "true")  # PYDANTIC_DISABLE_PLUGINS values that turn every plugin off (pydantic's test)


class _DeferredLoader(types.ModuleType):
    """Stands in `sys.modules` for pydantic's plugin loader until a plugin may load."""

    def get_plugins(self) -> object:
        if os.environ.get("PYDANTIC_DISABLE_PLUGINS") in ALL_OFF:
            return ()
        return real_loader().get_plugins()

    def __getattr__(self, name: str) -> object:  # any other name pydantic may import from its loader
        if name.startswith("__"):  # the import system's questions (`__path__`: is it a package?) are not pydantic's
            raise AttributeError(name)
        return getattr(real_loader(), name)


def defer_plugin_loader() -> None:
    """Install the stand-in, unless pydantic's loader is already imported (then nothing changes)."""
    sys.modules.setdefault(LOADER, _DeferredLoader(LOADER))


def real_loader() -> types.ModuleType:
    """pydantic's own loader, imported in the stand-in's place the first time it is needed."""
    if isinstance(sys.modules.get(LOADER), _DeferredLoader):
        del sys.modules[LOADER]
    import pydantic.plugin._loader as loader  # pydantic's own, now (and from here on, for pydantic too)

    return loader
