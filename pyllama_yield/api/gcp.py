"""Google Cloud Vertex AI prediction protocol, as llama-server serves it when ``AIP_MODE=PREDICTION``:
``POST $AIP_PREDICT_ROUTE`` (default ``/predict``) with ``{"instances": [...]}``, each instance a
request body for one of our POST routes named by ``@requestFormat`` (``chatCompletions`` or the
path itself); answered as ``{"predictions": [...]}``, one answer or error per instance.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message

from .app_state import json_value
from .errors import ApiError, error_json
from .json_out import JSONResponse

MAX_INSTANCES = 128


def enabled() -> bool:
    return os.environ.get("AIP_MODE", "") == "PREDICTION"


def predict_route() -> str:
    return os.environ.get("AIP_PREDICT_ROUTE") or "/predict"


def health_route() -> str | None:
    return os.environ.get("AIP_HEALTH_ROUTE") or None


def port(default: int) -> int:
    return int(os.environ.get("AIP_HTTP_PORT", default)) if enabled() else default


def gcp_name(path: str) -> str:
    """``/v1/chat/completions`` → ``chatCompletions`` (llama-server's ``path_to_gcp_format``)."""
    path = path.removeprefix("/v1").lstrip("/").split("{")[0]
    return re.sub(r"[/_-]+(.)", lambda m: m.group(1).upper(), path).rstrip("/_-")


def make_predict(routes: dict[str, Any]) -> Any:
    """The predict handler over ``routes`` (path → handler of a POST route)."""
    by_name: dict[str, Callable[[Request], Awaitable[Response]]] = {}
    for path, handler in routes.items():
        by_name.setdefault(gcp_name(path), handler)
        by_name.setdefault(path, handler)

    async def one(request: Request, instance: Any) -> Any:
        if not isinstance(instance, dict):
            return {"error": error_json(ApiError("each instance must be a JSON object"))}
        fmt = instance.get("@requestFormat")
        if not isinstance(fmt, str):
            return {"error": error_json(ApiError("each instance must include a string @requestFormat"))}
        if fmt not in by_name:
            return {"error": error_json(ApiError(f"no handler registered for @requestFormat: {fmt}"))}
        payload = {k: v for k, v in instance.items() if k != "@requestFormat"}
        if "stream" in payload:
            payload["stream"] = False  # no streaming through predict
        body = json.dumps(payload).encode()

        sent = False

        async def receive() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await request.receive()  # after the body: the real client's messages (disconnect)

        inner = Request({**request.scope, "method": "POST"}, receive)
        response: Response = await by_name[fmt](inner)
        return json.loads(bytes(response.body)) if response.body else None

    async def predict(request: Request) -> Response:
        data = await json_value(request)  # within --max-body-size, as every body-reading route
        if not isinstance(data, dict):
            raise ApiError("request body must be a JSON object")
        instances = data.get("instances")
        if not isinstance(instances, list):
            raise ApiError("request body must include an array field named instances")
        if len(instances) > MAX_INSTANCES:
            raise ApiError(f"instances array exceeds maximum size of {MAX_INSTANCES}")
        predictions = await asyncio.gather(*(one(request, i) for i in instances))
        return JSONResponse({"predictions": list(predictions)})

    return predict
