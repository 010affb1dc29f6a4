"""OpenAI Responses requests (``/v1/responses``): their ``input`` read as a chat.

Only token counting (``/v1/responses/input_tokens``) is served so far; generation through the
Responses API is not built. The conversion follows llama-server's
``server_chat_convert_responses_to_chatcmpl`` for text: ``instructions`` become a system message,
a string ``input`` a user message, and input items with text content keep their roles.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .app_state import AppState, json_body
from .chat import render_chat
from .errors import ApiError

_TEXT_PARTS = {"input_text", "output_text", "text"}
_ROLES = {"user", "system", "developer", "assistant"}


def _message(item: Any) -> dict[str, Any]:
    if not isinstance(item, dict) or item.get("role") not in _ROLES:
        kind = item.get("type") if isinstance(item, dict) else type(item).__name__
        raise ApiError(f"unsupported Responses input item: {kind!r} (only text messages are supported)")
    content = item.get("content")
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") not in _TEXT_PARTS:
                raise ApiError("unsupported Responses content part (only text is supported)")
            texts.append(str(part.get("text", "")))
        content = "".join(texts)
    if not isinstance(content, str):
        raise ApiError("'content' must be a string or a list of text parts")
    role = "system" if item["role"] == "developer" else item["role"]
    return {"role": role, "content": content}


def responses_to_chat(body: dict[str, Any]) -> dict[str, Any]:
    """A Responses request body as a chat completions body."""
    if "input" not in body:
        raise ApiError("'input' is required")
    if body.get("previous_response_id"):
        raise ApiError("llama.cpp does not support 'previous_response_id'.")
    chat = {k: v for k, v in body.items() if k not in ("input", "instructions")}
    messages = []
    if "instructions" in body:
        messages.append({"role": "system", "content": str(body.get("instructions") or "")})
    given = body["input"]
    if isinstance(given, str):
        messages.append({"role": "user", "content": given})
    elif isinstance(given, list):
        messages += [_message(item) for item in given]
    else:
        raise ApiError("'input' must be a string or a list of input items")
    chat["messages"] = messages
    return chat


async def count_tokens(request: Request) -> Response:
    """``/v1/responses/input_tokens``: how many tokens the rendered input takes."""
    state: AppState = request.app.state.pyllama
    _, llama_body, _ = await render_chat(state, responses_to_chat(await json_body(request)))
    n = len(await state.bridge.run(state.srv.tokenize, llama_body["prompt"], True, True))
    return JSONResponse({"object": "response.input_tokens", "input_tokens": n})
