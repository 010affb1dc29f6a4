"""OpenAI's Files and Batches routes (``/v1/files``, ``/v1/batches``), as the official ``openai``
client calls them. A batch's lines run through this server's own routes at the last priority
(``batch/runner.py``); state and files live under the data folder (``--data-dir``), opened on first
use, or at start when it holds batches to resume. Each tenant (API key, see settings/keys.py)
sees only its own files and batches."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import Response

from ..batch import BatchRunner
from ..batch.lines import ENDPOINTS, read_input
from ..batch.store import FileRecord
from .app_state import json_body
from .auth import request_key
from .errors import ApiError
from .json_out import JSONResponse
from .schemas import BatchCreateRequest, parse

__all__ = ["ROUTES"]

FILE_PURPOSES = ("batch", "user_data", "assistants", "vision", "fine-tune", "evals")


def _batches(request: Request) -> tuple[BatchRunner, str]:
    """The runner (opened on first use) and the caller's tenant."""
    state = request.app.state.pyllama
    runner = state.batches.open(request.app, state.wait_attached)
    key = request_key(request)
    return runner, key.tenant if key else ""


def _page(data: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    """OpenAI's list shape."""
    first, last = (data[0]["id"], data[-1]["id"]) if data else (None, None)
    return {"object": "list", "data": data, "has_more": has_more, "first_id": first, "last_id": last}


def _not_found(what: str, ident: str) -> ApiError:
    return ApiError(f"No {what} found with id '{ident}'.", 404, "invalid_request_error")


async def upload_file(request: Request) -> Response:
    runner, tenant = _batches(request)
    try:
        form = await request.form()
    except Exception as exc:  # not multipart/form-data, or a malformed one
        raise ApiError(f"expected a multipart/form-data body with 'file' and 'purpose': {exc}") from None
    upload, purpose = form.get("file"), form.get("purpose")
    if not isinstance(upload, UploadFile):
        raise ApiError("'file' must be a file part of the form")
    if purpose not in FILE_PURPOSES:
        raise ApiError(f"'purpose' must be one of {', '.join(FILE_PURPOSES)}")
    data = await upload.read()
    record = await asyncio.to_thread(runner.store.add_file, upload.filename or "upload", purpose, data, tenant)
    return JSONResponse(record.json())


async def list_files(request: Request) -> Response:
    runner, tenant = _batches(request)
    files = await asyncio.to_thread(runner.store.files, tenant, request.query_params.get("purpose"))
    return JSONResponse(_page([f.json() for f in files], has_more=False))


async def _own_file(request: Request) -> tuple[BatchRunner, FileRecord]:
    """The runner and the file the path names, if the caller's tenant has it (else a 404)."""
    runner, tenant = _batches(request)
    file_id = request.path_params["file_id"]
    record = await asyncio.to_thread(runner.store.file, file_id, tenant)
    if record is None:
        raise _not_found("file", file_id)
    return runner, record


async def retrieve_file(request: Request) -> Response:
    _, record = await _own_file(request)
    return JSONResponse(record.json())


async def file_content(request: Request) -> Response:
    runner, record = await _own_file(request)
    return Response(await asyncio.to_thread(runner.store.file_content, record.id), media_type="application/jsonl")


async def delete_file(request: Request) -> Response:
    runner, record = await _own_file(request)
    await asyncio.to_thread(runner.store.delete_file, record.id, record.tenant)
    return JSONResponse({"id": record.id, "object": "file", "deleted": True})


async def create_batch(request: Request) -> Response:
    runner, tenant = _batches(request)
    req = parse(BatchCreateRequest, await json_body(request))
    if req.endpoint not in ENDPOINTS:
        raise ApiError(f"endpoint must be one of {', '.join(ENDPOINTS)}, not {req.endpoint!r}")
    if req.completion_window != "24h":
        raise ApiError("completion_window must be '24h'")
    store = runner.store
    if await asyncio.to_thread(store.file, req.input_file_id, tenant) is None:
        raise _not_found("file", req.input_file_id)
    data = await asyncio.to_thread(store.file_content, req.input_file_id)
    try:
        lines = read_input(data, req.endpoint)
    except ValueError as exc:
        raise ApiError(str(exc)) from None
    create = store.create_batch
    batch_id = await asyncio.to_thread(create, req.endpoint, req.input_file_id, "24h", tenant, req.metadata, lines)
    runner.wake()
    return JSONResponse(await _batch_json(runner, batch_id, tenant))


async def _batch_json(runner: BatchRunner, batch_id: str, tenant: str) -> dict[str, Any]:
    """The batch as OpenAI shows it, if the tenant has it (else a 404)."""
    record = await asyncio.to_thread(runner.store.batch, batch_id, tenant)
    if record is None:
        raise _not_found("batch", batch_id)
    return record.json()


async def retrieve_batch(request: Request) -> Response:
    runner, tenant = _batches(request)
    return JSONResponse(await _batch_json(runner, request.path_params["batch_id"], tenant))


async def list_batches(request: Request) -> Response:
    runner, tenant = _batches(request)
    try:
        limit = min(100, max(1, int(request.query_params.get("limit", "20"))))
    except ValueError:
        raise ApiError("limit must be an integer") from None
    after = request.query_params.get("after")
    found = await asyncio.to_thread(runner.store.batches, tenant, limit + 1, after)
    return JSONResponse(_page([b.json() for b in found[:limit]], has_more=len(found) > limit))


async def cancel_batch(request: Request) -> Response:
    runner, tenant = _batches(request)
    batch_id = request.path_params["batch_id"]
    status = (await _batch_json(runner, batch_id, tenant))["status"]
    if status in ("in_progress", "validating"):
        runner.cancel(batch_id)
    elif status not in ("cancelling", "cancelled"):
        raise ApiError(f"Cannot cancel a batch that is {status}.", 409, "invalid_request_error")
    return JSONResponse(await _batch_json(runner, batch_id, tenant))


ROUTES: list[tuple[str, Callable[[Request], Awaitable[Response]], list[str]]] = [
    ("/v1/files", upload_file, ["POST"]),
    ("/v1/files", list_files, ["GET"]),
    ("/v1/files/{file_id}", retrieve_file, ["GET"]),
    ("/v1/files/{file_id}", delete_file, ["DELETE"]),
    ("/v1/files/{file_id}/content", file_content, ["GET"]),
    ("/v1/batches", create_batch, ["POST"]),
    ("/v1/batches", list_batches, ["GET"]),
    ("/v1/batches/{batch_id}", retrieve_batch, ["GET"]),
    ("/v1/batches/{batch_id}/cancel", cancel_batch, ["POST"]),
]
