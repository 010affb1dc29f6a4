"""What every route runs behind, a model server's and the router's: the API key check
(``--api-key``, as llama-server makes it: ``Authorization: Bearer KEY`` (or a bare key) or
``X-Api-Key: KEY``), and one answer for a refusal and for our own fault."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response

from ..server.params import PRIORITY_LIMIT
from ..settings.keys import ApiKey, KeyRing
from .errors import ApiError, error_response

__all__ = ["INTERNAL_HEADER", "TENANT_HEADER", "authorized", "guarded", "request_key"]

# the batch runner's requests into this server carry the key ring's internal secret and the
# batch's tenant; they pass as that tenant's, at the last priority
INTERNAL_HEADER = "x-pyllama-internal"
TENANT_HEADER = "x-pyllama-tenant"


log = logging.getLogger("pyllama_yield.api")


def authorized(request: Request, keys: KeyRing) -> bool:
    """Whether ``request`` may pass: no keys configured, or one of them given (which the request
    keeps: :func:`request_key`)."""
    internal = request.headers.get(INTERNAL_HEADER)
    if internal is not None and secrets.compare_digest(internal.encode(), keys.internal.encode()):
        tenant = request.headers.get(TENANT_HEADER, "")
        request.state.api_key = ApiKey("", tenant, priority=PRIORITY_LIMIT)
        return True
    if not keys:
        return True
    auth = request.headers.get("authorization", "") or request.headers.get("x-api-key", "")
    key = keys.match(auth[7:] if auth.startswith("Bearer ") else auth)
    request.state.api_key = key
    return key is not None


def request_key(request: Request) -> ApiKey | None:
    """The API key a request passed with (None when the server takes any request)."""
    key = getattr(request.state, "api_key", None)
    return key if isinstance(key, ApiKey) else None


async def guarded(
    request: Request,
    handler: Callable[[Request], Awaitable[Response]],
    keys: KeyRing | None,
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
