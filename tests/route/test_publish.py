"""One writer for a route's bundle and SBOM (route.publish, issue 18): the engine route and the ONNX route describe
the same checkpoint the same way — its Hugging Face page at the pinned commit included, which the ONNX route's copy
had lost — and differ only in what they built. Real `trtls route build` of the route sample."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.gates.test_route_build import COMMIT, copy_sample, fresh_sample, trtls

from trtls.bundle.sbom import sbom_path


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = fresh_sample(tmp_path_factory.mktemp("publish") / "route")
    root = copy_sample(root, root.parent / "copy")
    for route in ("tiny", "tiny_ort"):
        r = trtls("route", "build", "--route", route, cwd=root)
        assert r.returncode == 0, r.stdout + r.stderr
    return root


def _sbom(root: Path, route: str) -> dict:
    return json.loads(sbom_path(root / "build" / f"{route}.bundle").read_text())


def _checkpoint(sbom: dict) -> dict:
    return next(c for c in sbom["components"] if c["bom-ref"] == "checkpoint")


def test_both_routes_name_the_checkpoints_page_at_the_pinned_commit(built: Path) -> None:
    for route in ("tiny", "tiny_ort"):
        refs = _checkpoint(_sbom(built, route)).get("externalReferences")
        assert refs == [{"type": "distribution", "url": f"https://huggingface.co/trtls/tiny-mlp/tree/{COMMIT}"}], route


def test_the_two_sboms_differ_only_in_what_was_built(built: Path) -> None:
    engine, onnx = _sbom(built, "tiny"), _sbom(built, "tiny_ort")
    assert _checkpoint(engine) == _checkpoint(onnx)  # same checkpoint, same files, same licence, same page
    engine_refs = {c["bom-ref"] for c in engine["components"]}
    onnx_refs = {c["bom-ref"] for c in onnx["components"]}
    assert "engine" in engine_refs and "engine" not in onnx_refs
    assert onnx_refs <= engine_refs
