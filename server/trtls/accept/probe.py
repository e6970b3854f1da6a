"""Child-process helpers for the acceptance run (TensorRT is only ever imported in a child process).

python -m trtls.accept.probe deserialize ENGINE      → {"deserializes": true | false | null, "module": ...}
python -m trtls.accept.probe cache-bytes            → {"hex": "..."} a real serialized timing cache
python -m trtls.accept.probe hammer CACHE IDENTITY_JSON TAG N
    → N merged saves through trtls.builds.timing_cache.save_merged (records are lines; the merge is
      their union), so two of these at once show whether concurrent writers lose updates.
python -m trtls.accept.probe in-tmpfs OUTPUT SIZE WITHIN -- CMD...   (inside `unshare -m`)
    → a tmpfs of SIZE bytes over OUTPUT's folder (writes inside the scratch folder WITHIN), CMD run, then
      {"type": "tmpfs", ...}: what it holds
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def deserialize(engine: str) -> dict:
    from trtls.builds.worker import adapter

    bm = adapter.load_builder_module("auto")
    from trtls.fs import read_bytes

    result = adapter.engine_deserializes(bm, read_bytes(engine, limit=None))  # a scratch build's engine
    return {"deserializes": result, "module": bm.name if hasattr(bm, "name") else str(getattr(bm, "trt", "?"))}


def cache_bytes() -> dict:
    from trtls.builds.worker import adapter

    bm = adapter.load_builder_module("auto")
    logger = adapter.make_logger(bm, lambda severity, msg: None)
    config = bm.trt.Builder(logger).create_builder_config()
    data = adapter.serialize_timing_cache(adapter.create_timing_cache(config, b""))
    return {"hex": data.hex()}


def union(old: bytes, new: bytes) -> bytes:
    lines = sorted(set(old.splitlines()) | set(new.splitlines()))
    return b"\n".join(lines) + b"\n"


def hammer(cache: str, identity_json: str, tag: str, n: int) -> dict:
    from trtls.builds.timing_cache import save_merged
    from trtls.fs import parse_json

    identity = parse_json(identity_json)
    for i in range(n):
        save_merged(Path(cache), f"{tag}:{i:05d}".encode() + b"\n", identity, union)
    return {"tag": tag, "saves": n}


def main(argv: list[str]) -> int:
    cmd = argv[0]
    if cmd == "deserialize":
        out = deserialize(argv[1])
    elif cmd == "cache-bytes":
        out = cache_bytes()
    elif cmd == "hammer":
        out = hammer(argv[1], argv[2], argv[3], int(argv[4]))
    elif cmd == "in-tmpfs":  # OUTPUT SIZE WITHIN -- CMD...: prints its own report line
        from trtls.accept.faults import in_tmpfs

        return in_tmpfs(argv[1], int(argv[2]), argv[3], argv[argv.index("--") + 1 :])
    else:
        print(f"unknown probe {cmd}", file=sys.stderr)
        return 2
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
