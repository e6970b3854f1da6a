"""The TensorRT Model Connect `.bundle` container: read, verify, write, promote, inspect.

This module is the public face (`from trtls.bundle import ...`, `bundle.verify_bundle`); the code
lives in four siblings, each read in one sitting:

* `bundle_format`  — the layout, limits, check ids, `BundleProblem`/`BundleError`, `read_bundle`
  (the container is safe to use: magic, header, section table);
* `bundle_verify`  — `verify_bundle`: header fields, every section's and the whole file's sha256, the sidecar;
* `bundle_write`   — `write_bundle` (atomic, with the header `trtls` record and the sidecar) and
  `promote_foreign` (record the digests of a bundle trtls did not write);
* `bundle_inspect` — `inspect_json` / `inspect_text`, what `trtls bundle inspect` shows.

Native bundles carry no checksums, so trtls adds two records (gate 3, "bundle and manifest"): a `trtls`
object in the header of bundles it writes (section digests, provenance) and a sidecar `<bundle>.trtls.json`
beside every promoted bundle (whole-file digest, size, section digests).

Hostile input is the normal case here: a malformed file yields `BundleProblem`s / a `BundleError`, never
another exception, never a read sized by an unchecked header value, never a path built from a section name.
"""

from __future__ import annotations

from trtls.bundle.format import (
    CHECK_FIELD_MISSING,
    CHECK_FIELD_TYPE,
    CHECK_FILE_DIGEST,
    CHECK_HEADER_CAP,
    CHECK_HEADER_JSON,
    CHECK_HEADER_LENGTH,
    CHECK_HEADER_OBJECT,
    CHECK_IO,
    CHECK_MAGIC,
    CHECK_SECTION_BOUNDS,
    CHECK_SECTION_DIGEST,
    CHECK_SECTION_NAME,
    CHECK_SECTION_OVERLAP,
    CHECK_SECTIONS_TABLE,
    CHECK_SIDECAR,
    CHECK_TRTLS_BLOCK,
    CHECK_TRUNCATED,
    CHUNK,
    MAGIC,
    MAX_HEADER,
    MAX_SECTION_NAME,
    MAX_SIDECAR,
    OPTIONAL_FIELDS,
    PREAMBLE_SIZE,
    REQUIRED_FIELDS,
    SECTION_ALIGN,
    SIDECAR_FORMAT,
    SIDECAR_SUFFIX,
    TRTLS_BLOCK_FORMAT,
    Bundle,
    BundleError,
    BundleProblem,
    Section,
    read_bundle,
    sidecar_path,
)
from trtls.bundle.inspect import inspect_json, inspect_text
from trtls.bundle.verify import verify_bundle
from trtls.bundle.write import BundleDigests, SectionSource, promote_foreign, write_bundle

__all__ = [
    "CHECK_FIELD_MISSING",
    "CHECK_FIELD_TYPE",
    "CHECK_FILE_DIGEST",
    "CHECK_HEADER_CAP",
    "CHECK_HEADER_JSON",
    "CHECK_HEADER_LENGTH",
    "CHECK_HEADER_OBJECT",
    "CHECK_IO",
    "CHECK_MAGIC",
    "CHECK_SECTION_BOUNDS",
    "CHECK_SECTION_DIGEST",
    "CHECK_SECTION_NAME",
    "CHECK_SECTION_OVERLAP",
    "CHECK_SECTIONS_TABLE",
    "CHECK_SIDECAR",
    "CHECK_TRTLS_BLOCK",
    "CHECK_TRUNCATED",
    "CHUNK",
    "MAGIC",
    "MAX_HEADER",
    "MAX_SECTION_NAME",
    "MAX_SIDECAR",
    "OPTIONAL_FIELDS",
    "PREAMBLE_SIZE",
    "REQUIRED_FIELDS",
    "SECTION_ALIGN",
    "SIDECAR_FORMAT",
    "SIDECAR_SUFFIX",
    "TRTLS_BLOCK_FORMAT",
    "Bundle",
    "BundleDigests",
    "BundleError",
    "BundleProblem",
    "Section",
    "SectionSource",
    "inspect_json",
    "inspect_text",
    "promote_foreign",
    "read_bundle",
    "sidecar_path",
    "verify_bundle",
    "write_bundle",
]
