"""``/v1/completions``' request mapped onto llama-server's fields as llama-server maps them.

Every other request field is read by ``server.params.CompletionParams`` (the native fields are
accepted on the OpenAI routes too). Chats take the engine's one chat path
(``server/chat_request.py``).
"""

from __future__ import annotations

from typing import Any

from .errors import ApiError

__all__ = ["completion_to_llama"]


def completion_to_llama(body: dict[str, Any]) -> dict[str, Any]:
    """``/v1/completions`` → llama-server fields (``oaicompat_completion_params_parse``)."""
    if "prompt" not in body:
        raise ApiError('"prompt" is required')
    if body.get("echo") is True:
        raise ApiError("Only no echo is supported")
    for name in ("best_of", "suffix"):
        if name in body:
            raise ApiError(f"Unsupported param: {name}")
    body = dict(body)
    if isinstance(body.get("stop"), str):
        body["stop"] = [body["stop"]]
    return body
