"""OpenAI-compatible routes: /v1/models, /v1/completions, /v1/chat/completions.

Requests are read the way llama-server reads them (``oaicompat_*_params_parse``): the OpenAI
fields are mapped onto llama-server's, and every llama-server field (``n_probs``, ``grammar``,
``mirostat``, ...) is accepted here too. Answers carry llama-server's extras (``timings``).
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import Response

from ..queue import Result
from ..server import CompletionTask
from ..server.results import CompletionFinal, CompletionResult, PromptProgress, completion_step, usage
from .app_state import AppState, json_body
from .json_out import JSONResponse
from .protocol import completion_to_llama


def model_entry(model_id: str, aliases: list[str], tags: list[str]) -> dict[str, Any]:
    """What every entry of ``/v1/models`` starts with, a model server's and the router's alike."""
    return {
        "id": model_id,
        "aliases": aliases,
        "tags": tags,
        "object": "model",
        "created": int(time.time()),
        "owned_by": "llamacpp",
    }


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
                **model_entry(name, aliases, tags),
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
    return {"content": [e.json() for e in probs]} if probs else None


def answer_head(state: AppState, id_prefix: str) -> dict[str, Any]:
    """What every OpenAI answer and chunk of one request repeats: its id, time, model."""
    return {
        "id": id_prefix + uuid.uuid4().hex[:24],
        "created": int(time.time()),
        "model": state.model_name,
        "system_fingerprint": state.fingerprint,
    }


def whole_answer(
    head: dict[str, Any],
    kind: str,
    finals: list[CompletionFinal],
    choices: list[dict[str, Any]],
    n_choices: int,
    verbose: bool,
) -> dict[str, Any]:
    """An OpenAI answer (``kind``: its object) from its final results and their rendered choices;
    its usage counts each prompt once (``n_choices``: the request's n)."""
    out = {
        "choices": choices,
        **head,
        "object": kind,
        "usage": usage(finals, n_choices),
        "timings": finals[0].timings.json(),
    }
    if verbose:  # llama-server's debugging extra: the native answer
        out["__verbose"] = finals[0].native()
    return out


class OpenAIAnswer(Protocol):
    """An OpenAI route's answer: whole, or as the chunks of each result (``coalesce``: the
    tokens that came together are rendered as one, see ``Bridge.stream``)."""

    coalesce: bool

    def whole(self, finals: list[CompletionFinal]) -> dict[str, Any]: ...

    def chunks(self, r: Result) -> list[Any]: ...


class TextAnswer:
    """One ``/v1/completions`` answer: its choices and chunks."""

    coalesce = False  # rendering a token costs little: each goes out as it came

    def __init__(self, state: AppState, include_usage: bool, verbose: bool = False, n_choices: int = 1) -> None:
        self.include_usage, self.verbose, self.n_choices = include_usage, verbose, n_choices
        self.head = answer_head(state, "cmpl-")

    def whole(self, finals: list[CompletionFinal]) -> dict[str, Any]:
        choices = [
            {"text": p.content, "index": p.index, "logprobs": logprobs(p), "finish_reason": p.finish_reason}
            for p in finals
        ]
        return whole_answer(self.head, "text_completion", finals, choices, self.n_choices, self.verbose)

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
            "object": "text_completion",
        }
        if isinstance(p, CompletionFinal):
            chunk["usage"] = usage([p])
        if p.timings is not None:
            chunk["timings"] = p.timings.json()
        return [chunk]


async def answer(request: Request, state: AppState, tasks: list[CompletionTask], shape: OpenAIAnswer) -> Response:
    if tasks[0].params.stream:
        return await state.bridge.stream(request, tasks, shape.chunks, done="[DONE]", coalesce=shape.coalesce)
    return JSONResponse(shape.whole(await state.bridge.run_to_end(request, tasks, CompletionFinal)))


async def completions(request: Request) -> Response:
    state: AppState = request.app.state.pyllama
    body = completion_to_llama(await json_body(request))
    tasks = await state.bridge.make_tasks(body, body["prompt"], request=request)
    params = tasks[0].params
    shape = TextAnswer(state, params.include_usage, params.verbose, n_choices=params.n_cmpl)
    return await answer(request, state, tasks, shape)
