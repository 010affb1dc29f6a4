"""Every route, fuzzed as a careless or hostile client would: requests that Schemathesis generates
from our own ``/openapi.json`` (bodies that fit the request models and bodies that break them),
and junk JSON from Hypothesis (wrong types, huge numbers, NaN, lone surrogates, deep nesting,
bodies that are not JSON at all).

What must hold for every request: an answer (never a dropped connection), never a 5xx except a
501 for a feature the server's flags leave off, every error in the error shape, and the server
still answering afterwards. The default run is bounded and derandomized (the same examples in
every run); the ``fuzz`` tier (``pytest -m fuzz tests/test_fuzz.py``) runs many more, randomly.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from http_server import start_server, stop_server
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openapi_spec_validator import validate

from pyllama_yield.api.app import ROUTES
from pyllama_yield.api.openapi import BODILESS_POSTS, FORM_BODIES, openapi_document

JSON = {"Content-Type": "application/json"}
BOUNDED, LONG = 12, 400  # examples per test (per operation for the generated requests)
FLAGS = {
    "generate": ["-np", "2", "-c", "1024", "--metrics", "--slots", "--props"],
    "embed": ["-np", "2", "-c", "1024", "--embeddings", "--metrics"],
}
TIERS = [pytest.param(BOUNDED, id="bounded"), pytest.param(LONG, id="long", marks=pytest.mark.fuzz)]


def fuzz_settings(examples: int) -> settings:
    """The bounded tier draws the same examples in every run; the long one draws at random."""
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=examples == BOUNDED,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


@pytest.fixture(scope="module", params=sorted(FLAGS))
def fuzz_server(request: pytest.FixtureRequest, tiny_model_path, tmp_path_factory) -> Iterator[str]:
    slots = tmp_path_factory.mktemp("slots")
    proc, base = start_server(tiny_model_path, *FLAGS[request.param], "--slot-save-path", str(slots))
    yield base
    stop_server(proc)


@pytest.fixture(scope="module")
def openapi(fuzz_server: str) -> dict[str, Any]:
    return httpx.get(f"{fuzz_server}/openapi.json", timeout=30).json()


def check_answer(response: httpx.Response | Any, what: str) -> None:
    """Never a 5xx (a 501 for a feature the flags leave off is an answer), errors in the shape
    (Ollama's on /api/: ``{"error": "message"}``)."""
    status = response.status_code
    if status >= 400:
        try:
            error = response.json()["error"]
        except (ValueError, KeyError, TypeError):
            pytest.fail(f"{what}: {status} not in the error shape: {response.text[:300]!r}")
        if " /api/" in what:
            assert isinstance(error, str) and error, f"{what}: {error}"
            assert status < 500, f"{what}: {status} {error}"
            return
        assert {"code", "message", "type"} <= set(error), f"{what}: {error}"
        assert error["code"] == status, f"{what}: {error}"
    allowed = status < 500 or (status == 501 and response.json()["error"]["type"] == "not_supported_error")
    assert allowed, f"{what}: {status} {response.text[:300]!r}"


def assert_still_serving(base: str) -> None:
    assert httpx.get(f"{base}/health", timeout=30).json() == {"status": "ok"}


# The document the app serves, built here as the app builds it: the operations are known when the
# tests are collected, and the server's own copy is checked against it.
DOCUMENT = openapi_document([(path, methods[0], public) for path, _, methods, public in ROUTES])
SCHEMA = schemathesis.openapi.from_dict(DOCUMENT)
OPERATIONS = [(op.path, op.method.upper()) for op in (r.ok() for r in SCHEMA.get_all_operations())]


def test_the_server_publishes_a_valid_openapi_31_document_with_every_route(openapi: dict[str, Any]) -> None:
    validate(openapi)  # OpenAPI 3.1 (openapi-spec-validator)
    assert openapi["openapi"] == "3.1.0" and openapi == DOCUMENT
    for path, _, methods, _ in ROUTES:
        op = openapi["paths"][path][methods[0].lower()]
        if (path, methods[0]) == ("/cors-proxy", "POST"):  # the proxied body is the target's business
            assert set(op["requestBody"]["content"]) == {"application/octet-stream"}
        elif (path, methods[0]) in FORM_BODIES:  # an upload
            assert op["requestBody"]["content"]["multipart/form-data"]["schema"]["required"] == ["file", "purpose"]
        elif methods[0] == "POST" and path in BODILESS_POSTS:
            assert "requestBody" not in op
        elif methods[0] == "POST":  # every body-reading route names its request model
            ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            assert ref.split("/")[-1] in openapi["components"]["schemas"], path


def cases(path: str, method: str) -> st.SearchStrategy[Any]:
    """Requests that fit the operation's schema, and requests that break it."""
    op = SCHEMA[path][method]
    return st.one_of(
        op.as_strategy(generation_mode=schemathesis.GenerationMode.POSITIVE),
        op.as_strategy(generation_mode=schemathesis.GenerationMode.NEGATIVE),
    )


@pytest.mark.parametrize("examples", TIERS)
@pytest.mark.parametrize(("path", "method"), OPERATIONS)
def test_requests_generated_from_our_openapi(examples: int, path: str, method: str, fuzz_server: str) -> None:
    @fuzz_settings(examples)
    @given(case=cases(path, method))
    def one(case: Any) -> None:
        if case.path == "/slots/{id_slot}":
            case.path_parameters = {"id_slot": 0}
        response = case.call(base_url=fuzz_server, timeout=120)
        check_answer(response, f"{case.method} {case.formatted_path} {case.query!r} {case.body!r:.300}")

    one()
    assert_still_serving(fuzz_server)


# --- junk: JSON that no model describes, and bodies that are not JSON -----------------------
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**63, max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.sampled_from(["\ud800", "a\udfffb", "\x00", "<__media__>", "\u202e"])  # lone surrogates and odd text
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
FIELD_NAMES = sorted(
    {"prompt", "messages", "content", "tokens", "input", "stop", "n_predict", "max_tokens", "stream", "n_probs"}
    | {"temperature", "grammar", "json_schema", "response_format", "tools", "tool_choice", "logit_bias", "query"}
    | {"documents", "texts", "top_n", "samplers", "lora", "id_slot", "system", "instructions", "filename", "n"}
    | {"input_prefix", "input_suffix", "input_extra", "embd_normalize", "encoding_format", "stream_options"}
)
BODIES = st.one_of(
    st.dictionaries(st.sampled_from(FIELD_NAMES), JSON_VALUES, max_size=6).map(json.dumps),  # NaN is sent as NaN
    JSON_VALUES.map(json.dumps),
    st.binary(max_size=64).map(lambda b: b.decode("latin-1")),
    st.just('{"prompt": "a", "n_predict": 2, "stop": '),  # cut short
)


def post_paths(openapi: dict[str, Any]) -> list[str]:
    return sorted(p.replace("{id_slot}", "0?action=save") for p, ops in openapi["paths"].items() if "post" in ops)


@pytest.mark.parametrize("examples", TIERS)
def test_junk_bodies_on_every_post_route(examples: int, fuzz_server: str, openapi: dict[str, Any]) -> None:
    paths = post_paths(openapi)
    assert "/v1/chat/completions" in paths and "/tokenize" in paths
    with httpx.Client(base_url=fuzz_server, timeout=120) as client:

        @fuzz_settings(examples)
        @given(path=st.sampled_from(paths), body=BODIES)
        def one(path: str, body: str) -> None:
            response = client.post(path, content=body.encode("utf-8", "surrogatepass"), headers=JSON)
            check_answer(response, f"POST {path} {body[:300]!r}")

        one()
    assert_still_serving(fuzz_server)


@pytest.mark.parametrize("examples", TIERS)
def test_get_routes_with_junk_query_strings(examples: int, fuzz_server: str, openapi: dict[str, Any]) -> None:
    gets = sorted(p for p, ops in openapi["paths"].items() if "get" in ops)
    with httpx.Client(base_url=fuzz_server, timeout=60) as client:

        @fuzz_settings(examples)
        @given(path=st.sampled_from(gets), params=st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3))
        def one(path: str, params: dict[str, str]) -> None:
            check_answer(client.get(path, params=params), f"GET {path} {params!r}")

        one()
    assert_still_serving(fuzz_server)


FOUND = [  # what the long tier found (each was a 500), kept as fixed cases
    ("/apply-template", {"chat_template_kwargs": True, "messages": []}),
    ("/v1/chat/completions", {"chat_template_kwargs": 1.0, "messages": [{"role": "user", "content": "hi"}]}),
    ("/v1/messages", {"messages": [], "tools": [None]}),
    ("/v1/messages/count_tokens", {"messages": [], "tools": [[]]}),
    ("/slots/0?action=save", {"filename": "0" * 27 + "\x80" * 100 + "İ" * 70}),  # C1 controls, >255 bytes
    ("/slots/0?action=save", {"filename": "a\ud800b"}),
    ("/apply-template", {"messages": [{"role": "user", "content": [{"type": [], "text": "x"}]}]}),
]


@pytest.mark.parametrize(("path", "body"), FOUND)
def test_bodies_the_long_tier_found(path: str, body: dict[str, Any], fuzz_server: str) -> None:
    raw = json.dumps(body).encode()
    response = httpx.post(f"{fuzz_server}{path}", content=raw, headers=JSON, timeout=60)
    check_answer(response, f"POST {path} {body!r}")
