"""The answer of a chat read back, typed: what the template's output parser (llama.cpp's
``common_chat_parse``) makes of the generated text, as it grows, and the changes between two
readings. Every front end renders from these (OpenAI, Anthropic, Responses, Ollama, ``Llama``);
none reads the parser's JSON."""

from __future__ import annotations

import secrets
import string
from dataclasses import dataclass, field
from typing import Any

from ..common import ChatParser

__all__ = [
    "ChatChoices",
    "ChatState",
    "MessageDelta",
    "ParsedMessage",
    "ToolCall",
    "chat_finish_reason",
    "message_deltas",
    "new_id",
]


def new_id() -> str:
    """32 random letters and digits: the ids of tool calls and of Responses items (as llama-server)."""
    return "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(32))


def chat_finish_reason(reason: str, called_tools: bool) -> str:
    """A chat answer that stopped having called tools finished for ``tool_calls`` (OpenAI's
    reason); any other reason stays (a length cut stays ``length``)."""
    return "tool_calls" if reason == "stop" and called_tools else reason


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text as the model wrote it (maybe cut short while streaming)

    def openai(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name, "arguments": self.arguments}, "id": self.id}


@dataclass(frozen=True)
class ParsedMessage:
    content: str = ""
    reasoning: str = ""
    tool_calls: tuple[ToolCall, ...] = ()

    def openai(self) -> dict[str, Any]:
        """OpenAI's assistant message (``content`` null when only tools were called)."""
        out: dict[str, Any] = {"role": "assistant", "content": self.content or (None if self.tool_calls else "")}
        if self.reasoning:
            out["reasoning_content"] = self.reasoning
        if self.tool_calls:
            out["tool_calls"] = [c.openai() for c in self.tool_calls]
        return out


@dataclass(frozen=True)
class MessageDelta:
    """One change of a message as it grows (llama.cpp's ``common_chat_msg_diff``): reasoning or
    content text added, or tool call ``call`` begun (``new_call``: its id and name are new) or
    its arguments grown."""

    reasoning: str = ""
    content: str = ""
    call: ToolCall | None = None  # the call as it is now (its full id and name)
    call_index: int = -1
    new_call: bool = False
    arguments: str = ""  # the arguments added

    def openai(self) -> dict[str, Any]:
        """OpenAI's streaming ``delta``."""
        if self.reasoning:
            return {"reasoning_content": self.reasoning}
        if self.call is None:
            return {"content": self.content}
        if self.new_call:
            function = {"name": self.call.name, "arguments": self.arguments}
            return {
                "tool_calls": [{"index": self.call_index, "id": self.call.id, "type": "function", "function": function}]
            }
        return {"tool_calls": [{"index": self.call_index, "function": {"arguments": self.arguments}}]}


def message_deltas(old: ParsedMessage, new: ParsedMessage) -> list[MessageDelta]:
    """The changes from one reading of a message to the next (``compute_diffs``): text that grew
    (a reading that rewrote earlier text is not streamed), then each tool call's start or growth."""
    out: list[MessageDelta] = []
    if new.reasoning != old.reasoning and new.reasoning.startswith(old.reasoning):
        out.append(MessageDelta(reasoning=new.reasoning[len(old.reasoning) :]))
    if new.content != old.content and new.content.startswith(old.content):
        out.append(MessageDelta(content=new.content[len(old.content) :]))
    for i, call in enumerate(new.tool_calls):
        prev = old.tool_calls[i] if i < len(old.tool_calls) else None
        if prev is None or prev.name != call.name:
            out.append(MessageDelta(call=call, call_index=i, new_call=True, arguments=call.arguments))
        elif call.arguments != prev.arguments and call.arguments.startswith(prev.arguments):
            out.append(MessageDelta(call=call, call_index=i, arguments=call.arguments[len(prev.arguments) :]))
    return out


class ChatState:
    """One choice's answer as it grows: the parsed message so far, tool-call ids kept stable."""

    def __init__(self, parse: dict[str, Any]) -> None:
        self.parse = parse
        self._parser: ChatParser | None = None  # made at the first text: an answer may have none
        self.text = ""
        self.message = ParsedMessage()
        self._ids: list[str] = []

    def update(self, more: str, is_partial: bool) -> list[MessageDelta]:
        """Add generated text; return the message's changes."""
        self.text += more
        try:
            if self._parser is None:
                self._parser = ChatParser(self.parse)
            parsed = self._parser.parse(self.text, is_partial)
        except ValueError:
            if is_partial:
                return []  # not parseable yet: wait for more
            parsed = {"content": self.text}
        new = self._read(parsed)
        deltas = message_deltas(self.message, new)
        self.message = new
        return deltas

    def _read(self, parsed: dict[str, Any]) -> ParsedMessage:
        """The parser's JSON (``common_chat_msg``) as a message; a call without an id gets one,
        the same one at every later reading."""
        calls = []
        for i, call in enumerate(parsed.get("tool_calls") or []):
            if len(self._ids) <= i:
                self._ids.append(call.get("id") or new_id())
            calls.append(ToolCall(self._ids[i], call.get("name", ""), call.get("arguments", "")))
        return ParsedMessage(parsed.get("content", ""), parsed.get("reasoning_content", ""), tuple(calls))

    @property
    def called_tools(self) -> bool:
        return bool(self.message.tool_calls)

    def finish_reason(self, reason: str) -> str:
        return chat_finish_reason(reason, self.called_tools)


@dataclass
class ChatChoices:
    """Each choice's :class:`ChatState` in one answer (a request's ``n`` choices, by index)."""

    parse: dict[str, Any]
    states: dict[int, ChatState] = field(default_factory=dict)

    def __contains__(self, index: int) -> bool:
        return index in self.states

    def __getitem__(self, index: int) -> ChatState:
        if index not in self.states:
            self.states[index] = ChatState(self.parse)
        return self.states[index]
