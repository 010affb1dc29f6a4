"""Chats as llama-server handles them: render with the model's template, read the answer back.

Rendering (``oaicompat_chat_params_parse``'s template part) gives the prompt plus what goes with
it: a grammar for tool calls (often lazy, with trigger words), tokens to keep whole, extra stop
strings, and the output parser. Reading back (``common_chat_parse``) splits the model's text
into ``content``, ``reasoning_content`` and ``tool_calls``, also while it streams (partial).
Both are llama.cpp's own code (``common.ChatTemplates``, and ``common.ChatParser`` in ``chat_message.py``).
"""

from __future__ import annotations

import json
from typing import Any

from ..common import ChatTemplates
from ..llama import Model
from .sampling import schema_or_any_object

__all__ = ["Chat"]


class Chat:
    def __init__(
        self,
        model: Model,
        template: str | None,
        use_jinja: bool = True,
        reasoning_format: str = "deepseek",
        enable_thinking: bool | None = None,
    ) -> None:
        self.templates = ChatTemplates(model, template)
        self.use_jinja = use_jinja
        self.reasoning_format = reasoning_format
        self.enable_thinking = enable_thinking  # --reasoning on/off; None: the template's default
        self.info = self.templates.info()

    def close(self) -> None:
        self.templates.close()

    def _enable_thinking(self, body: dict[str, Any], kwargs: dict[str, str]) -> bool:
        """--reasoning, overridden by ``chat_template_kwargs.enable_thinking`` or
        ``reasoning_effort: none``."""
        enable = True if self.enable_thinking is None else self.enable_thinking
        if kwargs.get("enable_thinking") in ("true", "false"):
            enable = kwargs["enable_thinking"] == "true"
        elif "enable_thinking" in kwargs:
            raise ValueError('invalid type for "enable_thinking" (expected boolean, got string)')
        return False if body.get("reasoning_effort") == "none" else enable

    def render(self, body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """A chat request → (llama-server fields for the completion, output-parser params)."""
        tools = body.get("tools")
        has_tools = isinstance(tools, list) and bool(tools)
        tool_choice = body.get("tool_choice") or "auto"
        if not self.use_jinja and (has_tools or tool_choice != "auto"):
            raise ValueError(f"{'tools' if has_tools else 'tool_choice'} param requires --jinja flag")
        if has_tools and tool_choice != "none" and body.get("grammar"):
            raise ValueError("Cannot use custom grammar constraints with tools.")
        schema = body.get("json_schema")
        given_kwargs = body.get("chat_template_kwargs") or {}
        if not isinstance(given_kwargs, dict):
            raise ValueError("Field 'chat_template_kwargs': must be an object")
        kwargs = {k: json.dumps(v) for k, v in given_kwargs.items()}
        reasoning_format = body.get("reasoning_format", self.reasoning_format)
        inputs = {
            "messages": body["messages"],
            "tools": tools if has_tools else None,
            "tool_choice": tool_choice if isinstance(tool_choice, str) else "required",
            "json_schema": json.dumps(schema) if schema is not None else "",
            "grammar": body.get("grammar") or "",
            "use_jinja": self.use_jinja,
            "parallel_tool_calls": bool(
                body.get("parallel_tool_calls", self.info["caps"].get("supports_parallel_tool_calls", False))
            ),
            "add_generation_prompt": bool(body.get("add_generation_prompt", True)),
            "reasoning_format": reasoning_format,
            "enable_thinking": self._enable_thinking(body, kwargs),
            "chat_template_kwargs": kwargs,
        }
        _continuation(body, inputs)
        p = self.templates.apply(inputs)
        fields: dict[str, Any] = {
            "prompt": p["prompt"],
            "grammar_lazy": p["grammar_lazy"],
            "grammar_triggers": p["grammar_triggers"],
            "preserved_tokens": p["preserved_tokens"],
            "generation_prompt": p["generation_prompt"],
            "additional_stops": p["additional_stops"],
        }
        if p["grammar"]:
            fields["grammar"] = p["grammar"]
            fields["grammar_type"] = "tool_calls"
        fields.update(_reasoning_budget(body, p))
        parse = {
            "format": p["format"],
            "format_name": p["format_name"],
            "parser": p["parser"],
            "reasoning_format": reasoning_format,
            "generation_prompt": p["generation_prompt"],
            "parse_tool_calls": has_tools and tool_choice != "none",
            "is_continuation": bool(inputs.get("continue_final_message")),
        }
        return fields, parse


def _continuation(body: dict[str, Any], inputs: dict[str, Any]) -> None:
    """``continue_final_message``, or llama-server's assistant prefill: a chat ending with an
    assistant message continues it instead of opening a new one."""
    roles = [m.get("role") if isinstance(m, dict) else None for m in body["messages"]]
    continuing = bool(body.get("continue_final_message"))
    if continuing:
        inputs["continue_final_message"] = body["continue_final_message"]
    elif roles and roles[-1] == "assistant":
        if roles[-2:] == ["assistant", "assistant"]:
            raise ValueError("Cannot have 2 or more assistant messages at the end of the list.")
        inputs["continue_final_message"] = True
        inputs["add_generation_prompt"] = False
    if continuing and body.get("add_generation_prompt", True):
        raise ValueError("Cannot set both add_generation_prompt and continue_final_message to true.")


def _reasoning_budget(body: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
    """The reasoning-budget fields of a chat whose template has thinking tags (llama-server's
    rules): the request's ``reasoning_budget_tokens`` (or ``thinking_budget_tokens``) else the
    server's ``--reasoning-budget``, the template's tags, the message forced before the end tag."""
    if not p["thinking_end_tags"]:
        return {}
    out: dict[str, Any] = {
        "reasoning_budget_start_tag": p["thinking_start_tag"],
        "reasoning_budget_end_tags": p["thinking_end_tags"],
        "reasoning_control": bool(body.get("reasoning_control", False)),
    }
    budget = body.get("reasoning_budget_tokens", body.get("thinking_budget_tokens", -1))
    if budget != -1:  # else the server's default applies
        out["reasoning_budget_tokens"] = budget
    if "reasoning_budget_message" in body:
        out["reasoning_budget_message"] = body["reasoning_budget_message"]
    return out


def openai_chat_fields(body: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI chat request's fields as llama-server reads them (``oaicompat_chat_params_parse``):
    ``stop`` as a list, ``response_format`` as ``json_schema``, ``logprobs``/``top_logprobs`` as
    ``n_probs``; the prompt is rendered later (:meth:`Chat.render`). Raises ``ValueError``."""
    body = dict(body)
    stop = body.get("stop")
    if isinstance(stop, str):
        body["stop"] = [stop]
    elif stop is not None and not (isinstance(stop, list) and all(isinstance(s, str) for s in stop)):
        raise ValueError(f"Field 'stop': must be a string or a list of strings, not {json.dumps(stop)[:80]}")
    schema = body.get("json_schema")
    if schema is not None and body.get("grammar"):
        raise ValueError("Cannot use both json_schema and grammar")
    fmt = body.get("response_format")
    if fmt is not None:
        if not isinstance(fmt, dict):
            raise ValueError("response_format must be an object")
        kind = fmt.get("type", "")
        if kind == "json_object":
            if "schema" in fmt or not schema:
                schema = fmt.get("schema", {})
        elif kind == "json_schema":
            wrapper = fmt.get("json_schema", {})
            schema = wrapper.get("schema", {}) if isinstance(wrapper, dict) else {}
        elif kind not in ("", "text"):
            raise ValueError(f'response_format type must be one of "text" or "json_object", but got: {kind}')
    if schema is not None:
        body["json_schema"] = schema_or_any_object(schema)  # before the template builds its grammar
    logprobs = body.pop("logprobs", None)
    top = body.pop("top_logprobs", None)
    if logprobs is True:
        body["n_probs"] = 20 if top is None else top
    elif top is not None:
        raise ValueError("top_logprobs requires logprobs to be set to true")
    return body
