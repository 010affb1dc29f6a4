"""An engine error has a kind and no HTTP status: the API picks the status, the client the exception."""

from __future__ import annotations

import pytest

from pyllama_yield.api.errors import HTTP_ERRORS, result_error
from pyllama_yield.client.answers import EngineError, raise_for_error
from pyllama_yield.server.errors import EngineFailure, ErrorKind, error_result
from pyllama_yield.server.task_builder import ContextOverflowError


def test_every_kind_has_an_http_status_and_the_payload_no_status():
    assert set(HTTP_ERRORS) == set(ErrorKind)
    failure = error_result(1, "x", ErrorKind.SERVER).payload
    assert isinstance(failure, EngineFailure) and not hasattr(failure, "code") and not hasattr(failure, "status")


@pytest.mark.parametrize(
    ("kind", "status", "type_"),
    [
        (ErrorKind.INVALID_REQUEST, 400, "invalid_request_error"),
        (ErrorKind.CANCELLED, 499, "invalid_request_error"),
        (ErrorKind.UNAVAILABLE, 503, "unavailable_error"),
        (ErrorKind.SERVER, 500, "server_error"),
    ],
)
def test_the_api_answers_each_kind_as_llama_server_does(kind: ErrorKind, status: int, type_: str):
    err = result_error(error_result(1, "why", kind))
    assert (err.status, err.kind, str(err)) == (status, type_, "why")


def test_details_travel_with_the_error():
    err = result_error(error_result(1, "long", ErrorKind.EXCEED_CONTEXT, n_prompt_tokens=9, n_ctx=4))
    assert (err.status, err.kind, err.extra) == (400, "exceed_context_size_error", {"n_prompt_tokens": 9, "n_ctx": 4})


def test_the_client_raises_by_kind():
    with pytest.raises(ValueError, match="bad"):
        raise_for_error(error_result(1, "bad", ErrorKind.INVALID_REQUEST))
    with pytest.raises(ContextOverflowError):
        raise_for_error(error_result(1, "x", ErrorKind.EXCEED_CONTEXT, n_prompt_tokens=9, n_ctx=4))
    for kind in (ErrorKind.CANCELLED, ErrorKind.UNAVAILABLE, ErrorKind.SERVER):
        with pytest.raises(EngineError) as info:
            raise_for_error(error_result(1, "down", kind))
        assert info.value.kind is kind
