"""OpenAI-compatible routes: /v1/models, /v1/completions, /v1/chat/completions.

Requests are read the way llama-server reads them (``oaicompat_*_params_parse``): the OpenAI
fields are mapped onto llama-server's, and every llama-server field (``n_probs``, ``grammar``,
``mirostat``, ...) is accepted here too. Answers carry llama-server's extras (``timings``).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..queue import Result
from ..server import CompletionTask
from .app_state import AppState, json_body
from .errors import ApiError
from .protocol import ChatRequest, chat_to_llama, completion_to_llama


def models_json(state: AppState) -> dict[str, Any]:
    """``/v1/models`` as llama-server answers it: the OpenAI list, plus an Ollama-style ``models``."""
    info = state.srv.info
    name = info["model"]
    aliases = [a for a in (state.settings.alias or "").split(",") if a] or [name]
    tags = [t for t in (state.settings.tags or "").split(",") if t]
    return {
        "models": [
            {
                "name": name,
                "model": name,
                "modified_at": "",
                "size": "",
                "digest": "",
                "type": "model",
                "description": "",
                "tags": tags or [""],
                "capabilities": ["completion"],
                "parameters": "",
                "details": {
                    "parent_model": "",
                    "format": "gguf",
                    "family": "",
                    "families": [""],
                    "parameter_size": "",
                    "quantization_level": "",
                },
            }
        ],
        "object": "list",
        "data": [
            {
                "id": name,
                "aliases": aliases,
                "tags": tags,
                "object": "model",
                "created": int(time.time()),
                "owned_by": "llamacpp",
                "meta": {
                    "n_vocab": info["n_vocab"],
                    "n_ctx": info["n_ctx_slot"],
                    "n_ctx_train": info["n_ctx_train"],
                    "n_embd": info["n_embd"],
                    "n_params": info["n_params"],
                    "size": info["size"],
                    "description": info["description"],
                },
            }
        ],
    }


async def models(request: Request) -> Response:
    return JSONResponse(models_json(request.app.state.pyllama))


def _usage(payloads: list[dict[str, Any]]) -> dict[str, Any]:
    # every choice of one prompt shares its prompt: count each prompt once
    prompts = {p["index"]: p for p in payloads}
    n_prompt = sum(p["tokens_evaluated"] for p in prompts.values())
    n_gen = sum(p["tokens_predicted"] for p in payloads)
    return {
        "completion_tokens": n_gen,
        "prompt_tokens": n_prompt,
        "total_tokens": n_gen + n_prompt,
        "prompt_tokens_details": {"cached_tokens": sum(p.get("n_prompt_tokens_cache", 0) for p in prompts.values())},
    }


def _finish_reason(payload: dict[str, Any]) -> str:
    return "stop" if payload.get("stop_type") in ("eos", "word") else "length"


def _logprobs(payload: dict[str, Any]) -> dict[str, Any] | None:
    probs = payload.get("completion_probabilities")
    return {"content": probs} if probs else None


class _Answer:
    """One OpenAI answer (id, created, model) and the shapes of its choices and chunks."""

    def __init__(self, state: AppState, chat: bool, include_usage: bool) -> None:
        self.chat = chat
        self.include_usage = include_usage
        self.head = {
            "id": ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24],
            "created": int(time.time()),
            "model": state.model_name,
            "system_fingerprint": state.fingerprint,
        }
        self.started: set[int] = set()

    def whole(self, finals: list[dict[str, Any]]) -> dict[str, Any]:
        choices = []
        for p in finals:
            if self.chat:
                choice = {
                    "finish_reason": _finish_reason(p),
                    "index": p["index"],
                    "message": {"role": "assistant", "content": p["content"]},
                }
                if _logprobs(p):
                    choice["logprobs"] = _logprobs(p)
            else:
                choice = {
                    "text": p["content"],
                    "index": p["index"],
                    "logprobs": _logprobs(p),
                    "finish_reason": _finish_reason(p),
                }
            choices.append(choice)
        return {
            "choices": choices,
            **self.head,
            "object": "chat.completion" if self.chat else "text_completion",
            "usage": _usage(finals),
            "timings": finals[0]["timings"],
        }

    def chunks(self, r: Result) -> list[Any]:
        return self._chat_chunks(r) if self.chat else self._text_chunks(r)

    def _text_chunks(self, r: Result) -> list[Any]:
        p = r.payload
        if "prompt_progress" in p and not p["content"]:
            return []
        chunk: dict[str, Any] = {
            "choices": [
                {
                    "text": p["content"],
                    "index": p["index"],
                    "logprobs": None if r.is_final else _logprobs(p),
                    "finish_reason": _finish_reason(p) if r.is_final else None,
                }
            ],
            **self.head,
            "object": "text_completion",
        }
        if r.is_final:
            chunk["usage"] = _usage([p])
        if "timings" in p:
            chunk["timings"] = p["timings"]
        return [chunk]

    def _chat_chunk(self, index: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "choices": [{"finish_reason": finish, "index": index, "delta": delta}],
            **self.head,
            "object": "chat.completion.chunk",
        }

    def _chat_chunks(self, r: Result) -> list[Any]:
        p = r.payload
        out = []
        if p["index"] not in self.started:  # OpenAI clients expect the role first
            self.started.add(p["index"])
            out.append(self._chat_chunk(p["index"], {"role": "assistant", "content": None}))
        if p["content"]:
            out.append(self._chat_chunk(p["index"], {"content": p["content"]}))
            if not r.is_final and _logprobs(p):
                out[-1]["choices"][0]["logprobs"] = _logprobs(p)
        if r.is_final:
            out.append(self._chat_chunk(p["index"], {}, _finish_reason(p)))
            if self.include_usage:
                out.append({"choices": [], **self.head, "object": "chat.completion.chunk", "usage": _usage([p])})
        if out and "timings" in p:
            out[-1]["timings"] = p["timings"]
        return out


async def _answer(request: Request, state: AppState, llama_body: dict[str, Any], prompt: Any, chat: bool) -> Response:
    tasks: list[CompletionTask] = await state.bridge.make_tasks(llama_body, prompt)
    params = tasks[0].params
    answer = _Answer(state, chat, params.include_usage)
    if params.stream:
        return await state.bridge.stream(tasks, answer.chunks, done="[DONE]")
    return JSONResponse(answer.whole(await state.bridge.run_to_end(request, tasks)))


async def completions(request: Request) -> Response:
    state: AppState = request.app.state.pyllama
    body = completion_to_llama(await json_body(request))
    return await _answer(request, state, body, body["prompt"], chat=False)


async def chat_completions(request: Request) -> Response:
    state: AppState = request.app.state.pyllama
    body = chat_to_llama(await json_body(request))
    chat = ChatRequest.parse(body)
    srv = state.srv
    try:
        prompt = await state.bridge.run(srv.render_chat, chat.template_messages())
    except ValueError as exc:
        raise ApiError(str(exc)) from None
    return await _answer(request, state, body, prompt, chat=True)
