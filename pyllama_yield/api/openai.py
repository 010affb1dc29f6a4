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
from ..server.results import CompletionFinal, CompletionResult, PromptProgress, completion_step, usage
from .app_state import AppState, json_body
from .protocol import completion_to_llama


def models_json(state: AppState) -> dict[str, Any]:
    """``/v1/models`` as llama-server answers it: the OpenAI list, plus an Ollama-style ``models``."""
    info = state.engine.info
    name = info["model"]
    aliases = state.settings.aliases or [name]
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
                "capabilities": ["completion", "multimodal"] if state.engine.projector else ["completion"],
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


def logprobs(payload: CompletionResult) -> dict[str, Any] | None:
    probs = payload.probs
    return {"content": probs} if probs else None


class TextAnswer:
    """One ``/v1/completions`` answer (id, created, model) and the shapes of its choices and chunks."""

    object = "text_completion"
    id_prefix = "cmpl-"
    parses_text = False  # a chat answer parses its whole text for each render: its tokens coalesce

    def __init__(self, state: AppState, include_usage: bool, verbose: bool = False, n_choices: int = 1) -> None:
        self.include_usage = include_usage
        self.verbose = verbose
        self.n_choices = n_choices  # the request's n: its usage counts each prompt once
        self.head = {
            "id": self.id_prefix + uuid.uuid4().hex[:24],
            "created": int(time.time()),
            "model": state.model_name,
            "system_fingerprint": state.fingerprint,
        }

    def whole(self, finals: list[CompletionFinal]) -> dict[str, Any]:
        out = {
            "choices": [self.choice(p) for p in finals],
            **self.head,
            "object": self.object,
            "usage": usage(finals, self.n_choices),
            "timings": finals[0].timings,
        }
        if self.verbose:  # llama-server's debugging extra: the native answer
            out["__verbose"] = finals[0].native()
        return out

    def choice(self, p: CompletionFinal) -> dict[str, Any]:
        return {"text": p.content, "index": p.index, "logprobs": logprobs(p), "finish_reason": p.finish_reason}

    def chunks(self, r: Result) -> list[Any]:
        p = completion_step(r)
        if isinstance(p, PromptProgress):
            return []
        chunk: dict[str, Any] = {
            "choices": [
                {
                    "text": p.content,
                    "index": p.index,
                    "logprobs": None if p.stop else logprobs(p),
                    "finish_reason": p.finish_reason if isinstance(p, CompletionFinal) else None,
                }
            ],
            **self.head,
            "object": self.object,
        }
        if isinstance(p, CompletionFinal):
            chunk["usage"] = usage([p])
        if p.timings is not None:
            chunk["timings"] = p.timings
        return [chunk]


async def answer(request: Request, state: AppState, tasks: list[CompletionTask], shape: TextAnswer) -> Response:
    if tasks[0].params.stream:
        return await state.bridge.stream(tasks, shape.chunks, done="[DONE]", coalesce=shape.parses_text)
    return JSONResponse(shape.whole(await state.bridge.run_to_end(request, tasks, CompletionFinal)))


async def completions(request: Request) -> Response:
    state: AppState = request.app.state.pyllama
    body = completion_to_llama(await json_body(request))
    tasks = await state.bridge.make_tasks(body, body["prompt"], request=request)
    params = tasks[0].params
    shape = TextAnswer(state, params.include_usage, params.verbose, n_choices=params.n_cmpl)
    return await answer(request, state, tasks, shape)
