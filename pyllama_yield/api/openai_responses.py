"""OpenAI Responses (``/v1/responses``, ``/v1/responses/input_tokens``) over the chat path.

As llama-server does it (``server_chat_convert_responses_to_chatcmpl`` and the ``oai_resp``
result shapes): the request's ``input`` items become chat messages (``instructions`` a system
message, function calls and their outputs assistant tool calls and tool messages), the chat is
rendered and parsed by the model's template, and the answer comes back as ``output`` items
(reasoning, message, function calls), or streamed as named events. Unlike OpenAI's service there
is no stored state: ``previous_response_id`` is refused.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ..queue import Result
from ..server.chat_message import ChatChoices, MessageDelta, ParsedMessage, ToolCall, new_id
from ..server.results import CompletionFinal, PromptProgress, completion_step
from .app_state import AppState, json_body
from .chat import answer_with_events, chat_tasks, count_chat_tokens
from .errors import ApiError
from .json_out import JSONResponse

__all__ = ["count_tokens", "responses", "responses_to_chat"]


def _text_parts(content: Any, allowed: tuple[str, ...], what: str) -> list[dict[str, Any]]:
    """Content parts of an input item as chat parts; ``allowed``: the part types taken (text
    parts, and ``refusal`` where an output message may hold one), images always."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise ApiError(f"'content' of {what} must be a string or an array")
    parts = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "input_image":
            if "image_url" not in part:
                raise ApiError("'image_url' is required")
            parts.append({"type": "image_url", "image_url": {"url": part["image_url"]}})
        elif kind == "refusal" and "refusal" in allowed:
            parts.append({"type": "refusal", "refusal": str(part.get("refusal", ""))})
        elif kind in allowed:
            text = part.get("text")
            if not isinstance(text, str):
                raise ApiError(f"'{kind}' requires 'text'")
            parts.append({"type": "text", "text": text})
        elif kind == "input_file":
            raise ApiError("'input_file' is not supported by llamacpp at this moment")
        else:
            raise ApiError(f"'type' must be one of {', '.join(repr(k) for k in allowed)} in {what}")
    return parts


def _item_to_messages(item: Any, messages: list[dict[str, Any]]) -> None:
    """Append one ``input`` item to ``messages`` (an assistant item continues the previous
    assistant message, as llama-server merges them)."""
    if not isinstance(item, dict):
        raise ApiError("'input' items must be objects")
    prev = messages[-1] if messages and messages[-1].get("role") == "assistant" else None
    role, kind = item.get("role"), item.get("type")
    if role in ("user", "system", "developer"):
        parts = _text_parts(item.get("content"), ("input_text",), "an input message")
        messages.append({"role": role, "content": parts})
    elif role == "assistant" and kind in (None, "message"):
        parts = _text_parts(item.get("content"), ("output_text", "input_text", "refusal"), "an output message")
        if prev is not None and isinstance(prev.get("content"), list):
            prev["content"] += parts
        else:
            messages.append({"role": "assistant", "content": parts})
    elif kind == "function_call":
        if not all(isinstance(item.get(k), str) for k in ("call_id", "name", "arguments")):
            raise ApiError("a 'function_call' item needs 'call_id', 'name' and 'arguments' strings")
        call = {
            "type": "function",
            "id": item["call_id"],
            "function": {"name": item["name"], "arguments": item["arguments"]},
        }
        if prev is not None:
            prev.setdefault("tool_calls", []).append(call)
        else:
            messages.append({"role": "assistant", "tool_calls": [call]})
    elif kind == "function_call_output":
        output = item.get("output")
        if not isinstance(output, str):
            output = _text_parts(output, ("input_text",), "a function call output")
        messages.append({"role": "tool", "tool_call_id": item.get("call_id", ""), "content": output})
    elif kind == "reasoning":
        content = item.get("content")
        if not isinstance(content, list) or not content or not isinstance(content[0].get("text"), str):
            raise ApiError("a 'reasoning' item needs 'content' with a text part")
        if prev is not None:
            prev["reasoning_content"] = content[0]["text"]
        else:
            messages.append({"role": "assistant", "content": [], "reasoning_content": content[0]["text"]})
    else:
        raise ApiError("Cannot determine type of 'item'")


def responses_to_chat(body: dict[str, Any]) -> dict[str, Any]:
    """A Responses request body as a chat completions body."""
    if "input" not in body:
        raise ApiError("'input' is required")
    if body.get("previous_response_id"):
        raise ApiError("llama.cpp does not support 'previous_response_id'.")
    drop = ("input", "instructions", "tools", "max_output_tokens", "reasoning", "text")
    chat = {k: v for k, v in body.items() if k not in drop}
    messages: list[dict[str, Any]] = []
    if "instructions" in body:
        messages.append({"role": "system", "content": str(body.get("instructions") or "")})
    given = body["input"]
    if isinstance(given, str):
        messages.append({"role": "user", "content": given})
    elif isinstance(given, list):
        for item in given:
            _item_to_messages(item, messages)
    else:
        raise ApiError("'input' must be a string or array of objects")
    chat["messages"] = messages
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise ApiError("'tools' must be an array of objects")
        functions = [
            {"type": "function", "function": {"strict": True, **{k: v for k, v in t.items() if k != "type"}}}
            for t in tools
            if isinstance(t, dict) and t.get("type") == "function"
        ]
        if functions:
            chat["tools"] = functions
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    if isinstance(body.get("reasoning"), dict) and body["reasoning"].get("effort"):
        chat["reasoning_effort"] = body["reasoning"]["effort"]
    fmt = (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else None
    if isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema"):  # structured output
        schema = {k: v for k, v in fmt.items() if k != "type"}
        chat["response_format"] = {"type": fmt["type"], **({"json_schema": schema} if schema else {})}
    return chat


def _usage(p: CompletionFinal) -> dict[str, Any]:
    n_in, n_out = p.tokens_evaluated, p.tokens_predicted
    return {
        "input_tokens": n_in,
        "output_tokens": n_out,
        "total_tokens": n_in + n_out,
        "input_tokens_details": {"cached_tokens": p.n_prompt_tokens_cache},
    }


class ResponseAnswer:
    """The chat's answer as a Responses object, or as its stream of named events."""

    def __init__(self, state: AppState, parse: dict[str, Any]) -> None:
        self.model = state.model_name
        self.choices = ChatChoices(parse)  # one: a Responses request has no n
        self.id = "resp_" + new_id()
        self.msg_id, self.rs_id = "msg_" + new_id(), "rs_" + new_id()
        self.created = int(time.time())
        self.open: set[str] = set()  # the output items streamed so far: "created", "message", ...
        # what OpenAI's stream events carry beyond llama-server's (its SDKs index by them): each
        # event's place in the stream, and each output item's place in the output list
        self.sequence = 0
        self.output_index: dict[str, int] = {}

    def _items(self, m: ParsedMessage) -> list[dict[str, Any]]:
        out = []
        if m.reasoning:
            out.append(self._reasoning(m.reasoning))
        if m.content:
            out.append(self._message(m.content))
        out += [self._call(c, "completed") for c in m.tool_calls]
        return out

    def _reasoning(self, text: str) -> dict[str, Any]:
        content = [{"text": text, "type": "reasoning_text"}]
        return {"id": self.rs_id, "summary": [], "type": "reasoning", "content": content, "encrypted_content": ""}

    def _message(self, text: str, status: str = "completed") -> dict[str, Any]:
        part = {"type": "output_text", "annotations": [], "logprobs": [], "text": text}
        return {
            "content": [part] if text else [],
            "id": self.msg_id,
            "role": "assistant",
            "status": status,
            "type": "message",
        }

    @staticmethod
    def _call(call: ToolCall, status: str) -> dict[str, Any]:
        return {
            "id": "fc_" + call.id,
            "type": "function_call",
            "status": status,
            "arguments": call.arguments,
            "call_id": "call_" + call.id,
            "name": call.name,
        }

    def response(self, p: CompletionFinal) -> dict[str, Any]:
        st = self.choices[p.index]
        st.update(p.content, is_partial=False)
        return {
            "completed_at": int(time.time()),
            "created_at": self.created,
            "id": self.id,
            "model": self.model,
            "object": "response",
            "output": self._items(st.message),
            "status": "completed",
            "usage": _usage(p),
            "timings": p.timings.json(),
        }

    def _event(self, kind: str, /, **data: Any) -> dict[str, Any]:
        event = {"event": kind, "data": {"type": kind, "sequence_number": self.sequence, **data}}
        self.sequence += 1
        return event

    def _added(self, item: dict[str, Any]) -> dict[str, Any]:
        """``response.output_item.added`` for a new output item, which takes the next index."""
        self.output_index[item["id"]] = len(self.output_index)
        return self._event("response.output_item.added", output_index=self.output_index[item["id"]], item=item)

    def _item_event(self, kind: str, item_id: str, /, **data: Any) -> dict[str, Any]:
        """An event about output item ``item_id`` (and its first content part, where it has one)."""
        where = {"item_id": item_id, "output_index": self.output_index[item_id]}
        if not item_id.startswith("fc_"):
            where["content_index"] = 0
        return self._event(kind, **where, **data)

    def _head(self, status: str = "in_progress") -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "model": self.model,
            "output": [],
        }

    def chunks(self, r: Result) -> list[Any]:
        p = completion_step(r)
        head = self._head()
        events = []
        if "created" not in self.open:
            self.open.add("created")
            events += [
                self._event("response.created", response=head),
                self._event("response.in_progress", response=head),
            ]
        elif isinstance(p, PromptProgress):
            events.append(self._event("response.in_progress", response=head))
        st = self.choices[p.index]
        for d in st.update(p.content, is_partial=not p.stop):
            events += self._delta_events(d)
        if isinstance(p, CompletionFinal):
            events += self._done_events(st.message, p)
        if events and isinstance(p, PromptProgress):
            events[-1]["data"]["prompt_progress"] = p.prompt_progress
        if events and p.timings is not None:
            events[-1]["data"]["timings"] = p.timings.json()
        return events

    def _delta_events(self, d: MessageDelta) -> list[dict[str, Any]]:
        out = []
        if d.reasoning:
            if "reasoning" not in self.open:
                self.open.add("reasoning")
                out += self._open_reasoning()
            out.append(self._item_event("response.reasoning_text.delta", self.rs_id, delta=d.reasoning))
        if d.content:
            if "message" not in self.open:
                self.open.add("message")
                out += self._open_message()
            out.append(self._item_event("response.output_text.delta", self.msg_id, delta=d.content, logprobs=[]))
        if d.call is not None:
            if d.new_call:
                out.append(self._added({**self._call(d.call, "in_progress"), "arguments": ""}))
            if d.arguments:
                out.append(
                    self._item_event("response.function_call_arguments.delta", "fc_" + d.call.id, delta=d.arguments)
                )
        return out

    def _open_reasoning(self) -> list[dict[str, Any]]:
        item = {**self._reasoning(""), "content": [{"text": "", "type": "reasoning_text"}], "status": "in_progress"}
        return [self._added(item)]

    def _open_message(self) -> list[dict[str, Any]]:
        part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
        added = self._added(self._message("", "in_progress"))
        return [added, self._item_event("response.content_part.added", self.msg_id, part=part)]

    def _done_events(self, m: ParsedMessage, p: CompletionFinal) -> list[dict[str, Any]]:
        out = []
        if m.reasoning:
            if self.rs_id not in self.output_index:
                out += self._open_reasoning()
            reasoning = self._reasoning(m.reasoning)
            out.append(self._item_event("response.reasoning_text.done", self.rs_id, text=m.reasoning))
            out.append(self._item_event("response.output_item.done", self.rs_id, item=reasoning))
        if m.content:
            if self.msg_id not in self.output_index:
                out += self._open_message()
            part = self._message(m.content)["content"][0]
            out.append(self._item_event("response.output_text.done", self.msg_id, text=m.content, logprobs=[]))
            out.append(self._item_event("response.content_part.done", self.msg_id, part=part))
            out.append(self._item_event("response.output_item.done", self.msg_id, item=self._message(m.content)))
        for c in m.tool_calls:
            item = self._call(c, "completed")
            if item["id"] not in self.output_index:
                out.append(self._added({**item, "status": "in_progress"}))
            args = {"arguments": c.arguments, "name": c.name}
            out.append(self._item_event("response.function_call_arguments.done", item["id"], **args))
            out.append(self._item_event("response.output_item.done", item["id"], item=item))
        done = {**self._head("completed"), "output": self._items(m), "usage": _usage(p)}
        out.append(self._event("response.completed", response=done))
        return out


async def responses(request: Request) -> Response:
    state: AppState = request.app.state.pyllama
    plan, tasks = await chat_tasks(request, state, responses_to_chat(await json_body(request)))
    if len(tasks) != 1:
        raise ApiError("a Responses request gives one answer ('n' must be 1)")
    shape = ResponseAnswer(state, plan.parse)
    return await answer_with_events(request, state, tasks, shape.chunks, shape.response)


async def count_tokens(request: Request) -> Response:
    """``/v1/responses/input_tokens``: how many tokens the rendered input takes."""
    state: AppState = request.app.state.pyllama
    n = await count_chat_tokens(state, responses_to_chat(await json_body(request)))
    return JSONResponse({"object": "response.input_tokens", "input_tokens": n})
