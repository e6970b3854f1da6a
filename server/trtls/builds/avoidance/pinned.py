"""A rollback that sticks: after `trtls rollback` (or the editor's), a build serves the rolled-back engine until the
recipe's key changes (the pin is lifted) or `trtls build --unpin` (the pin is removed), each said in the evidence
(`pinned`, `store.unpinned`). The pin itself is `store.known_good.Pin`; the lookup (builds/avoidance/lookup.py) settles
it
before anything else, and the fast path never serves a table that has one (builds/avoidance/reuse.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trtls.builds.avoidance.restore import restore_hit
from trtls.store.entries import NotTrusted, Refused
from trtls.store.known_good import Pin
from trtls.store.use import StoreUse

LIFTED = "the recipe changed since the rollback (another engine key): the recipe's engine is built"


class PinUnavailable(Exception):
    """The pinned engine cannot be served (evicted, damaged, not trusted, the output not writable): nothing is built
    over the rollback; `trtls build --unpin` goes back to the recipe's engine."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def settle_pin(use: StoreUse, unpin: bool) -> None:
    """Read the table's pin at the lookup: `--unpin` removes it and a changed recipe key lifts it (either way
    `use.unpinned` says which pin and why); otherwise `use.pin` holds it and the build serves it. Only a table's own
    build with its key (a matrix cell, a build with CLI overrides: the pin stays for the next plain build)."""
    if use.history != use.engine or use.overridden or use.key is None:
        return
    pins = Pin(use.state_dir, use.engine)
    pin = pins.read()
    damaged = pins.damaged() if pin is None else None
    if damaged is not None and not unpin:  # a rollback the user asked for, unreadable: never "nothing pinned"
        use.pin_damaged = f"the rollback's pin {pins.path} {damaged}"
        return
    if pin is None:
        problem = pins.remove() if damaged is not None else None
        if problem is not None:
            use.warnings.append(problem)
        why = "nothing was pinned" if damaged is None else f"the damaged pin {pins.path} ({damaged}) was removed"
        use.unpinned = {"pin": None, "why": f"--unpin: {why}", "damaged": damaged}
        return
    if not unpin and pin.get("recipeKey") == use.key.hex:
        use.pin = pin
        return
    problem = pins.remove()
    if problem is not None:
        use.warnings.append(problem)
    use.unpinned = {"pin": pin, "why": "--unpin" if unpin else LIFTED}


def unpinned_line(use: StoreUse) -> str | None:
    """What a build says when it removed or lifted a pin, or None."""
    if use.unpinned is not None and use.unpinned.get("damaged") is not None:
        return f"unpinned: {str(use.unpinned['why']).removeprefix('--unpin: ')}; the recipe's engine is used"
    if use.unpinned is None or use.unpinned.get("pin") is None:
        return None
    build = use.unpinned["pin"].get("buildId")
    if use.unpinned.get("why") == "--unpin":
        return f"unpinned: the rollback to build {build} no longer holds; the recipe's engine is used"
    return f"the pin to build {build} was lifted: {LIFTED}"


def pin_mismatch(use: StoreUse, recipe: Path, pin: dict[str, Any], entry: Any) -> str | None:
    """Why the pin does not describe the engine its key would serve (`served`: the entry's sha256), or None. A pin is
    a rollback to one known-good build of this table: its key and digest must be that build's, and the entry must
    hold those bytes — a pin naming another engine's key (another project's in a shared store) or another digest is
    damaged or not trtls's, and the output is never given an engine the pin does not describe."""
    from trtls.store.known_good import KnownGood, uncorroborated

    served = entry.sha256
    known = KnownGood(use.state_dir, use.engine)
    build = known.find(str(pin.get("buildId")))
    if build is None:
        return f"the pin names no known-good build of {use.engine} ({known.problem or known.path})"
    pinned = pin.get("sha256")  # every pin a rollback wrote has one; a record without one is judged by its key
    if build.get("key") != pin.get("key") or (pinned is not None and build.get("sha256") not in (None, pinned)):
        return f"the pin's key or sha256 is not that build's in {known.path} (the pin is damaged)"
    if pinned is not None and served != pinned:
        return f"the store's entry for its key holds another engine (sha256 {served[:12]}…), not the pinned one"
    forged = uncorroborated(recipe, use.state_dir, use.engine, build, entry.build)
    return None if forged is None else f"its known-good record {forged}"


async def serve_pin(use: StoreUse, recipe: Path, build_id: str) -> dict[str, Any]:
    """Restore the pinned engine to the output (verified, atomic, under the output's lock): the reuse's summary, with
    `pinned`. PinUnavailable when it cannot be: the output is left as it is, nothing is built over the rollback."""
    how = "trtls build --unpin builds the recipe's engine"
    if use.pin_damaged is not None:
        raise PinUnavailable("TRT338", f"{use.pin_damaged}: nothing was built over the rollback; {how}")
    assert use.store is not None and use.pin is not None
    pin = use.pin
    named = f"pinned to build {pin.get('buildId')}"
    try:
        store = use.store
        entry = await use.looked_up(lambda: store.get(str(pin["key"])))  # may ask the remote: off the event loop
    except NotTrusted as exc:
        raise PinUnavailable("TRT340", f"{named}, whose entry is not used: {exc}; {how}") from None
    except Refused as exc:
        raise PinUnavailable("TRT332", f"{named}, whose entry is damaged: {exc}; {how}") from None
    if entry is None:
        why = f"pinned to build {pin.get('buildId')} by a rollback, whose engine is no longer in the store"
        raise PinUnavailable("TRT338", f"{why}: nothing was restored; {how}")
    mismatch = pin_mismatch(use, recipe, pin, entry)
    if mismatch is not None:
        raise PinUnavailable("TRT338", f"{named}: {mismatch}: nothing was restored; {how}")
    summary = await restore_hit(use, recipe, entry, build_id, False, pinned=pin)
    if summary is None:
        said = use.warnings[-1] if use.warnings else "the pinned engine could not be restored"
        code, _, rest = said.partition(" ")
        if not (code.startswith("TRT") and rest):
            code, rest = "TRT338", said
        raise PinUnavailable(code, f"pinned to build {pin.get('buildId')}: {rest}")
    return summary
