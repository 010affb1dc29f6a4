"""The one chat path, transport-free: an OpenAI chat request in, the completion tasks and how to read
their answer back out. The HTTP routes (OpenAI chat, Anthropic messages, OpenAI responses, apply-
template, token counts) and the in-process ``Llama`` all go through :class:`ChatPlanner`; each only
translates its own shape into an OpenAI chat body first.

The steps, in llama-server's order (``oaicompat_chat_params_parse``): the OpenAI fields become
llama-server's (``chat.openai_chat_fields``), the request model validates the messages, media
parts become markers with their files aside, the template renders the prompt (``chat.Chat``), and
the task builder tokenizes it into tasks.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, StrictBool, StrictInt, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from ..mtmd import Projector
from .chat import Chat, openai_chat_fields
from .errors import ErrorKind, RequestError
from .media import chat_media
from .sampling import schema_or_any_object
from .task import CompletionTask
from .task_builder import TaskBuilder

__all__ = [
    "ChatMessage",
    "ChatPlan",
    "ChatPlanner",
    "ChatRequest",
    "ContentPart",
    "UnsupportedMediaError",
]

# media kinds a server without a projector refuses (llama-server's words, and its server_error kind)
_MEDIA = {"image_url": "image", "input_audio": "audio", "input_video": "video", "video_url": "video"}


class UnsupportedMediaError(RequestError):
    """A medium this server cannot take (no ``--mmproj``); llama-server answers it as a server error."""

    kind = ErrorKind.SERVER


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[ContentPart] | None = None
    tool_calls: list[dict[str, Any]] | None = None
    name: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _llama_server_rules(cls, msg: Any) -> Any:
        if not isinstance(msg, dict):
            raise PydanticCustomError("message", "each message must be an object")
        role = msg.get("role")
        if role != "assistant" and "content" not in msg:
            raise PydanticCustomError("message", "All non-assistant messages must contain 'content'")
        if role == "assistant" and "content" not in msg and "tool_calls" not in msg:
            raise PydanticCustomError("message", "Assistant message must contain either 'content' or 'tool_calls'!")
        content = msg.get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise PydanticCustomError("message", "Expected 'content' to be a string or an array")
        for part in content if isinstance(content, list) else []:
            kind = part.get("type") if isinstance(part, dict) else None
            if not isinstance(kind, str):
                raise PydanticCustomError("message", "content[].type must be a string")
            if kind not in ("text", "input_text", *_MEDIA):
                raise PydanticCustomError("message", "unsupported content[].type")
        return msg


class ChatRequest(BaseModel):
    """OpenAI's chat request, as ``/openapi.json`` shows it. At run time this model checks the
    messages (:func:`validate_messages`); the other fields are llama-server's completion fields,
    which ``CompletionParams`` reads when the tasks are made (its native fields are accepted too)."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    messages: list[ChatMessage]
    stream: StrictBool = False
    max_tokens: StrictInt | None = None
    max_completion_tokens: StrictInt | None = None
    temperature: float | None = None
    top_p: float | None = None
    n: StrictInt | None = None
    stop: str | list[str] | None = None
    seed: StrictInt | None = None
    logprobs: StrictBool | None = None
    top_logprobs: StrictInt | None = None
    response_format: dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: StrictBool | None = None
    reasoning_effort: str | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    add_generation_prompt: StrictBool = True
    continue_final_message: StrictBool = False

    @field_validator("messages", mode="before")
    @classmethod
    def _an_array(cls, v: Any) -> Any:
        if not isinstance(v, list):
            raise PydanticCustomError("messages", "Expected 'messages' to be an array")
        return v


def validate_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's messages, checked by :class:`ChatMessage` (``ValueError`` with llama-server's
    words otherwise), as the template reads them."""
    if "messages" not in body:
        raise ValueError("'messages' is required")
    try:
        messages = ChatRequest.model_validate({"messages": body["messages"]}).messages
    except ValidationError as exc:
        raise ValueError("; ".join(e["msg"] for e in exc.errors())) from None
    return [m.model_dump(exclude_unset=True) for m in messages]


@dataclass(frozen=True)
class ChatPlan:
    """A chat ready to run: its ``fields`` (llama-server's request, the rendered prompt in it), the
    output parser's parameters (``parse``, for ``chat.ChatState``) and, when a named function was
    forced through its schema, that function's name (the whole answer is its arguments)."""

    fields: dict[str, Any]
    parse: dict[str, Any]
    forced: str | None = None


class ChatPlanner:
    """Chats for one engine: its template, its task builder, its projector (media)."""

    def __init__(self, chat: Chat, tasks: TaskBuilder, projector: Projector | None, budget_message: str) -> None:
        """``budget_message``: what a chat forces before its thinking end tag when the reasoning
        budget is spent (``--reasoning-budget-message``)."""
        self._chat = chat
        self._tasks = tasks
        self._projector = projector
        self._budget_message = budget_message

    def plan(
        self,
        body: dict[str, Any],
        *,
        media_path: str | None = None,
        extra_stops: Sequence[str] = (),
        force_named_tool: bool = False,
    ) -> ChatPlan:
        """An OpenAI chat body → llama-server's request, the prompt rendered. ``media_path``: where
        ``file://`` media may be read from (None: nowhere); ``extra_stops``: stop strings the
        caller adds; ``force_named_tool``: a ``tool_choice`` naming a function the template has no
        tool-call format for constrains the whole answer to that function's arguments (as
        llama-cpp-python does). Raises ``ValueError`` (``UnsupportedMediaError``) for a bad request."""
        fields = openai_chat_fields(body)
        fields["messages"] = validate_messages(fields)
        files: list[bytes] = []
        _refuse_media(fields["messages"], taken=("image_url", "input_audio") if self._projector else ())
        if self._projector is not None:  # media parts become markers in the text, their files go with the prompt
            fields["messages"], files = chat_media(fields["messages"], self._projector.marker, media_path)
        forced = _forced_function(fields) if force_named_tool else None
        rendered, parse = self.render(fields)
        if forced is not None and "grammar" not in rendered:
            fields = {k: v for k, v in fields.items() if k not in ("tools", "tool_choice", "grammar")}
            fields["json_schema"] = schema_or_any_object(forced.get("parameters", {}))
            rendered, parse = self.render(fields)
        else:
            forced = None
        stops = [*(fields.get("stop") or []), *rendered.pop("additional_stops"), *extra_stops]
        request = {**fields, **rendered, "stop": stops}
        if files:
            request["prompt"] = {"prompt_string": request["prompt"], "multimodal_data": files}
        return ChatPlan(request, parse, forced["name"] if forced else None)

    def tasks(self, plan: ChatPlan) -> list[CompletionTask]:
        """The plan's tasks (one per choice), tokenized on the calling thread."""
        return self._tasks.make_tasks(plan.fields, plan.fields["prompt"])

    def count_tokens(self, body: dict[str, Any], media_path: str | None = None) -> int:
        """The KV cells the rendered chat's prompt takes (media included)."""
        return self._tasks.count_prompt_tokens(self.plan(body, media_path=media_path).fields["prompt"])

    @functools.cached_property
    def thinking(self) -> bool:
        """Whether the template has thinking tags (a reasoning model's): what a one-message chat
        renders with says."""
        try:
            rendered, _ = self._chat.render({"messages": [{"role": "user", "content": "x"}]})
        except ValueError:
            return False
        return "reasoning_budget_end_tags" in rendered

    def render(self, fields: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """llama-server fields whose messages are checked already → the template's fields (prompt,
        tool-call grammar, stops) and the output parser's parameters; see ``chat.Chat.render``."""
        rendered, parse = self._chat.render(fields)
        if "reasoning_budget_end_tags" in rendered and "reasoning_budget_message" not in rendered:
            # a chat always forces its end tag when the budget is spent, after the server's message
            rendered["reasoning_budget_message"] = self._budget_message
        return rendered, parse


def _refuse_media(messages: list[dict[str, Any]], taken: tuple[str, ...]) -> None:
    """Media parts of a kind this server does not take (``taken``: the projector's, if any)."""
    for msg in messages:
        content = msg.get("content")
        for part in content if isinstance(content, list) else []:
            kind = part.get("type")
            if kind in _MEDIA and kind not in taken:
                raise UnsupportedMediaError(
                    f"{_MEDIA[kind]} input is not supported - hint: if this is unexpected, "
                    "you may need to provide the mmproj"
                )


def _forced_function(fields: dict[str, Any]) -> dict[str, Any] | None:
    """The function a ``tool_choice`` names (``{"type": "function", "function": {"name": ...}}``)."""
    tool_choice = fields.get("tool_choice")
    if not isinstance(tool_choice, dict):
        return None
    name = (tool_choice.get("function") or {}).get("name")
    for tool in fields.get("tools") or []:
        if tool.get("type") == "function" and tool.get("function", {}).get("name") == name:
            return dict(tool["function"])
    raise ValueError(f"Tool choice '{name}' not found in tools.")
