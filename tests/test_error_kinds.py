"""An engine error has a kind and no HTTP status: one table picks the HTTP status (api/errors.py), one
map the Python exception (server/errors.raise_for_error); a request refused before it became tasks
is read as the same kinds (server/errors.failure_of)."""

from __future__ import annotations

import pytest

from pyllama_yield.api.errors import HTTP_ERRORS, failure_error, result_error
from pyllama_yield.server.chat_request import UnsupportedMediaError
from pyllama_yield.server.errors import (
    ContextOverflowError,
    EngineError,
    EngineFailure,
    ErrorKind,
    error_result,
    failure_of,
    raise_for_error,
)


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
        (ErrorKind.NOT_SUPPORTED, 501, "not_supported_error"),
        (ErrorKind.UNKNOWN_MODEL, 400, "invalid_request_error"),
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
    with pytest.raises(NotImplementedError, match="later"):
        raise_for_error(error_result(1, "later", ErrorKind.NOT_SUPPORTED))
    for kind in (ErrorKind.CANCELLED, ErrorKind.UNAVAILABLE, ErrorKind.SERVER, ErrorKind.UNKNOWN_MODEL):
        with pytest.raises(EngineError) as info:
            raise_for_error(error_result(1, "down", kind))
        assert info.value.kind is kind


@pytest.mark.parametrize(
    ("exc", "status", "type_"),
    [
        (ValueError("bad field"), 400, "invalid_request_error"),
        (ContextOverflowError(9, 4), 400, "exceed_context_size_error"),
        (NotImplementedError("not built"), 501, "not_supported_error"),
        (UnsupportedMediaError("image input is not supported"), 500, "server_error"),  # llama-server's status
    ],
)
def test_a_request_refused_before_its_tasks_takes_the_same_table(exc: Exception, status: int, type_: str):
    err = failure_error(failure_of(exc))  # type: ignore[arg-type]
    assert (err.status, err.kind, str(err)) == (status, type_, str(exc))
    if isinstance(exc, ContextOverflowError):
        assert err.extra == {"n_prompt_tokens": 9, "n_ctx": 4}
