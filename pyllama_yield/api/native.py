"""llama-server's own routes: /health, /metrics, /slots, /tokenize, /detokenize, /completion."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from ..queue import Result
from ..server.probs import valid_utf8
from ..server.results import CompletionFinal, CompletionResult, completion_step
from .app_state import AppState, json_body
from .errors import ApiError
from .http_server import CasedName
from .json_out import JSONResponse
from .prometheus import prometheus_text
from .schemas import DetokenizeRequest, TokenizeRequest, parse


def select_fields(payload: dict[str, Any], fields: list[str]) -> dict[str, Any]:
    """``response_fields``: keep only these; ``a/b`` brings ``b`` of ``a`` up to the root."""
    out: dict[str, Any] = {}
    for path in fields:
        node: Any = payload
        for key in path.split("/"):
            if not isinstance(node, dict) or key not in node:
                break
            node = node[key]
        else:
            out[path.split("/")[-1]] = node
    return out


async def health(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def current_metrics(state: AppState, scrape: bool = False) -> dict[str, Any]:
    """The snapshot the loop thread publishes after every step (frozen while the server sleeps),
    read on the event loop: no task and no thread hop, so a scrape costs what the event loop
    takes to answer it, decoding or not (measured in benchmarks/ab/serving-{base,direct}.json: the median
    round trip fell from 2.1-2.3x llama-server's to 1.3-1.5x when the queue's worker stopped
    relaying it). In-process callers still get it from the worker (``Engine.metrics``). A
    ``scrape`` starts a new window for the throughput gauges."""
    return state.engine.snapshot(reset_buckets=scrape)


async def metrics(request: Request) -> Response:
    state: AppState = request.app.state.pyllama
    m = await current_metrics(state, scrape=True)
    response = PlainTextResponse(prometheus_text(m), media_type="text/plain; version=0.0.4")
    # llama-server's header, in its case (Starlette would lower-case a name given in headers=)
    response.raw_headers.append((CasedName(b"Process-Start-Time-Unix"), str(int(state.engine.started_at)).encode()))
    return response


async def slots(request: Request) -> Response:
    return JSONResponse((await current_metrics(request.app.state.pyllama))["slots"])


async def queue(request: Request) -> Response:
    """Ours: the requests waiting for a slot, in the order freed slots will take them."""
    waiting = request.app.state.pyllama.engine.queue.waiting()
    entries = [
        {"position": i, "id_task": t.id, "tenant": t.tenant, "priority": t.priority, "waited_ms": round(s * 1e3, 1)}
        for i, (t, s) in enumerate(waiting, 1)
    ]
    return JSONResponse({"n_waiting": len(entries), "waiting": entries})


async def tokenize(request: Request) -> Response:
    state: AppState = request.app.state.pyllama
    req = parse(TokenizeRequest, await json_body(request))
    engine = state.engine

    def run() -> dict[str, Any]:
        tokens = engine.tasks.tokenize(req.content, req.add_special, req.parse_special)
        if not req.with_pieces:
            return {"tokens": tokens}
        out = []
        for t in tokens:
            piece = engine.tasks.piece(t)
            text = valid_utf8(piece)
            out.append({"id": t, "piece": text if text.encode() == piece else list(piece)})
        return {"tokens": out}

    return JSONResponse(await state.bridge.run(run))


async def detokenize(request: Request) -> Response:
    state: AppState = request.app.state.pyllama
    req = parse(DetokenizeRequest, await json_body(request))
    engine = state.engine
    try:
        content = await state.bridge.run(engine.tasks.detokenize, req.tokens)
    except ValueError as exc:
        raise ApiError(str(exc)) from None
    return JSONResponse({"content": content})


async def infill(request: Request) -> Response:
    state: AppState = request.app.state.pyllama
    body = await json_body(request)
    try:
        prompt = await state.bridge.run(state.engine.tasks.infill_tokens, body)
    except NotImplementedError as exc:
        raise ApiError(str(exc), 501, "not_supported_error") from None
    except ValueError as exc:
        raise ApiError(str(exc)) from None
    return await completion(request, body, prompt)


async def completion(request: Request, body: dict[str, Any] | None = None, prompt: Any = None) -> Response:
    state: AppState = request.app.state.pyllama
    if body is None:
        body = await json_body(request)
    tasks = await state.bridge.make_tasks(body, prompt, request=request)
    model = state.model_name
    fields = tasks[0].params.response_fields

    def shape(result: CompletionResult) -> dict[str, Any]:
        """llama-server's native JSON; its end names the model too, and keeps ``response_fields``."""
        out = result.native()
        if not isinstance(result, CompletionFinal):
            return out
        out["model"] = model
        return select_fields(out, fields) if fields else out

    if tasks[0].params.stream:

        def render(r: Result) -> list[Any]:
            return [shape(completion_step(r))]

        return await state.bridge.stream(request, tasks, render, done=None)
    finals = [shape(p) for p in await state.bridge.run_to_end(request, tasks, CompletionFinal)]
    return JSONResponse(finals[0] if len(finals) == 1 else finals)
