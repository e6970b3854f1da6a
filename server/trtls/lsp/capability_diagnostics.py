"""Capability as you type: after a recipe's check, TensorRT's parser and builder are asked about each engine's ONNX
(trtls.builds.worker.capability, in a child process) and their answers shown at the engine's `onnx` key.

Off the event loop twice over: the ONNX is hashed in a thread (the digest cache makes an unchanged model a stat) and
TensorRT answers in a child the loop awaits. Debounced: the question goes out `DEBOUNCE_S` after the last check of a
document, and a newer check cancels a question still running (its child is killed). Cached by what TensorRT reads
(`capability_client.cache_key`: the ONNX's sha256, profiles, settings, module), so typing elsewhere in the recipe
never asks again; a diagnostic is published only when an engine's words changed.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from trtls.builds.supervisor.capability_client import (
    CapabilityCache,
    ask,
    cache_key,
    capability_request,
    engines_to_ask,
)
from trtls.core.capability import capability_findings
from trtls.core.findings import Origin

if TYPE_CHECKING:
    from trtls.core.findings import Finding
    from trtls.core.recipe import LoadedRecipe
    from trtls.lsp.language_server import TrtlsServer

DEBOUNCE_S = 0.5
KEY_PREFIX = "capability:"  # the diagnostics store's key per engine (Origin.recipe): a recipe check never wipes it
log = logging.getLogger("trtls")


class CapabilityWatch:
    def __init__(self) -> None:
        self.cache = CapabilityCache()
        self._due: dict[str, asyncio.TimerHandle] = {}
        self._running: dict[str, asyncio.Task[None]] = {}
        self.asked = 0  # questions that went to a child (tests: a cached answer costs none)

    def schedule(self, ls: TrtlsServer, uri: str, loaded: LoadedRecipe) -> None:
        """Ask about `loaded`'s engines once the document has been quiet for DEBOUNCE_S."""
        if uri in self._due:
            self._due.pop(uri).cancel()

        def due() -> None:
            self._due.pop(uri, None)
            running = self._running.pop(uri, None)
            if running is not None:
                running.cancel()
            self._running[uri] = asyncio.get_running_loop().create_task(
                self._ask_all(ls, uri, loaded), name=f"trtls-capability-{uri}"
            )

        self._due[uri] = asyncio.get_running_loop().call_later(DEBOUNCE_S, due)

    async def _ask_all(self, ls: TrtlsServer, uri: str, loaded: LoadedRecipe) -> None:
        from trtls.builds.supervisor.job import state_dir
        from trtls.onnx_files.profile_checks import valid_engines

        try:
            engines = engines_to_ask(loaded.findings, valid_engines(loaded))
            for stale in set(ls.store.keys(uri, Origin.recipe, KEY_PREFIX)) - {KEY_PREFIX + e for e in engines}:
                self._show(ls, uri, stale, [])
            for name, eng in engines.items():
                request = capability_request(loaded, eng)
                key = await asyncio.to_thread(cache_key, request, state_dir(Path(loaded.path)))
                answer = self.cache.get(key) if key is not None else None
                if answer is None:
                    self.asked += 1
                    answer = await ask(request)
                    if key is not None:
                        self.cache.put(key, answer)
                self._show(ls, uri, KEY_PREFIX + name, capability_findings(name, answer))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("trtls: capability of %s failed", uri)
        finally:
            if self._running.get(uri) is asyncio.current_task():
                del self._running[uri]

    @staticmethod
    def _show(ls: TrtlsServer, uri: str, key: str, findings: list[Finding]) -> None:
        shown = ls.store.get(uri, Origin.recipe, key)
        ls.store.set(uri, Origin.recipe, key, findings)
        if shown != findings:  # the same words (or none, still): no publish
            ls.publish(uri)

    async def aclose(self, bound_s: float = 5.0) -> None:
        """No question goes out any more, and one in flight ends within `bound_s`: cancelled, its child killed and
        reaped (`capability_client.ask`), or, still being started, closed by asyncio's own cancel of the spawn."""
        for handle in self._due.values():
            handle.cancel()
        self._due.clear()
        tasks = list(self._running.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=bound_s)
