"""The one door: every file trtls creates, replaces, appends, deletes, renames, touches, locks, chmods or mkdirs,
every process it signals, and every file a user, a recipe, a store or a record names that it reads.

`tests/test_one_door.py` walks the AST of `server/` and fails on any other way to do these things, so a new
feature is safe by calling this package, not by remembering a rule. The policy, in one place:

* **Every write names the folder it must stay in** (`within`) and a declared `Kind`. The target's real folder is
  judged against `within` and then *opened by descriptor, one component at a time, with O_NOFOLLOW* from
  `within`'s real path (`fs.folder.open_folder`), so a folder swapped for a symlink between the judgement and the
  write is refused, and the create/rename happens inside that very folder. A final symlink is never written
  through; a temp file is O_EXCL|O_NOFOLLOW.
* **Replacing an existing file is a rule of the kind**: a report (`-o`) replaces only a report trtls wrote and no one
  changed since, or an empty file (`fs.report_ledger`: a file's format proves nothing — `-o LICENSE` is text, `-o
  package.json` JSON), never a file its owner made read-only; an engine output replaces only a TensorRT engine or
  an empty file (`fs.kinds.engine_replace_refusal`, judged again right before the rename: never a user's
  `notes.md`); kinds with `replace=False` never replace anything.
* **Deletes remove only what trtls wrote**: the name must match the kind's name pattern, the folder it is removed
  from must be one trtls made (an `OWNED_MARK` file, or the kind's own known layout), nothing is removed through a
  link, and trees are removed by descriptor (a symlink inside is unlinked, never followed). A scratch folder's mark
  names its maker, so one a killed process left is swept later by another (`scratch.sweep_abandoned`).
* **Reads of untrusted files** (`fs.read`): regular files only (a FIFO, a device, `/dev/zero` refused before a
  byte is read), bounded by an expected size, and for records and store entries never through a final symlink.
* **Signals go only to our own processes** (`fs.kill`): a child we hold a handle to, or a process that proves to
  be the trtls worker of a given build (its start id and the per-build nonce in its environment).
* Special cases keep to the same rules, one module each: `stream` (events.jsonl written as it goes), `capture`
  (a child's output files, a spool), `copy_tree`, `descriptor`, `lineage` (processes seen under ours, signalled
  later only while their start id holds), `store_root` (where an engine store may be, and who may have written it),
  `models` (ONNX models and their external data, .npz inputs and safetensors shards a user names, read by
  `open_regular` and handed to the library as bytes or an open file; `require_regular` before a path must be given
  to TensorRT's parser or ONNX Runtime), `attrs` (the immutable flag, by descriptor); a lock is taken and released
  by `lock.try_lock`/`unlock` on a descriptor of `open_lock_file`, never by `fcntl` elsewhere.
* Every refusal is an `UnsafeWrite` (an OSError) with the path and why; faces turn it into a located error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trtls.core.paths import UnsafeWrite
    from trtls.fs.folder import ensure_folder, open_folder
    from trtls.fs.kill import (
        ProcessProof,
        end_child,
        end_child_async,
        kill_ray_actor,
        prove,
        signal_child,
        signal_proven,
    )
    from trtls.fs.kinds import OWNED_MARK, Kind
    from trtls.fs.lock import held_lock, open_lock_file, remove_unheld_lock
    from trtls.fs.read import (
        TooLarge,
        UnreadableRecord,
        open_regular,
        parse_json,
        read_bytes,
        read_json_record,
        read_text,
    )
    from trtls.fs.remove import remove_file, remove_tree, rename
    from trtls.fs.report_ledger import write_report
    from trtls.fs.scratch import scratch_dir, scratch_file
    from trtls.fs.write import (
        DEFAULT_MODE,
        append_text,
        atomic_write_bytes,
        atomic_write_text,
        atomic_writer,
        chmod,
        fsync_dir,
        temp_path_for,
        touch,
    )

__all__ = [
    "DEFAULT_MODE",
    "OWNED_MARK",
    "Kind",
    "ProcessProof",
    "TooLarge",
    "UnsafeWrite",
    "append_text",
    "atomic_write_bytes",
    "atomic_write_text",
    "atomic_writer",
    "chmod",
    "ensure_folder",
    "fsync_dir",
    "kill_ray_actor",
    "open_folder",
    "held_lock",
    "open_lock_file",
    "open_regular",
    "parse_json",
    "prove",
    "read_bytes",
    "read_text",
    "read_json_record",
    "UnreadableRecord",
    "remove_file",
    "remove_unheld_lock",
    "remove_tree",
    "rename",
    "scratch_dir",
    "scratch_file",
    "signal_child",
    "end_child",
    "end_child_async",
    "signal_proven",
    "temp_path_for",
    "touch",
    "write_report",
]

# Each name's module, imported on first use (PEP 562): a process takes only the door's parts it calls — a build's
# worker writes and removes files and never proves a process, and the store's fast path only reads — instead of all
# fourteen modules at `import trtls.fs` (~29 ms here, more on a host where imports cost more; issue 31).
_HOME = {
    "UnsafeWrite": "paths",
    **dict.fromkeys(("ensure_folder", "open_folder"), "folder"),
    **dict.fromkeys(
        ("ProcessProof", "end_child", "end_child_async", "kill_ray_actor", "prove", "signal_child", "signal_proven"),
        "kill",
    ),
    **dict.fromkeys(("OWNED_MARK", "Kind"), "kinds"),
    **dict.fromkeys(("held_lock", "open_lock_file", "remove_unheld_lock"), "lock"),
    **dict.fromkeys(
        ("TooLarge", "UnreadableRecord", "open_regular", "parse_json", "read_bytes", "read_json_record", "read_text"),
        "read",
    ),
    **dict.fromkeys(("remove_file", "remove_tree", "rename"), "remove"),
    **dict.fromkeys(("scratch_dir", "scratch_file"), "scratch"),
    **dict.fromkeys(
        (
            "DEFAULT_MODE",
            "append_text",
            "atomic_write_bytes",
            "atomic_write_text",
            "atomic_writer",
            "chmod",
            "fsync_dir",
            "temp_path_for",
            "touch",
        ),
        "write",
    ),
    "write_report": "report_ledger",
}


def __getattr__(name: str) -> object:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'trtls.fs' has no attribute {name!r}")
    value = getattr(_module(home), name)
    globals()[name] = value  # once: later uses are plain attribute reads
    return value


def _module(home: str) -> object:
    """The module `home` names, imported by name so the import graph sees each edge (tests/test_layers.py)."""
    if home == "paths":
        from trtls.core import paths

        return paths
    if home == "folder":
        from trtls.fs import folder

        return folder
    if home == "kill":
        from trtls.fs import kill

        return kill
    if home == "kinds":
        from trtls.fs import kinds

        return kinds
    if home == "lock":
        from trtls.fs import lock

        return lock
    if home == "read":
        from trtls.fs import read

        return read
    if home == "remove":
        from trtls.fs import remove

        return remove
    if home == "scratch":
        from trtls.fs import scratch

        return scratch
    if home == "report_ledger":
        from trtls.fs import report_ledger

        return report_ledger
    from trtls.fs import write

    return write
