"""Gate 3 — bundle and manifest: the route's `.bundle` is sound, its digests are recorded and match, it was
built from the checkpoint and build the route now has, and its SBOM describes it.

`run_gate(ctx)` is found by `run.GATE_HOOKS` (module `trtls.gates.bundle`). The bundle is the route's
`bundle` key; its records are the header's `trtls` block, the sidecar `<bundle>.trtls.json` and the SBOM
`<bundle>.cdx.json` (all written by `trtls route build`). Nothing is followed out of the bundle: section
names are never used as paths, and the bundle is read with `bundle.inspect_json` (bounded, hostile-input safe).

Checks (docs/codes/gate-bundle.md):
  TRT701 bundle.present        the bundle file exists                                      hold
  TRT702 bundle.<problem>      container and header sound (one check per problem category) reject
  TRT703 bundle.<problem>      recorded digests (header trtls record, sidecar) match       reject; no sidecar → hold
  TRT704 bundle.origin         foreign bundle (no trtls record) promoted with its digests  hold until
                                                                                           `trtls bundle promote`
  TRT705 bundle.provenance.checkpoint  provenance = gate 1's commit + files digest          hold (stale: rebuild)
  TRT706 bundle.provenance.build       provenance = latest successful build's buildConfigHash + builder version  hold
  TRT707 bundle.artifacts      the bundle's model.onnx / engine sections are the files gates 4–5 test    hold
  TRT708 bundle.sbom           SBOM present, CycloneDX 1.5, lists the bundle, checkpoint    hold
                               files, ONNX, engine, builder
`ctx.record["bundle_digest"]` = "sha256:<file sha256>" whenever the file could be read.
"""

from trtls.gates.bundle.contents import sbom_problems
from trtls.gates.bundle.gate import GATE, run_gate

__all__ = ["GATE", "run_gate", "sbom_problems"]
