"""Errors in llama-server's (and OpenAI's) shape: ``{"error": {"code", "message", "type"}}``."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from ..queue import Result

__all__ = ["ApiError", "error_json", "error_response", "result_error"]


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


def result_error(result: Result) -> ApiError:
    """An error result from the server context as the HTTP error it stands for."""
    p = dict(result.payload or {})
    code = p.pop("code", 500)
    message = p.pop("error", "request failed")
    kind = p.pop("type", "invalid_request_error" if code < 500 else "server_error")
    return ApiError(message, code, kind, **p)
