"""``GET /openapi.json``: an OpenAPI 3.1 description of the routes, generated from the request
models of ``schemas.py`` (llama-server publishes none; vLLM's and llama-cpp-python's servers do),
so clients can generate code and tools can validate against it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema
from starlette.requests import Request
from starlette.responses import Response

from .. import __version__
from .json_out import JSONResponse
from .schemas import REQUEST_MODELS

__all__ = ["openapi_document"]

REF = "#/components/schemas/{model}"

ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "type"],
            "properties": {"code": {"type": "integer"}, "message": {"type": "string"}, "type": {"type": "string"}},
        }
    },
}

OLLAMA_ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {"error": {"type": "string"}},
}

_ERROR_RESPONSE = {"content": {"application/json": {"schema": {"$ref": REF.format(model="Error")}}}}
_OLLAMA_ERROR_RESPONSE = {"content": {"application/json": {"schema": {"$ref": REF.format(model="OllamaError")}}}}


# a body that is not ours to describe: the proxied request's
OPAQUE_BODIES = {"/cors-proxy"}
# POST routes that read no body
BODILESS_POSTS = {"/v1/batches/{batch_id}/cancel"}
# uploads (OpenAI's Files API)
FORM_BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("/v1/files", "POST"): {
        "type": "object",
        "required": ["file", "purpose"],
        "properties": {"file": {"type": "string", "format": "binary"}, "purpose": {"type": "string"}},
    }
}
_CONVERSATION = ("conv_id", True, {"type": "string"})
_PAGE = (("limit", False, {"type": "integer"}), ("after", False, {"type": "string"}))
QUERY_PARAMS: dict[tuple[str, str], tuple[tuple[str, bool, dict[str, Any]], ...]] = {
    ("/slots/{id_slot}", "POST"): (("action", True, {"enum": ["save", "restore", "erase"]}),),
    ("/v1/stream", "GET"): (_CONVERSATION, ("from", False, {"type": "integer", "minimum": 0})),
    ("/v1/stream", "DELETE"): (_CONVERSATION,),
    ("/cors-proxy", "GET"): (("url", True, {"type": "string"}),),
    ("/v1/files", "GET"): (("purpose", False, {"type": "string"}),),
    ("/v1/batches", "GET"): _PAGE,
    ("/cors-proxy", "POST"): (("url", True, {"type": "string"}),),
}


def _operation(path: str, method: str, public: bool, body: dict[str, Any] | None) -> dict[str, Any]:
    name = path.strip("/").replace("/", "_").replace("{", "").replace("}", "") or "index"
    error = _OLLAMA_ERROR_RESPONSE if path.startswith("/api/") else _ERROR_RESPONSE  # Ollama's shape there
    op: dict[str, Any] = {
        "operationId": f"{method.lower()}_{name}",
        "responses": {
            "200": {"description": "OK (a JSON object, or a stream: server-sent events, or NDJSON on /api/)"},
            "4XX": {"description": "A bad request, in the error shape", **error},
            "5XX": {"description": "Not supported by this server's flags, busy, or our fault", **error},
        },
    }
    if not public:
        op["security"] = [{"apiKey": []}, {}]  # only when the server has --api-key
    if body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    elif (path, method) in FORM_BODIES:
        op["requestBody"] = {
            "required": True,
            "content": {"multipart/form-data": {"schema": FORM_BODIES[path, method]}},
        }
    elif path in OPAQUE_BODIES and method == "POST":
        op["requestBody"] = {"required": False, "content": {"application/octet-stream": {"schema": {}}}}
    params = [
        {"name": p, "in": "path", "required": True, "schema": {"type": "integer" if p == "id_slot" else "string"}}
        for p in _path_params(path)
    ]
    params += [
        {"name": name, "in": "query", "required": required, "schema": schema}
        for name, required, schema in QUERY_PARAMS.get((path, method), ())
    ]
    if params:
        op["parameters"] = params
    return op


def _path_params(path: str) -> list[str]:
    return [part[1:-1] for part in path.split("/") if part.startswith("{") and part.endswith("}")]


def openapi_document(routes: Iterable[tuple[str, str, bool]]) -> dict[str, Any]:
    """The description of ``routes`` (path, method, public): every POST route with its request
    model, every model once under ``components.schemas``. Do not modify the answer: it is shared."""
    return _document(tuple(routes))


@functools.cache
def _document(routes: tuple[tuple[str, str, bool], ...]) -> dict[str, Any]:
    models: list[type[BaseModel]] = sorted(set(REQUEST_MODELS.values()), key=lambda m: m.__name__)
    refs, defs = models_json_schema([(m, "validation") for m in models], ref_template=REF)
    schemas: dict[str, Any] = {**defs.get("$defs", {}), "Error": ERROR_SCHEMA, "OllamaError": OLLAMA_ERROR_SCHEMA}
    paths: dict[str, dict[str, Any]] = {}
    for path, method, public in routes:
        model = REQUEST_MODELS.get((path, method))
        body = refs[(model, "validation")] if model is not None else None
        paths.setdefault(path, {})[method.lower()] = _operation(path, method, public, body)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "pyllama-yield",
            "version": __version__,
            "description": "llama-server's HTTP API (its native, OpenAI, Anthropic and Responses routes), and Ollama's",
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"apiKey": {"type": "http", "scheme": "bearer"}},
        },
    }


async def openapi_json(request: Request) -> Response:
    """Built on the first request for it (every model's schema takes tens of milliseconds, which
    start-up need not pay), then kept (``openapi_document`` is cached by its routes)."""
    return JSONResponse(openapi_document(request.app.state.pyllama_routes))
