"""A batch's input file read into lines (each a request, or the reason it is not one), and the
output and error files written from the answers, in OpenAI's shapes."""

from __future__ import annotations

import json
import secrets
from typing import Any

from .store import LineRecord

__all__ = ["ENDPOINTS", "MAX_LINES", "error_file", "output_file", "read_input"]

ENDPOINTS = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings")
MAX_LINES = 50_000  # OpenAI's limit of requests per batch


def read_input(data: bytes, endpoint: str) -> list[LineRecord]:
    """Every non-empty line of ``data``: a request for ``endpoint``, or why it is not one (it goes
    to the error file; the rest run)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"the input file is not UTF-8: {exc}") from None
    lines: list[LineRecord] = []
    seen: set[str] = set()
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        request, custom_id, error = _request(raw, endpoint)
        if custom_id is not None and error is None:
            if custom_id in seen:
                request, error = None, f"custom_id {custom_id!r} is used by an earlier line"
            seen.add(custom_id)
        lines.append(LineRecord(n, custom_id, request, error, None, None, request is None))
    if not lines:
        raise ValueError("the input file has no requests")
    if len(lines) > MAX_LINES:
        raise ValueError(f"the input file has {len(lines)} requests, more than {MAX_LINES}")
    return lines


def _request(raw: str, endpoint: str) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """(request, custom_id, error) of one line."""
    try:
        line = json.loads(raw)
    except json.JSONDecodeError as exc:
        return None, None, f"not JSON: {exc.msg} at column {exc.colno}"
    if not isinstance(line, dict):
        return None, None, "a line must be a JSON object"
    custom_id = line.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id:
        return None, None, "custom_id must be a non-empty string"
    if line.get("method") != "POST":
        return None, custom_id, 'method must be "POST"'
    if line.get("url") != endpoint:
        return None, custom_id, f"url must be the batch's endpoint, {endpoint}"
    if not isinstance(line.get("body"), dict):
        return None, custom_id, "body must be a JSON object"
    return {"body": line["body"]}, custom_id, None


def output_file(lines: list[LineRecord]) -> bytes:
    """The answered lines that succeeded, in input order."""
    return _jsonl(_answer(ln) for ln in lines if ln.done and ln.status_code is not None and 200 <= ln.status_code < 300)


def error_file(lines: list[LineRecord]) -> bytes:
    """Malformed lines (with their reason) and answers that were errors, in input order."""
    out = []
    for ln in lines:
        if ln.request is None:
            error = {"code": "invalid_request", "message": f"line {ln.n}: {ln.error}", "line": ln.n}
            out.append({"id": _id("batch_req_"), "custom_id": ln.custom_id, "response": None, "error": error})
        elif ln.done and ln.status_code is not None and not 200 <= ln.status_code < 300:
            out.append(_answer(ln))
    return _jsonl(out)


def _answer(ln: LineRecord) -> dict[str, Any]:
    response = {"status_code": ln.status_code, "request_id": _id("req_"), "body": ln.answer}
    return {"id": _id("batch_req_"), "custom_id": ln.custom_id, "response": response, "error": None}


def _id(prefix: str) -> str:
    return prefix + secrets.token_hex(12)


def _jsonl(items: Any) -> bytes:
    return "".join(json.dumps(item) + "\n" for item in items).encode()
