"""The layer table itself, as data: every package of `server/trtls`, the process it runs in, the concept it serves and
what it may import. `trtls.schema.layers` judges imports by it and generates docs/architecture.md's package table from
it; `tests/test_layers.py` checks it on the real import graph.

A package is a folder of modules, subpackages included (`builds/worker/` is a row of its own, apart from `builds/`,
whose row covers only the modules at its own level). A module's first-party imports are judged by the row of its own
folder: each must land in that folder or in a package its row names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from trtls.core.vocabulary import BuilderModule

Process = Literal["any", "worker child", "supervisor", "farm node", "server", "CLI", "developer"]
PROCESSES: dict[Process, str] = {
    "any": "every process, the worker child included",
    "worker child": "a child trtls starts to touch TensorRT or a model's runtime: the build worker (`python -m "
    "trtls.builds.worker`), the capability, engine-validity and AutoCast children, a runtime's child",
    "supervisor": "the process a face runs in (the language server or a terminal command), below the face: it checks "
    "recipes, looks up the store, starts the workers and follows them",
    "farm node": "the Ray processes of a `[cluster]` run: the head, a node's host, a cell's node worker",
    "server": "the language server (`trtls serve`), the editor's face",
    "CLI": "a terminal command (`trtls …`), the terminal's face",
    "developer": "run by hand and by CI, never by a user's command (`python -m trtls.schema.…`)",
}
EDITOR = ("pygls", "lsprotocol")
TENSORRT: tuple[str, ...] = get_args(BuilderModule)  # the builder modules: only the worker child imports them
EVERYTHING = "*"  # a face (and the generators): may import every package; nothing below a face imports one


@dataclass(frozen=True)
class Layer:
    package: str  # dotted under trtls: `builds.worker`
    runs_in: tuple[Process, ...]
    serves: str  # the concept, in one line
    may_import: tuple[str, ...]  # first-party packages (rows of this table), or (EVERYTHING,)
    never_imports: tuple[str, ...] = ()  # third-party modules, with why in the comment above the row
    holds: tuple[str, ...] = ()  # its modules a newcomer looks at first (each a module of the folder: tested)

    @property
    def folder(self) -> str:
        return self.package.replace(".", "/") + "/"


BUILDS_SHARED = ("core", "fs", "builds")
GATE_BASE = ("core", "fs", "bundle", "checkpoint", "gates")
LAYERS: tuple[Layer, ...] = (
    # the pure model: no other trtls layer, no editor, no builder
    Layer(
        "core",
        ("any",),
        "the pure models and tables: recipe, route, their located checks, events, wire and "
        "worker job, phase tree, cancel token, a build's state folded from its events and its view, evidence and "
        "retry advice, outcome kinds, the vocabularies, the registry of codes, display words, and how many CPUs a "
        "process may keep busy (its affinity and its cgroup's quota)",
        ("fs",),
        (*EDITOR, *TENSORRT),
        holds=(
            "recipe",
            "validation",
            "events",
            "wire",
            "worker_job",
            "vocabulary",
            "codes",
            "display",
            "phase_tree",
            "build_state",
            "build_view",
            "evidence",
            "outcome",
            "cgroups",
        ),
    ),
    # the one door: stdlib and core.paths only, so every process can import it
    Layer(
        "fs",
        ("any",),
        "the one door: every create, replace, delete, rename, lock, read of an untrusted file and "
        "signal to a process (`tests/test_one_door.py`)",
        ("core",),
        (*EDITOR, *TENSORRT, "pydantic"),
        holds=("kinds", "folder", "write", "remove", "read", "lock", "kill", "stream"),
    ),
    # the model checks run on every keystroke: no builder, no editor types, and no `onnx` package (its parser loads
    # every weight; onnx_files reads the wire format itself)
    Layer(
        "onnx_files",
        ("supervisor",),
        "the ONNX models users bring, read from the protobuf wire format without "
        "weights; the recipe's checks against them, quick fixes, hover and completion data",
        ("core", "fs"),
        (*EDITOR, *TENSORRT, "onnx"),
        holds=("onnx_reader", "profile_checks", "assist", "fixes"),
    ),
    Layer(
        "importers",
        ("CLI",),
        "other tools' command lines as recipe text (`trtls import trtexec`)",
        ("core", "fs"),
        (*EDITOR, *TENSORRT),
        holds=("trtexec",),
    ),
    Layer(
        "builds",
        ("worker child", "supervisor"),
        "what both processes of a build share: output paths, the "
        "builder's identity, the timing-cache file, the build-config hash, the precision step",
        ("core", "fs"),
        EDITOR,
        holds=("roots", "artifacts", "timing_cache", "build_facts", "precision"),
    ),
    # the child: never the supervisor, the store or pydantic (a child starts small)
    Layer(
        "builds.worker",
        ("worker child",),
        "the worker that runs TensorRT (**the only TensorRT import**, "
        "`builds/worker/adapter.py`) and the other short-lived TensorRT children",
        BUILDS_SHARED,
        (*EDITOR, "pydantic"),
        holds=("main", "build", "adapter", "monitor", "emitter"),
    ),
    # the parent never imports TensorRT: the builder lives only in the worker child
    Layer(
        "builds.supervisor",
        ("supervisor",),
        "starting workers and following them: the Build (its job, options and "
        "worker; its state is core's), spawn and kill, orphans, a build's end and evidence, retention, history, the "
        "matrix",
        (*BUILDS_SHARED, "store", "builds.avoidance", "builds.farm"),
        (*EDITOR, *TENSORRT),
        holds=("supervisor", "build", "spawn", "summary", "orphans", "runs", "matrix"),
    ),
    # a store hit must not pay for TensorRT
    Layer(
        "builds.avoidance",
        ("supervisor",),
        "the glue between a build and the engine store: the lookup that "
        "decides reuse or build, restore, freshness, rollback and pins",
        (*BUILDS_SHARED, "store", "builds.supervisor"),
        (*EDITOR, *TENSORRT),
        holds=("lookup", "restore", "reuse", "freshness", "rollback"),
    ),
    Layer(
        "builds.farm",
        ("supervisor", "farm node"),
        "cells of a recipe built on a Ray cluster (only for a "
        "`[cluster]`): placement, the transport, the node actors, the warm farm",
        (*BUILDS_SHARED, "store", "builds.supervisor", "builds.worker"),
        EDITOR,
        holds=("submit", "placement", "remote_process", "node_host", "warm_farm"),
    ),
    # the engine store keys and restores engines without TensorRT (a hit never imports it)
    Layer(
        "store",
        ("supervisor",),
        "the engine store: the key over every byte the builder reads, immutable verified "
        "entries, single flight, known-good engines, remote stores",
        ("core", "fs", "onnx_files", "checkpoint"),
        (*EDITOR, *TENSORRT),
        holds=("key", "entries", "lock", "known_good", "remote", "config"),
    ),
    Layer(
        "bundle",
        ("supervisor",),
        "the `.bundle` container: format, verify, write, inspect, SBOM",
        ("core", "fs"),
        (*EDITOR, *TENSORRT),
        holds=("format", "verify", "write", "inspect", "sbom"),
    ),
    Layer(
        "checkpoint",
        ("supervisor",),
        "a checkpoint read as data: layout, content, hashing, `trtls.lock.json`",
        ("core", "fs"),
        (*EDITOR, *TENSORRT),
        holds=("layout", "content", "hashing", "lock"),
    ),
    Layer(
        "runtimes",
        ("supervisor", "worker child"),
        "running a model on `.npz` inputs in a child process (onnxruntime, onnx.reference, TensorRT, a command)",
        (*BUILDS_SHARED, "builds.worker"),
        EDITOR,
        holds=("contract", "process", "child", "adapters"),
    ),
    Layer(
        "route",
        ("supervisor",),
        "`trtls route build`: checkpoint → ONNX → engine → `.bundle` + SBOM",
        (*BUILDS_SHARED, "builds.supervisor", "bundle", "checkpoint"),
        EDITOR,
        holds=("build", "exporters", "checkpoint"),
    ),
    Layer(
        "gates",
        ("supervisor",),
        "the five gates, gates 1–2 as modules (`source`, `environment`), the "
        "GateContext, the GATES table and the decision, SARIF and JUnit",
        (
            "core",
            "fs",
            "builds",
            "bundle",
            "checkpoint",
            "runtimes",
            "route",
            "gates.bundle",
            "gates.parity",
            "gates.release",
            "gates.lifecycle",
        ),
        EDITOR,
        holds=("run", "context", "source", "environment", "reports"),
    ),
    Layer(
        "gates.bundle",
        ("supervisor",),
        "gate 3: the bundle's contents, provenance and receipt",
        (*GATE_BASE, "builds", "route"),
        EDITOR,
        holds=("gate",),
    ),
    Layer(
        "gates.parity",
        ("supervisor",),
        "gate 4: the engine's outputs against the reference, tokenizers included",
        (*GATE_BASE, "runtimes"),
        EDITOR,
        holds=("check", "compare"),
    ),
    Layer(
        "gates.release",
        ("supervisor",),
        "gate 5: the release baseline",
        (*GATE_BASE, "runtimes", "gates.parity"),
        EDITOR,
        holds=("gate", "baseline"),
    ),
    Layer(
        "gates.lifecycle",
        ("supervisor",),
        "a route's life after its gates: what a verdict rests on, the promotion ledger, promotion, canary and rollback",
        (*GATE_BASE, "route"),
        EDITOR,
        holds=("promotion", "ledger", "status"),
    ),
    # pictures read evidence on disk: no builder
    Layer(
        "report",
        ("supervisor",),
        "HTML pages of a build, a matrix, a reduction and a route from the evidence on disk",
        (*BUILDS_SHARED, "builds.supervisor"),
        (*EDITOR, *TENSORRT),
        holds=("build_page", "route_page"),
    ),
    # triage runs trials as worker builds and ONNX Runtime runs: never TensorRT in-process
    Layer(
        "triage",
        ("supervisor",),
        "a failing model reduced to the smallest that fails the same way, and the first tensor that leaves tolerance",
        (
            *BUILDS_SHARED,
            "builds.supervisor",
            "builds.worker",
            "onnx_files",
            "store",
            "runtimes",
            "route",
            "checkpoint",
            "gates",
        ),
        (*EDITOR, *TENSORRT),
        holds=("reduce_build", "diverge", "trials"),
    ),
    # the use cases every face calls to start work, rendered by the faces
    Layer(
        "app",
        ("supervisor",),
        "**the application layer**: `request_build`, `request_matrix`, `request_rollback`, "
        "`request_reduction`, `request_divergence` and their typed results (`Started`, `Reused`, `Refused` …); one "
        "store lookup, one recipe check, one job per request",
        (
            "core",
            "fs",
            "onnx_files",
            "store",
            "builds",
            "builds.supervisor",
            "builds.avoidance",
            "builds.farm",
            "bundle",
            "checkpoint",
            "runtimes",
            "route",
            "gates",
            "triage",
        ),
        (*EDITOR, *TENSORRT),
        holds=("build", "matrix", "rollback", "triage", "results", "unchanged"),
    ),
    Layer(
        "accept",
        ("CLI",),
        "the stuck-build acceptance scenarios (`trtls accept`)",
        (
            "core",
            "fs",
            "builds",
            "builds.supervisor",
            "builds.worker",
            "bundle",
            "checkpoint",
            "runtimes",
            "route",
            "gates",
            "app",
        ),
        EDITOR,
        holds=("runner", "stop_scenarios", "criteria"),
    ),
    Layer(
        "cli",
        ("CLI",),
        "every terminal command, its exit codes and every line it prints",
        (EVERYTHING,),
        holds=("main", "common", "exits", "output", "console"),
    ),
    Layer(
        "lsp",
        ("server",),
        "the pygls server: thin handlers, the build relays, diagnostics, the editor's hover, lenses and quick fixes",
        (EVERYTHING,),
        holds=("server", "build_commands", "build_relay", "editor"),
    ),
    Layer(
        "schema",
        ("developer",),
        "the generated documents: the protocol's schema, tables and TypeScript, the code pages, the layer table",
        (EVERYTHING,),
        holds=("protocol", "protocol_ts", "code_pages", "layer_table", "layers"),
    ),
)
BY_PACKAGE = {layer.package: layer for layer in LAYERS}
