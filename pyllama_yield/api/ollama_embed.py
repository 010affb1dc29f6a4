"""Ollama's embeddings, ``/api/embed`` and the older ``/api/embeddings``, on the model being served:
an embeddings server (``--embeddings``) embeds in its slots, a generation server beside them
(``server/side_embedder.py``: mean pooling, as Ollama does for any model)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict
from starlette.requests import Request
from starlette.responses import Response

from ..server.results import EmbeddingVectors
from .app_state import AppState
from .errors import ApiError
from .json_out import JSONResponse
from .ollama_request import model_name, ollama_errors, read_request

__all__ = ["embed", "embeddings"]


class EmbedRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    model: str
    input: str | list[str]
    truncate: bool = True
    dimensions: int | None = None
    options: dict[str, Any] | None = None
    keep_alive: str | int | float | None = None


class EmbeddingsRequest(BaseModel):
    """The older route: one prompt, its vector not normalized."""

    model_config = ConfigDict(extra="allow")
    model: str
    prompt: str
    options: dict[str, Any] | None = None
    keep_alive: str | int | float | None = None


async def _vectors(request: Request, state: AppState, texts: list[str], norm: int, truncate: bool) -> Any:
    engine = state.engine
    n_max = engine.n_ubatch  # one ubatch, in the slots or beside them
    prompts = []
    for text in texts:
        tokens = await state.bridge.run(engine.tasks.tokenize, text, True, True)
        if len(tokens) > n_max:
            if not truncate:
                raise ApiError(f"input ({len(tokens)} tokens) is longer than the context ({n_max} tokens)")
            tokens = tokens[:n_max]
        prompts.append(tokens)
    tasks = await state.bridge.build(engine.tasks.make_embedding_tasks, prompts, norm, True)
    return await state.bridge.run_to_end(request, tasks, EmbeddingVectors)


def _refuse_options(options: dict[str, Any] | None) -> None:
    if options:
        raise ApiError(f"options {sorted(options)} do not apply to embeddings here")


@ollama_errors
async def embed(request: Request) -> Response:
    state, req = await read_request(request, EmbedRequest)
    _refuse_options(req.options)
    texts = [req.input] if isinstance(req.input, str) else req.input
    if not texts or any(not t for t in texts):
        raise ApiError("input must be a non-empty string or a list of them")
    t0 = time.perf_counter()
    results = await _vectors(request, state, texts, -1 if req.dimensions else 2, req.truncate)
    vectors = [r.embedding[0] for r in results]
    if req.dimensions:  # Matryoshka: the first dimensions, normalized again
        if req.dimensions < 1:
            raise ApiError("dimensions must be positive")
        vectors = [_unit(v[: req.dimensions]) for v in vectors]
    return JSONResponse(
        {
            "model": model_name(state),
            "embeddings": vectors,
            "total_duration": int((time.perf_counter() - t0) * 1e9),
            "load_duration": 0,
            "prompt_eval_count": sum(r.tokens_evaluated for r in results),
        }
    )


@ollama_errors
async def embeddings(request: Request) -> Response:
    state, req = await read_request(request, EmbeddingsRequest)
    _refuse_options(req.options)
    if not req.prompt:
        return JSONResponse({"embedding": []})
    [result] = await _vectors(request, state, [req.prompt], -1, truncate=True)
    return JSONResponse({"embedding": result.embedding[0]})


def _unit(v: list[float]) -> list[float]:
    a = np.asarray(v, dtype=np.float64)
    n = float(np.linalg.norm(a))
    return (a / n).tolist() if n > 0 else a.tolist()
