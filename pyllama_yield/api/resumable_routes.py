"""The routes of resumable streams: replay (``GET /v1/stream``), lookup, and the user's Stop.

The sessions themselves are in ``resumable.py``; see there for what a resumable stream is.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from .app_state import AppState, read_body
from .errors import ApiError
from .json_out import JSONResponse
from .resumable import OffsetLost, StreamSessions

__all__ = ["delete_stream", "get_stream", "lookup_streams"]


def _state(request: Request) -> AppState:
    state: AppState = request.app.state.pyllama
    return state


def _sessions(request: Request) -> StreamSessions:
    return _state(request).streams


def _conversation_id(request: Request) -> str:
    # the id travels in the query string: it may embed a model name with slashes (org/repo)
    cid = request.query_params.get("conv_id", "")
    if not cid:
        raise ApiError("Missing conversation id in path")
    return cid


async def get_stream(request: Request) -> Response:
    """``GET /v1/stream?conv_id=ID&from=N``: the session's events from byte N (default 0), then
    the live ones until the generation ends."""
    session = _sessions(request).get(_conversation_id(request))
    if session is None:
        raise ApiError("Stream not found or expired", 404, "not_found_error")
    try:
        offset = int(request.query_params.get("from") or 0)
        if offset < 0:
            raise ValueError(offset)
    except ValueError:
        raise ApiError("Invalid 'from' offset") from None
    if offset < session.dropped:
        raise ApiError("Stream offset lost, please restart")
    return StreamingResponse(
        _tolerant(session.read(offset)),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def _tolerant(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """A reader that fell behind the buffer mid-stream just ends (its client restarts)."""
    with contextlib.suppress(OffsetLost):
        async for chunk in chunks:
            yield chunk


async def lookup_streams(request: Request) -> Response:
    """``POST /v1/streams/lookup`` ``{"conversation_ids": [...]}``: those of the ids with a session."""
    try:
        body = json.loads(await read_body(request, _state(request).settings.max_body_size))
    except (ValueError, UnicodeDecodeError) as exc:
        error = {"code": 400, "message": f"invalid body: {exc}", "type": "invalid_request_error"}  # code: ours
        return JSONResponse({"error": error}, 400)
    ids = body.get("conversation_ids") if isinstance(body, dict) else None
    wanted = [i for i in ids if isinstance(i, str) and i] if isinstance(ids, list) else []
    return JSONResponse([s.describe() for s in _sessions(request).lookup(wanted)])


async def delete_stream(request: Request) -> Response:
    """``DELETE /v1/stream?conv_id=ID``: the user's Stop; 204 whether or not the session existed."""
    _sessions(request).stop(_conversation_id(request))
    return Response(status_code=204)
