"""JSON as the server writes it: orjson (an event's JSON in a tenth of the json module's time; a
stream writes one per token), compact and UTF-8 as llama-server writes it, NaN and infinities as
null as nlohmann's JSON writes them. What orjson refuses (a lone surrogate a client sent, an
integer beyond 64 bits) goes through the json module, ASCII-escaped, so it cannot break the UTF-8 of
a stream."""

from __future__ import annotations

import json
from typing import Any

import orjson
from starlette.responses import JSONResponse as StarletteJSONResponse

__all__ = ["JSONResponse", "dumps", "dumps_bytes"]

_OPTIONS = orjson.OPT_NON_STR_KEYS  # dicts keyed by token ids, as json.dumps takes them
_ascii = json.JSONEncoder(separators=(",", ":")).encode


def dumps_bytes(obj: Any) -> bytes:
    try:
        return orjson.dumps(obj, option=_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError is one; a type neither knows raises here again
        return _ascii(obj).encode()


def dumps(obj: Any) -> str:
    return dumps_bytes(obj).decode()


class JSONResponse(StarletteJSONResponse):
    """Starlette's, rendered by :func:`dumps_bytes`."""

    def render(self, content: Any) -> bytes:
        return dumps_bytes(content)
