"""OpenAI request shapes, mapped onto llama-server's fields as llama-server maps them.

Every other request field is read by ``server.params.CompletionParams`` (the native fields are
accepted on the OpenAI routes too); this module holds only what differs: the chat messages,
``response_format``, OpenAI's ``logprobs``/``top_logprobs``, and the fields llama-server refuses.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from ..server.chat import openai_chat_fields
from .errors import ApiError

__all__ = ["ChatRequest", "chat_to_llama", "completion_to_llama"]


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str
    text: str | None = None


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[ContentPart] | None = None
    tool_calls: list[dict[str, Any]] | None = None
    name: str | None = None

    @field_validator("content", mode="before")
    @classmethod
    def _string_or_parts(cls, v: Any) -> Any:
        if v is not None and not isinstance(v, (str, list)):
            raise ValueError("Expected 'content' to be a string or an array")
        return v


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    messages: list[Message]

    @classmethod
    def parse(cls, body: dict[str, Any], media: bool = False) -> ChatRequest:
        """``media``: the model takes images/audio (a projector is loaded)."""
        if "messages" not in body:
            raise ApiError("'messages' is required")
        if not isinstance(body["messages"], list):
            raise ApiError("Expected 'messages' to be an array")
        for msg in body["messages"]:
            if not isinstance(msg, dict):
                raise ApiError("each message must be an object")
            role = msg.get("role")
            if role != "assistant" and "content" not in msg:
                raise ApiError("All non-assistant messages must contain 'content'")
            if role == "assistant" and "content" not in msg and "tool_calls" not in msg:
                raise ApiError("Assistant message must contain either 'content' or 'tool_calls'!")
            if isinstance(msg.get("content"), list):
                _check_parts(msg["content"], media)
        try:
            return cls.model_validate({"messages": body["messages"]})
        except ValidationError as exc:
            raise ApiError("; ".join(e["msg"] for e in exc.errors())) from None


# media this server cannot take (no multimodal projector): llama-server's words and status
_MEDIA = {"image_url": "image", "input_audio": "audio", "input_video": "video", "video_url": "video"}


def _check_parts(parts: list[Any], media: bool) -> None:
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if not isinstance(kind, str):
            raise ApiError("content[].type must be a string")
        if media and kind in ("image_url", "input_audio"):  # the projector says which it takes
            continue
        if kind in _MEDIA:
            raise ApiError(
                f"{_MEDIA[kind]} input is not supported - hint: if this is unexpected, "
                "you may need to provide the mmproj",
                500,
                "server_error",
            )
        if kind not in ("text", "input_text"):
            raise ApiError("unsupported content[].type")


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


def chat_to_llama(body: dict[str, Any]) -> dict[str, Any]:
    """``/v1/chat/completions`` → llama-server fields (``oaicompat_chat_params_parse``), the prompt aside."""
    try:
        return openai_chat_fields(body)
    except ValueError as exc:
        raise ApiError(str(exc)) from None
