"""The application layer: the use cases every face calls to start work, each returning a typed result that the face
only renders (the terminal's lines and exit codes, the language server's replies and views, the acceptance
harness's checks).

    face ──► app.request_build / app.request_matrix ──► Started | Reused | AlreadyBuilding | Refused(findings)
                  │ one recipe (checked by the face's loader, once), one worker job, one store lookup
                  ▼
             store lookup (builds.avoidance.lookup) ──► supervisor.start ──► attach the publish ──► register

It sits above the build core, the store, the gates and triage, and below the faces (tests/test_layers.py): it
imports no editor type and prints nothing. A refusal is a list of findings with codes from core.codes, so the same
mistake reads the same in every face (an unknown engine is TRT107, an unknown matrix cell TRT177).

Modules: `build` (`request_build`, and `runs_as_matrix`: the rule that sends a request down the matrix path),
`matrix` (`request_matrix`), `rollback` (`request_rollback`: a known-good engine restored and pinned), `triage`
(`request_reduction`, `request_divergence`: the runs of `triage_runs`, which run the triage package's search),
`results` (what they answer), `unchanged` (the store's fast path, before the recipe models load). Nothing is imported
here: the fast path must not pay for the build core."""
