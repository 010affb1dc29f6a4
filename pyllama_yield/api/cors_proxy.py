"""``/cors-proxy?url=...`` (``--ui-mcp-proxy``): the web page reaches MCP servers that send no CORS
headers through this server, as llama-server lets it.

Only headers the page names explicitly travel to the target: ``X-Llama-Server-Proxy-Header-<Name>``
becomes ``<Name>``; the caller's own credentials (``Authorization``, cookies, API keys) never do.
The answer streams back with the target's status and headers, less those that would be duplicated
or wrong once re-framed here (length, transfer encoding, CORS).
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit, urlunsplit

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from .app_state import AppState, read_body
from .errors import ApiError
from .json_out import JSONResponse

__all__ = ["cors_proxy", "feature_disabled"]

log = logging.getLogger("pyllama_yield.api")

PROXY_HEADER_PREFIX = "x-llama-server-proxy-header-"
TIMEOUT_S = 600  # llama-server's: an MCP call may take minutes
# never sent on: recomputed by the client for the body it really sends
REQUEST_HEADERS_DROPPED = {"accept-encoding", "transfer-encoding", "content-length", "host"}
# never sent back: re-framed here, or added by our own CORS layer
RESPONSE_HEADERS_DROPPED = {"server", "transfer-encoding", "content-length", "keep-alive", "content-encoding"}


async def feature_disabled(request: Request) -> Response:
    """What llama-server answers on a route whose flag is off (``/cors-proxy``, ``/tools``)."""
    error = {"code": 403, "message": "this feature is disabled", "type": "feature_disabled"}  # code: ours
    return JSONResponse({"error": error}, 403)


def target_url(url: str) -> str:
    """The proxied URL, checked in llama-server's order (500 ``server_error`` otherwise)."""
    scheme, sep, _ = url.partition("://")
    if not sep:
        raise ApiError("invalid URL: no scheme", 500, "server_error")
    if scheme not in ("http", "https"):
        raise ApiError(f"unsupported URL scheme: {scheme}", 500, "server_error")
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError as exc:
        raise ApiError(f"invalid target URL: {exc}", 500, "server_error") from None
    if not host:
        raise ApiError("invalid target URL: missing host", 500, "server_error")
    if parts.password:
        raise ApiError("authentication in target URL is not supported", 500, "server_error")
    return urlunsplit(parts._replace(path=parts.path or "/"))


def forwarded_headers(request: Request) -> dict[str, str]:
    """The ``X-Llama-Server-Proxy-Header-*`` headers, renamed; nothing else of the caller's."""
    out = {}
    for key, value in request.headers.items():
        name = key[len(PROXY_HEADER_PREFIX) :] if key.lower().startswith(PROXY_HEADER_PREFIX) else ""
        if name and name.lower() not in REQUEST_HEADERS_DROPPED:
            out[name] = value
    return out


async def cors_proxy(request: Request) -> Response:
    import httpx

    state: AppState = request.app.state.pyllama
    if not state.settings.mcp_proxy:
        return await feature_disabled(request)
    url = target_url(request.query_params.get("url", ""))
    body = await read_body(request, state.settings.max_body_size) if request.method == "POST" else None
    log.info("proxying %s request to %s", request.method, url)
    client = httpx.AsyncClient(follow_redirects=True, timeout=TIMEOUT_S)
    try:
        upstream = await client.send(
            client.build_request(request.method, url, headers=forwarded_headers(request), content=body), stream=True
        )
    except httpx.HTTPError as exc:
        await client.aclose()
        return Response(f"proxy error: {exc}", 500, media_type="text/plain")
    headers = {
        k: v
        for k, v in upstream.headers.items()
        if k.lower() not in RESPONSE_HEADERS_DROPPED and not k.lower().startswith("access-control-")
    }

    async def close() -> None:
        await upstream.aclose()
        await client.aclose()

    if upstream.status_code in (204, 304) or request.method == "HEAD":  # no body may follow these
        await close()
        return Response(status_code=upstream.status_code, headers=headers)
    # decoded bytes: Content-Encoding is not sent back
    return StreamingResponse(upstream.aiter_bytes(), upstream.status_code, headers, background=BackgroundTask(close))
