"""Errors in llama-server's (and OpenAI's) shape: ``{"error": {"code", "message", "type"}}``.

The one place an engine error kind becomes an HTTP status and llama-server's error type."""

from __future__ import annotations

from typing import Any

from ..queue import Result
from ..server.errors import EngineFailure, ErrorKind
from ..server.results import expect
from .json_out import JSONResponse

__all__ = ["ApiError", "error_json", "error_response", "failure_error", "result_error"]

# an engine error kind -> (HTTP status, llama-server's error type)
HTTP_ERRORS: dict[ErrorKind, tuple[int, str]] = {
    ErrorKind.INVALID_REQUEST: (400, "invalid_request_error"),
    ErrorKind.EXCEED_CONTEXT: (400, "exceed_context_size_error"),
    ErrorKind.CANCELLED: (499, "invalid_request_error"),  # nginx's "client closed request", as llama-server
    ErrorKind.UNAVAILABLE: (503, "unavailable_error"),
    ErrorKind.NOT_SUPPORTED: (501, "not_supported_error"),
    ErrorKind.UNKNOWN_MODEL: (400, "invalid_request_error"),  # llama-server's router; Ollama's routes: 404
    ErrorKind.SERVER: (500, "server_error"),
}


class ApiError(Exception):
    def __init__(
        self,
        message: str,
        status: int = 400,
        kind: str = "invalid_request_error",
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.headers = headers  # e.g. Retry-After on a 503
        self.extra = extra  # e.g. n_prompt_tokens and n_ctx of an exceed_context_size_error


def error_json(exc: ApiError) -> dict[str, Any]:
    return {"code": exc.status, "message": str(exc), "type": exc.kind, **exc.extra}


def error_response(exc: ApiError) -> JSONResponse:
    return JSONResponse({"error": error_json(exc)}, status_code=exc.status, headers=exc.headers)


def failure_error(failure: EngineFailure) -> ApiError:
    """An engine failure as the HTTP error it stands for."""
    status, kind = HTTP_ERRORS[failure.kind]
    return ApiError(failure.message, status, kind, **failure.details)


def result_error(result: Result) -> ApiError:
    """An error result from the server context as the HTTP error it stands for."""
    return failure_error(expect(result, EngineFailure))
