from __future__ import annotations

import pytest
from _route_helpers import route_table, write_recipe

from trtls.core.recipe import load_recipe
from trtls.core.route import RouteModel, route_model


def _findings(tmp_path, route: str):
    (tmp_path / "ck").mkdir(exist_ok=True)
    loaded = load_recipe(write_recipe(tmp_path, route))
    return loaded, {(f.code, f.path): f for f in loaded.findings}


def test_valid_route_is_typed(tmp_path):
    loaded, found = _findings(
        tmp_path, route_table("ck", "a" * 40, extra="tolerances = { logits = { atol = 0.001 } }\n")
    )
    # the only finding: m.onnx, which the test put there, is a file the route build would export over (a warning)
    assert list(found) == [("TRT122", ("routes", "r", "engine"))] and found[list(found)[0]].severity == "warning"
    r = route_model(loaded, "r")
    assert isinstance(r, RouteModel)
    assert r.revision_pinned and r.allow_pickle is False
    assert r.tolerances["logits"].atol == 0.001 and r.tolerances["logits"].rtol == 1e-5
    with pytest.raises(KeyError):
        route_model(loaded, "nope")


def test_unknown_key_has_a_hint_and_exact_location(tmp_path):
    route = route_table("ck", "main").replace("allowed_licenses", "allowed_licences")
    loaded, found = _findings(tmp_path, route)
    f = found[("TRT101", ("routes", "r", "allowed_licences"))]
    assert "did you mean 'allowed_licenses'" in f.message
    line = loaded.text.splitlines().index('allowed_licences = ["apache-2.0"]') + 1
    assert loaded.location(f).endswith(f":{line}:1")
    assert ("TRT103", ("routes", "r", "allowed_licenses")) in found
    assert loaded.recipe is None


def test_wrong_type_and_literal_are_located_on_the_value(tmp_path):
    extra = 'allow_pickle = "yes"\nenvironment = { builder_module = "tensorrt_rt" }\n'
    loaded, found = _findings(tmp_path, route_table("ck", "a" * 40, extra=extra))
    f = found[("TRT102", ("routes", "r", "allow_pickle"))]
    assert f.on_value
    lit = found[("TRT106", ("routes", "r", "environment", "builder_module"))]
    assert lit.data["suggestion"] == "tensorrt_rtx"


def test_undefined_engine_and_missing_files(tmp_path):
    route = route_table("missing", "a" * 40, extra='reference_inputs = "nope.npz"\n').replace(
        'engine = "e"', 'engine = "ee"'
    )
    loaded, found = _findings(tmp_path, route)
    eng = found[("TRT107", ("routes", "r", "engine"))]
    assert "engine 'ee' not defined" in eng.message and eng.data["suggestion"] == "e"
    line = loaded.text.splitlines().index('engine = "ee"')
    assert loaded.source_map.range(eng.path, eng.on_value).start_line == line
    assert ("TRT104", ("routes", "r", "checkpoint", "path")) in found
    assert ("TRT104", ("routes", "r", "reference_inputs")) in found


def test_undefined_engine_reported_even_when_schema_fails(tmp_path):
    route = route_table("ck", "a" * 40).replace('engine = "e"', 'engine = "x"') + "bogus = 1\n"
    _, found = _findings(tmp_path, route)
    assert ("TRT101", ("routes", "r", "bogus")) in found
    assert ("TRT107", ("routes", "r", "engine")) in found


def test_previous_bundle_cannot_be_the_bundle(tmp_path):
    _, found = _findings(tmp_path, route_table("ck", "a" * 40, extra='previous_bundle = "out/r.bundle"\n'))
    assert ("TRT109", ("routes", "r", "previous_bundle")) in found


def test_the_route_choice_is_one_rule(tmp_path):
    """`chosen_routes` is the one owner of "which route does this command act on" (gates, route build, the route
    lifecycle used to write it each): the named route, the only one, every one for status, or a TRT107 message."""
    from trtls.core.route import chosen_routes

    (tmp_path / "ck").mkdir(exist_ok=True)
    one = load_recipe(write_recipe(tmp_path, route_table("ck", "a" * 40)))
    assert chosen_routes(one, None) == ["r"] and chosen_routes(one, "r") == ["r"]
    assert chosen_routes(one, "nope") == "TRT107 no route named nope (routes: r)"
    two = load_recipe(write_recipe(tmp_path, route_table("ck", "a" * 40) + route_table("ck", "a" * 40, name="s")))
    assert chosen_routes(two, None) == "TRT107 choose a route with --route (routes: r, s)"
    assert chosen_routes(two, None, none_means_all=True) == ["r", "s"] and chosen_routes(two, "s") == ["s"]
