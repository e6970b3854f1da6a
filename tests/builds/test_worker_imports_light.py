"""What a CLI build imports on its critical path (issue 31): the worker, before TensorRT, and the command line, before
it starts that worker. Neither loads `dataclasses` (which brings `inspect`, `ast`, `dis`, `tokenize`), and the worker
loads neither the supervisor's phase tree (core.phase_tree, core.display), core.evidence (build_target is in
core.build_target) nor `shutil` (bz2, lzma) or `secrets` (random, hmac, base64): a build that removes no folder and
names its temp files from os.urandom needs none of them.

Each runs a fresh interpreter without `site`, as the worker starts (builds/supervisor/spawn.py `_launch`), so a `.pth`
hook of this environment cannot import them first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import trtls

SERVER = Path(trtls.__file__).resolve().parent.parent
HEAVY = ("dataclasses", "inspect", "shutil", "secrets")


def _loaded(imports: str, names: tuple[str, ...]) -> list[str]:
    code = f"import json, sys\n{imports}\nprint(json.dumps(sorted(m for m in {names!r} if m in sys.modules)))"
    env = {**os.environ, "PYTHONPATH": str(SERVER)}
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout)


def test_the_worker_imports_none_of_them_before_tensorrt() -> None:
    imports = (
        "import trtls.builds.cuda, trtls.builds.worker.main, trtls.builds.worker.adapter, trtls.builds.worker.monitor"
    )
    assert _loaded(imports, (*HEAVY, "trtls.core.phase_tree", "trtls.core.display", "trtls.core.evidence")) == []


def test_the_command_line_starts_its_worker_before_dataclasses_load() -> None:
    # what a certain build (`--no-store`, a known miss) imports up to start_now: cli.entry, the fast path's modules,
    # spawn (preload_for reads the raw TOML with core.toml_bounded, not core.tomlpos)
    imports = "import trtls.cli.entry, trtls.cli.store_lookup, trtls.app.unchanged, trtls.builds.supervisor.spawn"
    assert _loaded(imports, ("dataclasses", "inspect", "trtls.core.tomlpos")) == []


def test_the_moved_names_have_one_home() -> None:
    """core.open_phases, core.build_target and core.toml_bounded own what moved there: no module re-exports them (a
    shim would let a worker import pull the old module back in), and every caller imports them from their home."""
    from trtls.core import evidence, phase_tree, tomlpos

    assert not hasattr(evidence, "build_target")
    assert not any(hasattr(tomlpos, n) for n in ("nesting_error", "TomlSyntaxError", "MAX_DEPTH"))
    assert phase_tree.OpenPhases.__module__ == "trtls.core.open_phases"


def test_the_plain_classes_keep_what_their_dataclasses_gave() -> None:
    from trtls.builds.timing_cache import CachePlan
    from trtls.builds.worker.adapter import BuilderModule
    from trtls.core.cancel import CancelToken
    from trtls.core.evidence import RetryAdvice
    from trtls.fs.kill import ProcessProof

    token = CancelToken()
    assert (
        token.source is None and token.later_requests == [] and token.later_requests is not CancelToken().later_requests
    )
    assert token.request("api") and not token.request("ide_stop") and token.later_requests[0][0] == "ide_stop"
    assert "source='api'" in repr(token) and "_lock" not in repr(token)
    a, b = CachePlan(None, "off", "cold", "no cache"), CachePlan(None, "off", "cold", "no cache")
    assert a == b and a.identity == {} and a.identity is not b.identity and a.data is None
    b.decision = "updated"
    assert a != b and "decision='updated'" in repr(b)
    assert RetryAdvice("rollback", "r") == RetryAdvice(policy="rollback", rule="r")
    assert RetryAdvice("rollback", "r").policy == "rollback"
    bm = BuilderModule(trt=sys, name="tensorrt_rtx", version="1.2.3")
    assert bm.is_rtx and bm.version_tuple == (1, 2, 3) and hash(bm) == hash(BuilderModule(sys, "tensorrt_rtx", "1.2.3"))
    proof = ProcessProof(123, "s", None)
    assert proof.pid == 123 and proof.start_id == "s" and proof.nonce is None
    for frozen in (bm, proof, RetryAdvice("a", "b")):
        try:
            frozen.pid = 1  # type: ignore[union-attr]
        except AttributeError:
            continue
        raise AssertionError(f"{frozen!r} accepted an assignment")
