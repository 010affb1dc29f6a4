"""Anthropic Messages: ``POST /v1/messages`` and ``/v1/messages/count_tokens``.

A request becomes an OpenAI chat the way llama-server converts it (``system``, content blocks,
``tool_use`` / ``tool_result``, ``thinking``, tools with ``input_schema``, ``tool_choice``,
``stop_sequences``), then runs as a chat; the answer is shaped into content blocks (``thinking``,
``text``, ``tool_use``), streamed as Anthropic's events.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ..queue import Result
from ..server.chat_message import ChatChoices, MessageDelta
from ..server.results import CompletionFinal, CompletionResult, completion_step
from .app_state import AppState, json_body
from .chat import answer_with_events, chat_tasks, count_chat_tokens
from .errors import ApiError
from .json_out import JSONResponse
from .openai import answer_head


def _image(source: dict[str, Any]) -> dict[str, Any] | None:
    if source.get("type") == "base64":
        url = f"data:{source.get('media_type', 'image/jpeg')};base64,{source.get('data', '')}"
    elif source.get("type") == "url":
        url = source.get("url", "")
    else:
        return None
    return {"type": "image_url", "image_url": {"url": url}}


def _tool_result(block: dict[str, Any]) -> dict[str, Any]:
    content = block.get("content")
    if isinstance(content, list):
        parts = []
        for c in content:
            if c.get("type") == "text":
                parts.append({"type": "text", "text": c.get("text", "")})
            elif c.get("type") == "image" and (img := _image(c.get("source", {}))):
                parts.append(img)
        text_only = all(p["type"] == "text" for p in parts)
        content = "".join(p["text"] for p in parts) if text_only else parts
    elif not isinstance(content, str):
        content = ""
    return {"role": "tool", "tool_call_id": block.get("tool_use_id", ""), "content": content}


def _message(msg: dict[str, Any]) -> list[dict[str, Any]]:
    """One Anthropic message as OpenAI messages (its tool results follow it)."""
    content = msg.get("content")
    if "content" not in msg:
        return [] if msg.get("role") == "assistant" else [msg]
    if not isinstance(content, list):
        return [msg]
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    reasoning = ""
    for block in content:
        kind = block.get("type")
        if kind == "text":
            parts.append(block)
        elif kind == "thinking":
            reasoning += block.get("thinking", "")
        elif kind == "image" and (img := _image(block.get("source", {}))):
            parts.append(img)
        elif kind == "tool_use":
            arguments = json.dumps(block.get("input", {}))
            function = {"name": block.get("name", ""), "arguments": arguments}
            calls.append({"id": block.get("id", ""), "type": "function", "function": function})
        elif kind == "tool_result":
            results.append(_tool_result(block))
    out = []
    if parts or calls or reasoning:
        new: dict[str, Any] = {"role": msg.get("role", ""), "content": parts or ""}
        if calls:
            new["tool_calls"] = calls
        if reasoning:
            new["reasoning_content"] = reasoning
        out.append(new)
    return out + results


def to_openai(body: dict[str, Any]) -> dict[str, Any]:
    """llama-server's ``server_chat_convert_anthropic_to_oai``."""
    messages: list[dict[str, Any]] = []
    system = body.get("system")
    if isinstance(system, str):
        messages.append({"role": "system", "content": system})
    elif isinstance(system, list):
        text = "".join(b.get("text", "") for b in system if isinstance(b, dict) and b.get("type") == "text")
        messages.append({"role": "system", "content": text})
    if "messages" not in body:
        raise ApiError("'messages' is required")
    for msg in body["messages"] if isinstance(body["messages"], list) else []:
        messages += _message(msg) if isinstance(msg, dict) else [msg]
    oai: dict[str, Any] = {"messages": messages, "max_tokens": body.get("max_tokens", 4096)}
    if isinstance(body.get("tools"), list):
        if not all(isinstance(t, dict) for t in body["tools"]):
            raise ApiError("each of 'tools' must be an object")
        oai["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.get("name", ""),
                    "description": t.get("description", ""),
                    "parameters": t.get("input_schema", {}),
                },
            }
            for t in body["tools"]
        ]
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        kind = choice.get("type")
        if kind == "auto":
            oai["tool_choice"] = "auto"
        elif kind in ("any", "tool"):
            oai["tool_choice"] = "required"
    if "stop_sequences" in body:
        oai["stop"] = body["stop_sequences"]
    for key in ("temperature", "top_p", "top_k", "stream", "chat_template_kwargs"):
        if key in body:
            oai[key] = body[key]
    # llama-server's own request fields (seed, cache_prompt, n_probs, ...) pass through, as on the
    # OpenAI routes; Anthropic's structural ones never do
    for key, value in body.items():
        if key not in oai and key not in ANTHROPIC_FIELDS:
            oai[key] = value
    return oai


ANTHROPIC_FIELDS = {
    "system",
    "messages",
    "tools",
    "tool_choice",
    "stop_sequences",
    "max_tokens",
    "thinking",
    "metadata",
}


def _usage(p: CompletionResult) -> dict[str, int]:
    cached = p.n_prompt_tokens_cache
    return {"cache_read_input_tokens": cached, "input_tokens": p.tokens_evaluated - cached}


class MessagesAnswer:
    """The chat's answer as an Anthropic message, or its stream of events."""

    def __init__(self, state: AppState, parse: dict[str, Any]) -> None:
        self.id = answer_head(state, "msg_")["id"]
        self.model = state.model_name
        self.choices = ChatChoices(parse)  # one: Anthropic has no n
        self.blocks: dict[tuple[str, int], int] = {}  # (kind, tool index) -> content block index

    def _stop_reason(self, p: CompletionFinal) -> str:
        if p.stop_type not in ("eos", "word"):
            return "max_tokens"
        return "tool_use" if self.choices[p.index].called_tools else "end_turn"

    def message(self, p: CompletionFinal) -> dict[str, Any]:
        st = self.choices[p.index]
        st.update(p.content, is_partial=False)
        m = st.message
        blocks: list[dict[str, Any]] = []
        if m.reasoning:
            blocks.append({"type": "thinking", "thinking": m.reasoning, "signature": ""})
        if m.content:
            blocks.append({"type": "text", "text": m.content})
        for call in m.tool_calls:
            try:
                args = json.loads(call.arguments)
            except ValueError:
                args = {}
            blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": args})
        return {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "content": blocks,
            "model": self.model,
            "stop_reason": self._stop_reason(p),
            "stop_sequence": p.stopping_word or None,
            "usage": {**_usage(p), "output_tokens": p.tokens_predicted},
        }

    def _block(self, kind: str, i: int = 0) -> tuple[int, bool]:
        """The content block of ``kind`` (and tool ``i``): its index, and whether it is new."""
        key = (kind, i)
        if key in self.blocks:
            return self.blocks[key], False
        self.blocks[key] = len(self.blocks)
        return self.blocks[key], True

    @staticmethod
    def _event(name: str, **data: Any) -> dict[str, Any]:
        return {"event": name, "data": {"type": name, **data}}

    def chunks(self, r: Result) -> list[Any]:
        p = completion_step(r)
        first = p.index not in self.choices
        st = self.choices[p.index]
        out = []
        if first:
            head = {"id": self.id, "type": "message", "role": "assistant", "content": [],
                    "model": self.model, "stop_reason": None, "stop_sequence": None,
                    "usage": {**_usage(p), "output_tokens": 0}}  # fmt: skip
            out.append(self._event("message_start", message=head))
        for d in st.update(p.content, is_partial=not p.stop):
            out += self._delta_events(d)
        if isinstance(p, CompletionFinal):
            for (kind, _), index in sorted(self.blocks.items(), key=lambda kv: kv[1]):
                if kind == "thinking":
                    out.append(self._event("content_block_delta", index=index,
                                           delta={"type": "signature_delta", "signature": ""}))  # fmt: skip
                out.append(self._event("content_block_stop", index=index))
            delta = {"stop_reason": self._stop_reason(p), "stop_sequence": p.stopping_word or None}
            out.append(self._event("message_delta", delta=delta, usage={"output_tokens": p.tokens_predicted}))
            out.append(self._event("message_stop"))
        return out

    def _delta_events(self, d: MessageDelta) -> list[dict[str, Any]]:
        out = []
        if d.reasoning:
            index, new = self._block("thinking")
            if new:
                out.append(self._event("content_block_start", index=index,
                                       content_block={"type": "thinking", "thinking": ""}))  # fmt: skip
            out.append(self._event("content_block_delta", index=index,
                                   delta={"type": "thinking_delta", "thinking": d.reasoning}))  # fmt: skip
        if d.content:
            index, new = self._block("text")
            if new:
                out.append(self._event("content_block_start", index=index, content_block={"type": "text", "text": ""}))
            out.append(self._event("content_block_delta", index=index,
                                   delta={"type": "text_delta", "text": d.content}))  # fmt: skip
        if d.call is not None:
            index, new = self._block("tool_use", d.call_index)
            if new:
                block = {"type": "tool_use", "id": d.call.id, "name": d.call.name}
                out.append(self._event("content_block_start", index=index, content_block=block))
            if d.arguments:
                out.append(self._event("content_block_delta", index=index,
                                       delta={"type": "input_json_delta", "partial_json": d.arguments}))  # fmt: skip
        return out


async def messages(request: Request) -> Response:
    state: AppState = request.app.state.pyllama
    body = to_openai(await json_body(request))
    plan, tasks = await chat_tasks(request, state, body)
    shape = MessagesAnswer(state, plan.parse)
    return await answer_with_events(request, state, tasks, shape.chunks, shape.message)


async def count_tokens(request: Request) -> Response:
    state: AppState = request.app.state.pyllama
    return JSONResponse({"input_tokens": await count_chat_tokens(state, to_openai(await json_body(request)))})
