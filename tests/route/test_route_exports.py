"""A route build never replaces an ONNX file the user already had at the path it exports to (issue 27 item 7):
`onnx` is an input under [engines] and an output under [routes], so the file there may be the user's own model.
Real `trtls check` and `trtls route build` of the route sample (real checkpoint, real export), in tmp folders."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from tests.gates.test_route_build import change_weights, copy_sample, fresh_sample, trtls


def user_model(root: Path) -> bytes:
    """A real ONNX model that is not what the route build exports: the sample's model with the user's own note."""
    import onnx

    model = onnx.load_from_string((root / "model.onnx").read_bytes())
    model.doc_string = "my own model, exported by hand"
    return model.SerializeToString()


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fresh_sample(tmp_path_factory.mktemp("exports") / "route")


@pytest.fixture
def root(sample: Path, tmp_path: Path) -> Path:
    return copy_sample(sample, tmp_path / "route")


def line_of(root: Path, text: str, after: str) -> int:
    """The 1-based line of the first `text` after the line holding `after` in the sample's trtls.toml."""
    lines = (root / "trtls.toml").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if after in line)
    return next(i for i in range(start, len(lines)) if lines[i].startswith(text)) + 1


def set_overwrite(root: Path, table: str) -> None:
    path = root / "trtls.toml"
    text = path.read_text()
    assert text.count(f"[{table}]\n") == 1
    path.write_text(text.replace(f"[{table}]\n", f"[{table}]\noverwrite = true\n"))


def test_a_users_own_onnx_at_the_routes_onnx_path_is_never_replaced_and_both_faces_say_where(root: Path) -> None:
    user = root / "build" / "tiny_ort.onnx"
    user.parent.mkdir()
    user.write_bytes(mine := user_model(root))
    key_line = line_of(root, "onnx = ", "[routes.tiny_ort]")

    check = trtls("check", cwd=root)
    warned = [ln for ln in (check.stdout + check.stderr).splitlines() if "TRT122 warning: route 'tiny_ort'" in ln]
    assert len(warned) == 1, check.stdout + check.stderr
    assert re.match(rf".*trtls\.toml:{key_line}:\d+: TRT122 warning: route 'tiny_ort' exports its ONNX to ", warned[0])
    assert "overwrite = true" in warned[0]

    r = trtls("route", "build", "--route", "tiny_ort", cwd=root)
    assert r.returncode == 2, r.stdout + r.stderr
    assert re.search(
        rf"trtls\.toml:{key_line}:\d+: trtls route build: TRT122 .*tiny_ort\.onnx already exists", r.stderr
    ), r.stderr
    assert user.read_bytes() == mine  # the user's model is untouched
    assert not (root / "build" / "tiny_ort.bundle").exists()  # and nothing was written after the refusal
    record = json.loads((root / ".trtls" / "routes" / "tiny_ort" / "route-build.json").read_text())
    assert record["outcome"] == "error" and "TRT122" in record["message"]  # the refused run is in the evidence


def test_overwrite_true_lets_the_route_build_replace_it(root: Path) -> None:
    user = root / "build" / "tiny_ort.onnx"
    user.parent.mkdir()
    user.write_bytes(mine := user_model(root))
    set_overwrite(root, "routes.tiny_ort")
    assert "route 'tiny_ort'" not in trtls("check", cwd=root).stdout
    r = trtls("route", "build", "--route", "tiny_ort", cwd=root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert user.read_bytes() != mine
    assert user.read_bytes() == (root / "model.onnx").read_bytes()  # the export: the sample's model, byte for byte


def test_a_file_trtls_wrote_itself_is_replaced_without_the_flag(root: Path) -> None:
    r = trtls("route", "build", "--route", "tiny_ort", cwd=root)
    assert r.returncode == 0, r.stdout + r.stderr
    onnx = root / "build" / "tiny_ort.onnx"
    first = onnx.read_bytes()
    recorded = json.loads((root / ".trtls" / "routes" / "tiny_ort" / "exports.json").read_text())["files"]
    assert recorded["build/tiny_ort.onnx"]["sha256"] == hashlib.sha256(first).hexdigest()  # relative: copies keep it
    assert "route 'tiny_ort'" not in trtls("check", cwd=root).stdout  # check knows it by size and time

    change_weights(root)  # the next export differs: the file trtls wrote must be replaced
    r = trtls("route", "build", "--route", "tiny_ort", cwd=root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert onnx.read_bytes() != first


def test_the_engine_routes_export_over_the_engines_own_model_is_refused_before_any_build(root: Path) -> None:
    model = root / "model.onnx"  # [engines.tiny] onnx: the route `tiny` exports its checkpoint there
    model.write_bytes(mine := user_model(root))
    key_line = line_of(root, "engine = ", "[routes.tiny]")
    check = trtls("check", cwd=root)
    assert re.search(rf"trtls\.toml:{key_line}:\d+: TRT122 warning: route 'tiny' ", check.stdout + check.stderr)
    r = trtls("route", "build", "--route", "tiny", cwd=root)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"trtls.toml:{key_line}:" in r.stderr and "TRT122" in r.stderr
    assert model.read_bytes() == mine
    assert not (root / ".trtls" / "runs").exists()  # refused before the engine build started


def test_a_users_file_at_the_routes_bundle_path_is_never_replaced_and_a_bundle_trtls_wrote_is(root: Path) -> None:
    """The bundle's twin of the export rule (found by the 20,000-state hostile run: `route build` replaced a user's file
    at `build/tiny_ort.bundle`, exit 0). A file there with no sidecar of a bundle trtls wrote is refused before
    anything is built; the bundle a route build wrote (its sidecar records it) is replaced by the next build."""
    bundle = root / "build" / "tiny_ort.bundle"
    bundle.parent.mkdir()
    bundle.write_bytes(mine := b"my own notes, not a bundle\n")
    key_line = line_of(root, "bundle = ", "[routes.tiny_ort]")

    check = trtls("check", cwd=root)
    warned = [ln for ln in (check.stdout + check.stderr).splitlines() if "route 'tiny_ort' writes its bundle" in ln]
    assert len(warned) == 1 and f"trtls.toml:{key_line}:" in warned[0], check.stdout + check.stderr

    r = trtls("route", "build", "--route", "tiny_ort", cwd=root)
    assert r.returncode == 2, r.stdout + r.stderr
    assert re.search(
        rf"trtls\.toml:{key_line}:\d+: trtls route build: TRT122 .*tiny_ort\.bundle already exists", r.stderr
    )
    assert bundle.read_bytes() == mine and not (root / "build" / "tiny_ort.onnx").exists()

    bundle.unlink()
    assert trtls("route", "build", "--route", "tiny_ort", cwd=root).returncode == 0
    assert "writes its bundle to" not in trtls("check", cwd=root).stdout  # its sidecar says trtls wrote it
    again = trtls("route", "build", "--route", "tiny_ort", cwd=root)
    assert again.returncode == 0, again.stdout + again.stderr  # a bundle trtls wrote is replaced by the next build
    sidecar = json.loads((root / "build" / "tiny_ort.bundle.trtls.json").read_text())
    assert sidecar["origin"] == "trtls" and sidecar["file_sha256"] == hashlib.sha256(bundle.read_bytes()).hexdigest()
