"""The server's JSON writer (orjson, the json module for what orjson refuses) and the router's order."""

from __future__ import annotations

import json
import math

import pytest
from starlette.routing import Route

from pyllama_yield.api.app import MATCHED_FIRST, ROUTES, build_app
from pyllama_yield.api.bridge import sse
from pyllama_yield.api.json_out import JSONResponse, dumps


def test_compact_utf8_as_llama_server_writes_it():
    assert dumps({"content": "héllo 世界", "n": [1, 2.5]}) == '{"content":"héllo 世界","n":[1,2.5]}'
    assert sse({"a": 1}) == 'data: {"a":1}\n\n'


def test_nan_and_infinities_are_null_as_in_nlohmann_json():
    assert json.loads(dumps({"logprob": -math.inf, "p": math.nan, "q": math.inf})) == {
        "logprob": None,
        "p": None,
        "q": None,
    }


def test_integer_keys_become_strings_as_json_dumps_makes_them():
    assert json.loads(dumps({15043: 1.5})) == {"15043": 1.5}


@pytest.mark.parametrize("value", ["a\ud800b", 2**70])
def test_what_orjson_refuses_goes_out_ascii_escaped(value: object):
    out = dumps({"v": value})
    assert out.isascii()
    assert json.loads(out) == {"v": value}
    out.encode("utf-8")  # a stream stays valid UTF-8 (the surrogate is an escape, not a code point)


def test_a_type_neither_writes_raises_type_error():
    with pytest.raises(TypeError):
        dumps({"v": object()})


def test_json_response_renders_with_it():
    assert JSONResponse({"p": math.nan, "t": "é"}).body == '{"p":null,"t":"é"}'.encode()


def test_the_routes_most_requests_take_are_tried_first_and_none_is_lost():
    routes = [r for r in build_app(None).routes if isinstance(r, Route)]  # the web page's Mount comes last
    paths = [r.path for r in routes]
    assert paths[: len(MATCHED_FIRST)] == list(MATCHED_FIRST)
    assert sorted(paths) == sorted(path for path, *_ in ROUTES)
    props = [sorted(r.methods or ()) for r in routes if r.path == "/props"]
    assert props == [["GET", "HEAD"], ["POST"]]  # one path's methods keep ROUTES' order
