"""What every route needs: the server context, the bridge to it, and the request body."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from ..server import ServerContext
from ..settings import ServerSettings
from .bridge import Bridge
from .errors import ApiError


@dataclass
class AppState:
    srv: ServerContext
    bridge: Bridge
    settings: ServerSettings

    @property
    def model_name(self) -> str:
        return self.srv.info["model"]

    @property
    def fingerprint(self) -> str:
        return self.srv.info["system_fingerprint"]


async def json_body(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ApiError(f"malformed JSON body: {exc}") from exc
    if not isinstance(body, dict):
        raise ApiError("the JSON body must be an object")
    return body
