"""What can be known of a build's output after its supervisor died (orphan recovery, builds/supervisor/orphans.py):
the engine on disk and its sha256, whether the build renamed a new engine over it, whether the previous engine is
intact — and what is not known. One pass over many records shares its reads (`RecoveryPass`). A record can be
planted: an output it names outside the recipe's folder is never looked at."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trtls.builds.artifacts import sha256_file, temp_files_near
from trtls.builds.supervisor.running_state import OutputState, RunningState
from trtls.core.paths import inside, real
from trtls.fs.kinds import TEMP_MARK


class RecoveryPass:
    """What one recovery pass learns once and every record shares. 300 stale records of one engine are 300 looks at
    one output: its sha256 is computed once per file on disk (keyed by device, inode, size and mtime, so a file
    replaced meanwhile is hashed again), and the temp files beside it are listed once per output, not per record."""

    def __init__(self) -> None:
        self.hashes: dict[tuple[str, int | None, int | None, int | None, int | None], str | OSError] = {}
        self.listings: dict[str, list[Path]] = {}
        self.hashed = 0  # files actually read and hashed in this pass
        self.listed = 0  # output folders actually listed in this pass

    def sha256(self, output: Path, now: OutputState, within: Path) -> str:
        key = (str(output), now.dev, now.inode, now.size, now.mtime_ns)
        if key not in self.hashes:
            self.hashed += 1
            try:
                self.hashes[key] = sha256_file(output, follow=False, within=within)
            except OSError as exc:
                self.hashes[key] = exc
        known = self.hashes[key]
        if isinstance(known, OSError):
            raise known
        return known

    def temps(self, output: Path, build_id: str) -> list[Path]:
        """This build's temp files beside `output` (`<name>.trtls-tmp-<build id>…`), from one listing per output."""
        if str(output) not in self.listings:
            self.listed += 1
            self.listings[str(output)] = temp_files_near(output)
        prefix = f"{output.name}{TEMP_MARK}{build_id}"
        return [p for p in self.listings[str(output)] if p.name.startswith(prefix)]


def output_truth(
    state: RunningState, events: list[Any], temps_left: int, root: Path, work: RecoveryPass | None = None
) -> dict[str, Any]:
    """What can be known about the output after the supervisor died: the engine on disk and its sha256, whether this
    build renamed a new engine over it, whether the previous engine is intact — and what is not known. An output
    outside the recipe's folder `root` is not looked at: a record can be planted, and its `output` may name any file
    (`/etc/shadow`, a 3 GiB one) whose sha256 would be read, written to the record and printed."""
    output, before = state.output_path, state.output_before
    if not inside(real(output.parent), real(root)):
        return {
            "engineOnDisk": {"path": str(output), "exists": None},
            "renamed": None,
            "engineArtifact": None,
            "previousEngineIntact": None,
            "known": [],
            "unknown": [
                "how far the builder got after the last recorded event",
                "the worker's peak memory",
                f"the engine on disk ({output} is outside the recipe's folder: a record can be forged; not looked at)",
            ],
        }
    now = OutputState.now(output)
    on_disk: dict[str, Any] = {"path": str(output), "exists": now.exists}
    if now.exists and output.is_file() and not output.is_symlink():
        try:
            on_disk.update(sha256=(work or RecoveryPass()).sha256(output, now, root), size=now.size)
        except OSError as exc:
            on_disk["error"] = exc.strerror or str(exc)
    reported = [e for e in events if e.type == "artifact" and e.kind == "engine" and e.action == "written"]
    reported_sha = reported[-1].sha256 if reported else None
    replaced = now.replaced_since(before)
    previous = state.previous_sha256
    known: list[str] = []
    unknown: list[str] = ["how far the builder got after the last recorded event", "the worker's peak memory"]
    renamed: bool | None
    if replaced is False:
        renamed = False
        known.append("the output is the file this build found when it started (same inode and mtime): not replaced")
    elif replaced is None and before is None:
        renamed = None if reported_sha is None else reported_sha == on_disk.get("sha256")
        unknown.append("whether the output was replaced (this older record has no state of the output at the start)")
    elif replaced is None:
        renamed = None
        unknown.append("whether the output was replaced (it cannot be read now)")
    elif reported_sha is not None and reported_sha == on_disk.get("sha256"):
        renamed = True
        known.append("this build renamed a new engine over the output: its worker reported it and the sha matches")
    else:
        renamed = None
        unknown.append(
            "who replaced the output: it changed after this build started, but no artifact event of this build "
            "reports the engine now on disk"
        )
    if temps_left:
        known.append(f"{temps_left} temp file(s) of this build were left beside the output (the rename had not run)")
    intact: bool | None = None
    if previous is not None and on_disk.get("sha256") is not None:
        intact = previous == on_disk["sha256"]
        known.append(f"the previous engine's sha256 was recorded at the start ({previous[:16]}…)")
    elif before is not None and before.exists and renamed is False:
        intact = True
        unknown.append("the previous engine's sha256 (not recorded before the kill); it was not replaced")
    elif before is not None and before.exists is False:
        known.append("there was no engine at the output when the build started")
    artifact = None
    if renamed:
        artifact = {
            "action": "written",
            "kind": "engine",
            "path": str(output),
            "size": on_disk.get("size"),
            "sha256": on_disk.get("sha256"),
            "reportedSha256": reported_sha,
            "verified": True,
            "how": "re-read from disk by orphan recovery; the worker's artifact event reports the same sha256",
        }
    return {
        "engineOnDisk": on_disk,
        "renamed": renamed,
        "engineArtifact": artifact,
        "previousEngineIntact": intact,
        "known": known,
        "unknown": unknown,
    }


def engine_message(summary: dict[str, Any]) -> str:
    disk = summary["engineOnDisk"]
    if disk.get("exists") is None:  # named outside the recipe's folder (output_truth): nothing said of what is there
        return f"the output it names ({disk['path']}) is outside the recipe's folder and was not looked at"
    sha = f"sha256 {disk['sha256'][:16]}…" if disk.get("sha256") else "no engine"
    if summary["renamed"] is True:
        return f"this build's new engine is on disk ({sha})"
    if summary["renamed"] is False:
        return f"the output was not replaced ({sha} on disk)"
    return f"whether this build replaced the output is not known ({sha} on disk)"
