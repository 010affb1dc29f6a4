"""Ollama's API on the same port (``/api/chat``, ``/api/generate``, ``/api/tags``, ``/api/show``,
``/api/ps``, ``/api/version``), for the clients that speak only it: NDJSON streams, Ollama's
answer shapes and durations in nanoseconds, errors as ``{"error": "..."}``. Chats take the engine's
one chat path (``server/chat_request.py``), as the OpenAI and Anthropic routes do; the request
translation is ``ollama_request.py``."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from .. import __version__
from ..queue import Result
from ..server.chat_message import ChatState, ParsedMessage
from ..server.results import CompletionFinal, completion_step
from .app_state import AppState, json_body
from .chat import chat_tasks
from .errors import ApiError
from .json_out import JSONResponse
from .ollama_embed import embed, embeddings
from .ollama_request import (
    OllamaChatRequest,
    OllamaGenerateRequest,
    chat_body,
    check_model,
    model_name,
    now_iso,
    ollama_errors,
    read_request,
    requested_model,
    sampling_fields,
)

__all__ = ["chat", "generate", "ps", "pull", "show", "tags", "version"]

Handler = Callable[[Request], Awaitable[Response]]
NDJSON = "application/x-ndjson"
OLLAMA_API_VERSION = "0.12.0"  # the Ollama API these routes follow (clients check /api/version)


def _ndjson(item: Any) -> str:
    return json.dumps(item, ensure_ascii=False) + "\n"


def _ndjson_error(exc: ApiError) -> str:
    return _ndjson({"error": str(exc)})


def _stats(final: CompletionFinal, t0: float) -> dict[str, Any]:
    """Ollama's counts and durations (nanoseconds) of a finished answer."""
    t = final.timings
    return {
        "done_reason": final.finish_reason,
        "total_duration": int((time.perf_counter() - t0) * 1e9),
        "load_duration": 0,  # the model is loaded once, when the server starts
        "prompt_eval_count": final.tokens_evaluated,
        "prompt_eval_duration": int(t.prompt_ms * 1e6),
        "eval_count": final.tokens_predicted,
        "eval_duration": int(t.predicted_ms * 1e6),
    }


class Answer:
    """One ``/api/chat`` or ``/api/generate`` answer, streamed or whole. ``parse``: the chat's
    output parser (None: raw text, as ``/api/generate`` with ``raw`` or a suffix)."""

    def __init__(self, model: str, parse: dict[str, Any] | None, chat: bool) -> None:
        self.model, self.chat, self.t0 = model, chat, time.perf_counter()
        self.state = ChatState(parse) if parse is not None else None

    def _head(self) -> dict[str, Any]:
        return {"model": self.model, "created_at": now_iso()}

    def _body(self, content: str, thinking: str, tool_calls: list[dict[str, Any]]) -> dict[str, Any]:
        if not self.chat:
            out: dict[str, Any] = {"response": content}
            return {**out, "thinking": thinking} if thinking else out
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if thinking:
            message["thinking"] = thinking
        if tool_calls:
            message["tool_calls"] = tool_calls
        return {"message": message}

    def chunks(self, r: Result) -> list[Any]:
        p = completion_step(r)
        final = isinstance(p, CompletionFinal)
        content, thinking = p.content, ""
        if self.state is not None:
            content = thinking = ""
            for d in self.state.update(p.content, is_partial=not final):
                content += d.content
                thinking += d.reasoning
        calls = _tool_calls(self.state.message) if final and self.state is not None else []
        if not final and not (content or thinking):
            return []
        out = {**self._head(), **self._body(content, thinking, calls), "done": final}
        if isinstance(p, CompletionFinal):
            out.update(_stats(p, self.t0))
        return [out]

    def whole(self, final: CompletionFinal) -> dict[str, Any]:
        content, thinking, calls = final.content, "", []
        if self.state is not None:
            self.state.update(final.content, is_partial=False)
            m = self.state.message
            content, thinking, calls = m.content, m.reasoning, _tool_calls(m)
        return {**self._head(), **self._body(content, thinking, calls), "done": True, **_stats(final, self.t0)}


def _tool_calls(message: ParsedMessage) -> list[dict[str, Any]]:
    """The parsed tool calls, arguments as objects (Ollama's shape)."""
    out = []
    for i, call in enumerate(message.tool_calls):
        try:
            args = json.loads(call.arguments or "{}")
        except ValueError:
            args = {}
        out.append({"function": {"index": i, "name": call.name, "arguments": args}})
    return out


async def _respond(request: Request, state: AppState, tasks: list[Any], answer: Answer, stream: bool) -> Response:
    if stream:
        return await state.bridge.stream(
            request,
            tasks,
            answer.chunks,
            done=None,
            frame=_ndjson,
            error_frame=_ndjson_error,
            media_type=NDJSON,
            coalesce=answer.state is not None,  # a chat's answer parses its text: see coalesce_steps
        )
    finals = await state.bridge.run_to_end(request, tasks, CompletionFinal)
    return JSONResponse(answer.whole(finals[0]))


def _loaded(state: AppState, chat: bool) -> JSONResponse:
    """A request with nothing to generate loads the model, as in Ollama (here: it is loaded)."""
    body = {"message": {"role": "assistant", "content": ""}} if chat else {"response": ""}
    return JSONResponse(
        {"model": model_name(state), "created_at": now_iso(), **body, "done": True, "done_reason": "load"}
    )


@ollama_errors
async def chat(request: Request) -> Response:
    state, req = await read_request(request, OllamaChatRequest)
    if not req.messages:
        return _loaded(state, chat=True)
    plan, tasks = await chat_tasks(request, state, chat_body(req, state.engine.n_ctx_slot))
    return await _respond(request, state, tasks, Answer(model_name(state), plan.parse, chat=True), req.stream)


@ollama_errors
async def generate(request: Request) -> Response:
    state, req = await read_request(request, OllamaGenerateRequest)
    if req.template:
        raise ApiError("template is not supported: the model's own chat template is used (or raw)")
    if req.context:
        raise ApiError("context (the deprecated token context) is not supported: send the conversation to /api/chat")
    if not req.prompt and req.suffix is None:
        return _loaded(state, chat=False)
    fields = sampling_fields(req.options, req.format, state.engine.n_ctx_slot)
    if req.raw or req.suffix is not None:
        if req.images:
            raise ApiError("images need the chat template: they are not supported with raw or suffix")
        body = {**fields, "prompt": req.prompt, "stream": req.stream, "priority": req.priority}
        prompt: Any = req.prompt
        if req.suffix is not None:  # fill-in-the-middle, the model's FIM tokens
            infill = {"input_prefix": req.prompt, "input_suffix": req.suffix}
            prompt = await state.bridge.build(state.engine.tasks.infill_tokens, infill, request=request)
        tasks = await state.bridge.make_tasks(body, prompt, request=request)
        return await _respond(request, state, tasks, Answer(model_name(state), None, chat=False), req.stream)
    messages: list[dict[str, Any]] = [{"role": "system", "content": req.system}] if req.system else []
    messages.append({"role": "user", "content": req.prompt, **({"images": req.images} if req.images else {})})
    chat_req = OllamaChatRequest.model_validate(
        {**req.model_dump(exclude={"prompt", "suffix", "system"}), "messages": messages}
    )
    plan, tasks = await chat_tasks(request, state, chat_body(chat_req, state.engine.n_ctx_slot))
    return await _respond(request, state, tasks, Answer(model_name(state), plan.parse, chat=False), req.stream)


def _details(state: AppState) -> dict[str, Any]:
    meta = state.engine.model.metadata()
    arch = meta.get("general.architecture", "")
    n = state.engine.model.n_params
    size = f"{n / 1e9:.1f}B" if n >= 1e9 else f"{n / 1e6:.2f}M"
    return {
        "parent_model": "",
        "format": "gguf",
        "family": arch,
        "families": [arch],
        "parameter_size": size,
        "quantization_level": _quant(state.engine.model.description()),
    }


def _quant(description: str) -> str:
    """llama.cpp's file type words (``Q4_K - Medium``, ``all F32``) as Ollama's (``Q4_K_M``, ``F32``)."""
    m = re.search(r"(\S+) - (Small|Medium|Large)$", description)
    if m:
        return f"{m[1]}_{m[2][0]}"
    return description.rsplit(" ", 1)[-1]


def _entry(state: AppState) -> dict[str, Any]:
    name = model_name(state)
    info = state.engine.info
    return {
        "name": name,
        "model": name,
        "modified_at": now_iso(),
        "size": info["size"],
        "digest": info["system_fingerprint"],
        "details": _details(state),
    }


async def tags(request: Request) -> Response:
    return JSONResponse({"models": [_entry(request.app.state.pyllama)]})


async def ps(request: Request) -> Response:
    state: AppState = request.app.state.pyllama
    running = {**_entry(state), "expires_at": "2318-01-01T00:00:00Z", "size_vram": 0, "context_length": 0}
    running["context_length"] = state.engine.n_ctx_slot
    return JSONResponse({"models": [running]})


async def version(request: Request) -> Response:
    return JSONResponse({"version": OLLAMA_API_VERSION, "pyllama_yield": __version__})


def capabilities(state: AppState) -> list[str]:
    """What the model can do, from the engine and its template."""
    engine = state.engine
    if engine.embedding:
        return ["embedding"]
    caps = ["completion"]
    if engine.chat.info["caps"].get("supports_tools"):
        caps.append("tools")
    if engine.projector is not None and engine.projector.vision:
        caps.append("vision")
    if engine.chats.thinking:
        caps.append("thinking")
    return caps


@ollama_errors
async def show(request: Request) -> Response:
    state: AppState = request.app.state.pyllama
    name = requested_model(await json_body(request))
    check_model(state, name)
    meta = state.engine.model.metadata()
    model_info = {k: _typed(v) for k, v in meta.items()}
    return JSONResponse(
        {
            "modelfile": f"FROM {state.engine.info['model_path']}\n",
            "parameters": "",
            "template": state.engine.chat.info["source"],
            "details": _details(state),
            "model_info": model_info,
            "capabilities": capabilities(state),
            "modified_at": now_iso(),
        }
    )


def _typed(value: str) -> Any:
    """GGUF metadata as llama.cpp gives it (strings) back to numbers and booleans."""
    if value in ("true", "false"):
        return value == "true"
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        return value


@ollama_errors
async def pull(request: Request) -> Response:
    """One model is served here: pulling it succeeds at once; any other needs router mode."""
    state: AppState = request.app.state.pyllama
    name = requested_model(await json_body(request))
    try:
        check_model(state, name)
    except ApiError:
        raise ApiError(f"{name}: this server serves one model; pulling others needs router mode") from None
    return JSONResponse({"status": "success"})


ROUTES: list[tuple[str, Handler, list[str]]] = [
    ("/api/pull", pull, ["POST"]),
    ("/api/chat", chat, ["POST"]),
    ("/api/generate", generate, ["POST"]),
    ("/api/tags", tags, ["GET"]),
    ("/api/ps", ps, ["GET"]),
    ("/api/version", version, ["GET"]),
    ("/api/show", show, ["POST"]),
    ("/api/embed", embed, ["POST"]),
    ("/api/embeddings", embeddings, ["POST"]),
]
