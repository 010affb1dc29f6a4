"""Embedding routes: ``/embedding`` (llama-server's shape) and ``/v1/embeddings`` (OpenAI's)."""

from __future__ import annotations

import base64
import struct
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ..server.media import content_prompts
from ..server.results import EmbeddingVectors, RerankScore
from .app_state import AppState, json_body
from .errors import ApiError
from .json_out import JSONResponse
from .schemas import EmbeddingRequest, RerankRequest, parse


async def _embed(request: Request, oai: bool) -> tuple[AppState, dict[str, Any], list[EmbeddingVectors], bool]:
    """Run the request's inputs; also says whether to answer in OpenAI's shape."""
    state: AppState = request.app.state.pyllama
    if not state.engine.embedding:
        raise ApiError(
            "This server does not support embeddings. Start it with `--embeddings`", 501, "not_supported_error"
        )
    body = await json_body(request)
    req = parse(EmbeddingRequest, body)
    if "input" in body:
        inputs = body["input"]
    elif "content" in body:
        inputs, oai = body["content"], False  # "content" is llama-server's field, answered in its shape
    else:
        raise ApiError('"input" or "content" must be provided')
    # validated above; the raw JSON goes on, its prompt forms are read by the engine
    if _has_content_parts(inputs):  # OpenAI-style parts: text and media, as a media prompt
        projector = state.engine.projector
        marker = projector.marker if projector is not None else None
        inputs = await state.bridge.build(content_prompts, inputs, marker, state.settings.media_path)
    if oai and state.engine.pooling == "none":
        raise ApiError("Pooling type 'none' is not OAI compatible. Please use a different pooling type")
    tasks = await state.bridge.build(state.engine.tasks.make_embedding_tasks, inputs, req.embd_normalize)
    results = await state.bridge.run_to_end(request, tasks, EmbeddingVectors)
    return state, body, results, oai


def _has_content_parts(inputs: Any) -> bool:
    items = inputs if isinstance(inputs, list) else [inputs]
    return any(isinstance(i, dict) and "content" in i for i in items)


def _native(results: list[EmbeddingVectors]) -> JSONResponse:
    return JSONResponse([{"index": r.index, "embedding": r.embedding} for r in results])


def _listing(
    state: AppState, body: dict[str, Any], done: list[EmbeddingVectors] | list[RerankScore], **items: Any
) -> JSONResponse:
    """The OpenAI-style list answer of embeddings and rerank: the items, and the prompt tokens
    of the finished tasks (``done``)."""
    n_tokens = sum(r.tokens_evaluated for r in done)
    usage = {"prompt_tokens": n_tokens, "total_tokens": n_tokens}
    return JSONResponse({"model": body.get("model", state.model_name), "object": "list", "usage": usage, **items})


async def embedding(request: Request) -> Response:
    """llama-server's ``/embedding``: ``[{"index", "embedding": [[...]]}, ...]``."""
    _, _, results, _ = await _embed(request, oai=False)
    return _native(results)


async def v1_embeddings(request: Request) -> Response:
    state, body, results, oai = await _embed(request, oai=True)
    if not oai:  # asked with "content": llama-server's shape
        return _native(results)
    base64_out = body.get("encoding_format") == "base64"
    data = []
    for r in results:
        vec = r.embedding[0]
        item: dict[str, Any] = {"embedding": vec, "index": r.index, "object": "embedding"}
        if base64_out:
            item["embedding"] = base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode()
            item["encoding_format"] = "base64"
        data.append(item)
    return _listing(state, body, results, data=data)


async def rerank(request: Request) -> Response:
    """``/rerank`` (Jina's shape) or, given ``texts``, TEI's: documents sorted by the score of
    the (query, document) pair, the best ``top_n``."""
    state: AppState = request.app.state.pyllama
    body = await json_body(request)
    tei = "texts" in body
    req = parse(RerankRequest, body)
    documents = req.documents if req.documents is not None else req.texts
    if not documents:
        raise ApiError('"documents" must be a non-empty string array')
    query = req.query
    top_n = len(documents) if req.top_n is None else req.top_n
    tasks = await state.bridge.build(state.engine.tasks.make_rerank_tasks, query, documents)
    results = await state.bridge.run_to_end(request, tasks, RerankScore)
    label = "score" if tei else "relevance_score"
    ranked = sorted(results, key=lambda r: r.score, reverse=True)[: max(0, top_n)]
    items = []
    for r in ranked:
        item: dict[str, Any] = {"index": r.index, label: r.score}
        if tei and req.return_text:
            item["text"] = documents[r.index]
        items.append(item)
    if tei:
        return JSONResponse(items)
    return _listing(state, body, results, results=items)
