"""Ollama's request shapes (``/api/chat``, ``/api/generate``) translated onto an OpenAI chat body
or llama-server's completion fields, so they take the engine's one path. Every Ollama option is
honoured or refused by name, never dropped. Also what every Ollama route checks: the model's
name, ``keep_alive``, the error shape."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError
from starlette.requests import Request
from starlette.responses import Response

from ..server.params import validation_message
from .app_state import AppState, json_body
from .errors import ApiError
from .json_out import JSONResponse

__all__ = [
    "OllamaChatRequest",
    "OllamaGenerateRequest",
    "OllamaMessage",
    "chat_body",
    "check_keep_alive",
    "check_model",
    "keep_alive_seconds",
    "model_name",
    "now_iso",
    "ollama_error",
    "ollama_errors",
    "parse_body",
    "read_request",
    "requested_model",
    "sampling_fields",
    "body_model",
]

Handler = Callable[[Request], Awaitable[Response]]

# Ollama's options → llama-server's request fields (the same meaning; llama.cpp's samplers)
_OPTIONS = {
    "num_predict": "n_predict",
    "temperature": "temperature",
    "top_k": "top_k",
    "top_p": "top_p",
    "min_p": "min_p",
    "typical_p": "typical_p",
    "seed": "seed",
    "stop": "stop",
    "repeat_penalty": "repeat_penalty",
    "repeat_last_n": "repeat_last_n",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
    "mirostat": "mirostat",
    "mirostat_tau": "mirostat_tau",
    "mirostat_eta": "mirostat_eta",
    "num_keep": "n_keep",
}
# set when the model loads (this server's flags), not per request
_LOAD_TIME = {
    "num_batch": "-b", "num_gpu": "-ngl", "main_gpu": "-mg", "num_thread": "-t", "use_mmap": "--mmap",
    "use_mlock": "--mlock", "numa": "--numa", "low_vram": None, "vocab_only": None, "f16_kv": "-ctk/-ctv",
    "logits_all": None, "embedding_only": "--embedding", "num_gqa": None, "rope_frequency_base": None,
    "rope_frequency_scale": None,
}  # fmt: skip


class OllamaMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: str = ""
    images: list[str] | None = None  # base64, no data: prefix
    thinking: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_name: str | None = None


class _Common(BaseModel):
    model_config = ConfigDict(extra="allow")
    model: str
    format: str | dict[str, Any] | None = None  # "json" or a JSON schema
    options: dict[str, Any] | None = None
    stream: StrictBool = True  # JSON true/false only, as Ollama's Go decoder ("yes" is an error)
    keep_alive: str | int | float | None = None
    think: bool | str | None = None
    priority: StrictInt = 0  # ours (Ollama has none), as on the other routes: lower is sooner


class OllamaChatRequest(_Common):
    """``POST /api/chat``."""

    messages: list[OllamaMessage] = Field(default_factory=list)
    tools: list[dict[str, Any]] | None = None


class OllamaGenerateRequest(_Common):
    """``POST /api/generate``."""

    prompt: str = ""
    suffix: str | None = None
    system: str | None = None
    template: str | None = None
    raw: bool = False
    images: list[str] | None = None
    context: list[int] | None = None


def sampling_fields(
    options: dict[str, Any] | None, fmt: str | dict[str, Any] | None, n_ctx_slot: int
) -> dict[str, Any]:
    """``options`` and ``format`` as llama-server's fields; a 400 naming an option this server
    cannot honour per request."""
    out: dict[str, Any] = {}
    for name, value in (options or {}).items():
        if name in _OPTIONS:
            out[_OPTIONS[name]] = value
        elif name == "num_ctx":
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ApiError(f"option num_ctx={value!r}: expected a positive number of tokens")
            if value > n_ctx_slot:
                raise ApiError(f"option num_ctx={value!r}: this server's context is {n_ctx_slot} tokens per slot (-c)")
        elif name in _LOAD_TIME:
            flag = _LOAD_TIME[name]
            how = f" (this server's {flag} flag)" if flag else ""
            raise ApiError(f"option {name!r} is set when the model loads, not per request{how}")
        else:
            raise ApiError(f"option {name!r} is not supported")
    if fmt == "json":
        out["json_schema"] = {}
    elif isinstance(fmt, dict):
        out["json_schema"] = fmt
    elif fmt not in (None, ""):
        raise ApiError(f'format must be "json" or a JSON schema, not {fmt!r}')
    return out


def _think(think: bool | str | None) -> dict[str, Any]:
    """``think``: on or off (the template's switch); Ollama's levels ("low", ...) mean on."""
    if think is None:
        return {}
    if think is False:
        return {"chat_template_kwargs": {"enable_thinking": False}, "reasoning_format": "deepseek"}
    return {"chat_template_kwargs": {"enable_thinking": True}, "reasoning_format": "deepseek"}


def _message(m: OllamaMessage) -> dict[str, Any]:
    """An Ollama message as an OpenAI one: images as data URIs, tool calls with JSON arguments."""
    out: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.images:
        parts: list[dict[str, Any]] = [{"type": "text", "text": m.content}]
        parts += [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{i}"}} for i in m.images]
        out["content"] = parts
    if m.thinking:
        out["reasoning_content"] = m.thinking
    if m.tool_calls:
        out["tool_calls"] = [
            {
                "id": c.get("id") or f"call_{i}",
                "type": "function",
                "function": {
                    "name": c.get("function", {}).get("name", ""),
                    "arguments": json.dumps(c.get("function", {}).get("arguments", {})),
                },
            }
            for i, c in enumerate(m.tool_calls)
        ]
    if m.role == "tool" and m.tool_name:
        out["name"] = m.tool_name
    return out


def chat_body(req: OllamaChatRequest, n_ctx_slot: int) -> dict[str, Any]:
    """``/api/chat`` as the OpenAI chat body the engine's chat path takes."""
    body: dict[str, Any] = {
        "messages": [_message(m) for m in req.messages],
        "stream": req.stream,
        "priority": req.priority,
        **sampling_fields(req.options, req.format, n_ctx_slot),
        **_think(req.think),
    }
    if req.tools:
        body["tools"] = req.tools
    return body


def ollama_errors(fn: Handler) -> Handler:
    """Errors in Ollama's shape: ``{"error": "message"}`` with the status."""

    @functools.wraps(fn)
    async def wrapped(request: Request) -> Response:
        try:
            return await fn(request)
        except ApiError as exc:
            return ollama_error(exc)

    return wrapped


def ollama_error(exc: ApiError) -> JSONResponse:
    """An error as Ollama's clients read it: ``{"error": "message"}`` with the status."""
    return JSONResponse({"error": str(exc)}, status_code=exc.status)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


def model_name(state: AppState) -> str:
    """The served model's Ollama name: ``name:tag``, ``latest`` when it has none."""
    name = state.model_name.removesuffix(".gguf")
    return name if ":" in name else f"{name}:latest"


def body_model(body: dict[str, Any]) -> Any:
    """The model a request's body names: ``model``, or Ollama's older ``name`` (any JSON value)."""
    return body.get("model") or body.get("name")


def requested_model(body: dict[str, Any]) -> str:
    """The model a body names (:func:`body_model`); a 400 without one."""
    name = body_model(body)
    if not isinstance(name, str):
        raise ApiError("model is required")
    return name


def check_model(state: AppState, name: str) -> None:
    ours = model_name(state)
    if name not in {ours, ours.removesuffix(":latest"), state.model_name, *state.settings.aliases}:
        raise ApiError(f"model '{name}' not found", 404)


_PART = re.compile(r"(-?\d+(?:\.\d+)?)(ms|h|m|s)?")
_UNIT = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def keep_alive_seconds(value: Any) -> float:
    """Ollama's ``keep_alive``: seconds as a number, or a Go duration ("5m", "1h30m", "0", "-1");
    negative keeps the model loaded. ``ValueError`` for anything else."""
    if isinstance(value, bool):
        raise ValueError(f"keep_alive: not a duration: {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip()
    parts = _PART.findall(text)
    if not parts or "".join(n + (u or "") for n, u in parts) != text:
        raise ValueError(f"keep_alive: not a duration: {value!r}")
    return sum(float(n) * _UNIT[u or None] for n, u in parts)


def check_keep_alive(value: Any) -> None:
    """This server keeps its one model loaded: any keep-alive is kept, but an unload (0) cannot be;
    a value that is not a duration is refused, as Ollama refuses it."""
    if value is None:
        return
    try:
        seconds = keep_alive_seconds(value)
    except ValueError as exc:
        raise ApiError(str(exc)) from None
    if seconds == 0:
        raise ApiError("keep_alive 0 (unload) is not possible here: this server serves one model for its lifetime")


def parse_body(model: type[M], body: dict[str, Any]) -> M:
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise ApiError(validation_message(exc)) from None


M = TypeVar("M", bound=BaseModel)


async def read_request(request: Request, model: type[M]) -> tuple[AppState, M]:
    """What every generating or embedding route does first: the body as ``model``, checked for
    the served model's name and a ``keep_alive`` this server can keep."""
    state: AppState = request.app.state.pyllama
    req = parse_body(model, await json_body(request))
    check_model(state, req.model)  # type: ignore[attr-defined]  # each of these requests has one
    check_keep_alive(req.keep_alive)  # type: ignore[attr-defined]
    return state, req
