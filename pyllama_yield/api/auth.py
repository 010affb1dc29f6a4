"""What every route runs behind, a model server's and the router's: the API key check
(``--api-key``, as llama-server makes it: ``Authorization: Bearer KEY`` (or a bare key) or
``X-Api-Key: KEY``), and one answer for a refusal and for our own fault."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response

from .errors import ApiError, error_response

__all__ = ["authorized", "guarded"]

log = logging.getLogger("pyllama_yield.api")


def authorized(request: Request, keys: list[str]) -> bool:
    """Whether ``request`` may pass: no keys configured, or one of them given."""
    if not keys:
        return True
    auth = request.headers.get("authorization", "") or request.headers.get("x-api-key", "")
    return (auth[7:] if auth.startswith("Bearer ") else auth) in keys


async def guarded(
    request: Request,
    handler: Callable[[Request], Awaitable[Response]],
    keys: list[str] | None,
    refuse: Callable[[ApiError], Response] = error_response,
) -> Response:
    """``handler(request)`` once the API key passed (``keys`` None: a public route); a refusal
    (``ApiError``) answered by ``refuse`` (the error shape of the route's family), our own fault
    a 500 in llama-server's error shape with its traceback in the log."""
    if keys is not None and not authorized(request, keys):
        return refuse(ApiError("Invalid API Key", 401, "authentication_error"))
    try:
        return await handler(request)
    except ApiError as exc:
        return refuse(exc)
    except Exception as exc:
        log.exception("%s %s failed", request.method, request.url.path)
        return error_response(ApiError(f"{type(exc).__name__}: {exc}", 500, "server_error"))
