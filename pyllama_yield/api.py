"""HTTP API over the server context: llama-server's endpoints and the OpenAI-compatible ones.

The HTTP layer only posts tasks and reads results (``ResponseReader``); it never calls llama.cpp.
Blocking reads run in worker threads so the event loop keeps serving (``/metrics`` answers while
a completion decodes). A client that disconnects gets its request cancelled (a cancel task).
Needs the ``server`` extra: ``pip install 'pyllama-yield[server]'``.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from .queue import ResponseReader, Result, Task, TaskType
from .server import ServerContext
from .slots import CompletionRequest

# llama-server's /completion fields that map 1:1 onto CompletionRequest
_COMPLETION_FIELDS = {
    "prompt",
    "n_predict",
    "temperature",
    "top_k",
    "top_p",
    "min_p",
    "seed",
    "repeat_penalty",
    "repeat_last_n",
    "frequency_penalty",
    "presence_penalty",
    "stop",
    "ignore_eos",
    "stream",
    "cache_prompt",
    "id_slot",
}
# OpenAI fields we accept (and how they map); anything else is a 400
_OPENAI_COMMON = {
    "model",
    "max_tokens",
    "temperature",
    "top_p",
    "stop",
    "stream",
    "seed",
    "n",
    "presence_penalty",
    "frequency_penalty",
    "user",
    "top_k",
    "min_p",
    "ignore_eos",
    "repeat_penalty",
    "cache_prompt",
    "stream_options",
}
_OPENAI_COMPLETION = _OPENAI_COMMON | {"prompt"}
_OPENAI_CHAT = _OPENAI_COMMON | {"messages", "max_completion_tokens"}


class ApiError(Exception):
    def __init__(self, message: str, status: int = 400, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


def error_response(message: str, status: int, kind: str = "invalid_request_error") -> JSONResponse:
    """The OpenAI error shape, which llama-server also uses."""
    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status_code=status)


async def _json_body(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ApiError(f"malformed JSON body: {exc}") from exc
    if not isinstance(body, dict):
        raise ApiError("the JSON body must be an object")
    return body


def _check_fields(body: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise ApiError(f"unknown field(s): {', '.join(unknown)}")


def _request_from(fields: dict[str, Any]) -> CompletionRequest:
    try:
        return CompletionRequest.from_dict(fields)
    except (ValueError, TypeError) as exc:
        raise ApiError(str(exc)) from exc


class DisconnectWatch:
    """Sets ``event`` when the client goes away (the ASGI ``http.disconnect`` message)."""

    def __init__(self, request: Request) -> None:
        self.event = threading.Event()
        self._request = request
        self._task: asyncio.Task | None = None

    async def _watch(self) -> None:
        while True:
            message = await self._request.receive()
            if message["type"] == "http.disconnect":
                self.event.set()
                return

    def __enter__(self) -> DisconnectWatch:
        self._task = asyncio.get_running_loop().create_task(self._watch())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()


def _result_error(result: Result) -> ApiError:
    payload = result.payload or {}
    code = payload.get("code", 500)
    return ApiError(
        payload.get("error", "request failed"),
        400 if code == 400 else code,
        "invalid_request_error" if code == 400 else "server_error",
    )


def build_app(srv: ServerContext, *, api_key: str | None = None, poll_interval_s: float = 0.25) -> Starlette:
    """The Starlette app serving ``srv`` (which must be started)."""

    async def next_result(reader: ResponseReader, should_stop: Callable[[], bool]) -> Result | None:
        return await anyio.to_thread.run_sync(reader.next, should_stop, abandon_on_cancel=True)

    async def call(task_type: TaskType, payload: Any = None) -> Result:
        with ResponseReader(srv.queue, srv.responses, poll_interval_s) as reader:
            reader.post_task(Task(task_type, payload=payload))
            res = await next_result(reader, lambda: False)
        assert res is not None
        if res.is_error:
            raise _result_error(res)
        return res

    def submit(req: CompletionRequest) -> ResponseReader:
        reader = ResponseReader(srv.queue, srv.responses, poll_interval_s)
        srv.queue.wait_until_no_sleep()
        reader.post_task(Task(TaskType.COMPLETION, payload=req))
        return reader

    async def run_to_end(request: Request, req: CompletionRequest) -> dict[str, Any]:
        """Non-streaming: wait for the final result; a disconnect cancels the request."""
        with DisconnectWatch(request) as watch, submit(req) as reader:
            while True:
                res = await next_result(reader, watch.event.is_set)
                if res is None:  # the client left
                    raise ApiError("client disconnected", 499)
                if res.is_error:
                    raise _result_error(res)
                if res.is_final:
                    return res.payload

    async def stream(req: CompletionRequest, render: Callable[[Result], list[Any]]) -> StreamingResponse:
        """Server-sent events; ``render`` turns a result into SSE data items (dicts or '[DONE]').

        The first result is awaited before the response starts, so a rejected request is a
        plain HTTP error, not an event stream."""
        reader = submit(req)
        first = await next_result(reader, lambda: False)
        if first is not None and first.is_error:
            reader.stop()
            raise _result_error(first)

        async def events() -> AsyncIterator[str]:
            batch = [first] if first is not None else []
            try:
                while batch:
                    out = []
                    for res in batch:
                        if res.is_error:
                            err = _result_error(res)
                            out.append(_sse({"error": {"message": str(err), "type": err.kind, "code": err.status}}))
                            break
                        out += [_sse(item) for item in render(res)]
                    yield "".join(out)  # one write per burst of tokens
                    if batch[-1].is_error or batch[-1].is_final:
                        return
                    # one thread hop per burst: every result already waiting comes along
                    batch = await anyio.to_thread.run_sync(reader.next_available, lambda: False, abandon_on_cancel=True)
            finally:
                reader.stop()  # cancels the request if the client went away mid-stream

        return StreamingResponse(
            events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        )

    # --- endpoints ------------------------------------------------------------------------
    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def metrics(request: Request) -> Response:
        m = (await call(TaskType.METRICS)).payload
        return PlainTextResponse(prometheus_text(m), media_type="text/plain; version=0.0.4")

    async def slots(request: Request) -> Response:
        return JSONResponse((await call(TaskType.METRICS)).payload["slots"])

    async def models(request: Request) -> Response:
        info = srv.info
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {
                        "id": info["model"],
                        "object": "model",
                        "created": int(srv._t_start),
                        "owned_by": "pyllama-yield",
                        "meta": {k: info[k] for k in ("n_vocab", "n_ctx_train", "n_embd", "n_params", "description")},
                    }
                ],
            }
        )

    async def tokenize(request: Request) -> Response:
        body = await _json_body(request)
        _check_fields(body, {"content", "add_special", "parse_special", "with_pieces"})
        return JSONResponse((await call(TaskType.TOKENIZE, body)).payload)

    async def detokenize(request: Request) -> Response:
        body = await _json_body(request)
        _check_fields(body, {"tokens"})
        return JSONResponse((await call(TaskType.DETOKENIZE, body)).payload)

    async def completion(request: Request) -> Response:
        body = await _json_body(request)
        _check_fields(body, _COMPLETION_FIELDS)
        req = _request_from(body)
        model = srv.info["model"]
        if req.stream:
            return await stream(req, lambda r: [{**r.payload, "model": model}])
        return JSONResponse({**await run_to_end(request, req), "model": model})

    async def v1_completions(request: Request) -> Response:
        body = await _json_body(request)
        _check_fields(body, _OPENAI_COMPLETION)
        prompt = body.get("prompt", "")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        req = _request_from({"prompt": prompt, **_openai_params(body)})
        return await _openai_reply(request, req, chat=False)

    async def v1_chat(request: Request) -> Response:
        body = await _json_body(request)
        _check_fields(body, _OPENAI_CHAT)
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ApiError("'messages' must be a non-empty list")
        for m in messages:  # OpenAI content may be a list of text parts
            if isinstance(m, dict) and isinstance(m.get("content"), list):
                m["content"] = "".join(p.get("text", "") for p in m["content"] if isinstance(p, dict))
        req = _request_from({"messages": messages, "prompt": "", **_openai_params(body)})
        return await _openai_reply(request, req, chat=True)

    async def _openai_reply(request: Request, req: CompletionRequest, chat: bool) -> Response:
        cid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
        created = int(time.time())
        obj = "chat.completion" if chat else "text_completion"
        model = srv.info["model"]

        def choice(payload: dict[str, Any], final: bool, delta: bool) -> dict[str, Any]:
            finish = None
            if final:
                finish = "length" if payload.get("stop_type") == "limit" else "stop"
            text = payload.get("content", "")
            if not chat:
                return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
            key = "delta" if delta else "message"
            body = {"content": text} if delta else {"role": "assistant", "content": text}
            return {"index": 0, key: body, "logprobs": None, "finish_reason": finish}

        def usage(p: dict[str, Any]) -> dict[str, int]:
            return {
                "prompt_tokens": p["tokens_evaluated"],
                "completion_tokens": p["tokens_predicted"],
                "total_tokens": p["tokens_evaluated"] + p["tokens_predicted"],
            }

        if req.stream:
            first = [True]

            def render(r: Result) -> list[Any]:
                out: list[Any] = []
                chunk_obj = obj + ".chunk" if chat else obj
                if chat and first[0]:
                    first[0] = False
                    out.append(
                        {
                            "id": cid,
                            "object": chunk_obj,
                            "created": created,
                            "model": model,
                            "choices": [
                                {
                                    "index": 0,
                                    "delta": {"role": "assistant", "content": ""},
                                    "logprobs": None,
                                    "finish_reason": None,
                                }
                            ],
                        }
                    )
                chunk = {
                    "id": cid,
                    "object": chunk_obj,
                    "created": created,
                    "model": model,
                    "choices": [choice(r.payload, r.is_final, delta=True)],
                }
                if r.is_final:
                    chunk["usage"] = usage(r.payload)
                out.append(chunk)
                if r.is_final:
                    out.append("[DONE]")
                return out

            return await stream(req, render)

        p = await run_to_end(request, req)
        return JSONResponse(
            {
                "id": cid,
                "object": obj,
                "created": created,
                "model": model,
                "choices": [choice(p, True, delta=False)],
                "usage": usage(p),
                "timings": p["timings"],
            }
        )

    # --- auth and errors --------------------------------------------------------------------
    def endpoint(fn: Callable[[Request], Any], public: bool = False) -> Callable[[Request], Any]:
        async def wrapped(request: Request) -> Response:
            if api_key and not public:
                auth = request.headers.get("authorization", "")
                given = auth[7:] if auth.lower().startswith("bearer ") else request.headers.get("x-api-key")
                if given != api_key:
                    return error_response("invalid or missing API key", 401, "authentication_error")
            try:
                return await fn(request)
            except ApiError as exc:
                return error_response(str(exc), exc.status, exc.kind)

        return wrapped

    routes = [
        Route("/health", endpoint(health, public=True), methods=["GET"]),
        Route("/v1/health", endpoint(health, public=True), methods=["GET"]),
        Route("/metrics", endpoint(metrics), methods=["GET"]),
        Route("/slots", endpoint(slots), methods=["GET"]),
        Route("/v1/models", endpoint(models), methods=["GET"]),
        Route("/models", endpoint(models), methods=["GET"]),
        Route("/tokenize", endpoint(tokenize), methods=["POST"]),
        Route("/detokenize", endpoint(detokenize), methods=["POST"]),
        Route("/completion", endpoint(completion), methods=["POST"]),
        Route("/completions", endpoint(completion), methods=["POST"]),
        Route("/v1/completions", endpoint(v1_completions), methods=["POST"]),
        Route("/v1/chat/completions", endpoint(v1_chat), methods=["POST"]),
        Route("/chat/completions", endpoint(v1_chat), methods=["POST"]),
    ]
    return Starlette(routes=routes)


def _openai_params(body: dict[str, Any]) -> dict[str, Any]:
    n = body.get("n", 1)
    if n != 1:
        raise ApiError("only n=1 is supported")
    out: dict[str, Any] = {"stream": body.get("stream", False)}
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None:
        out["n_predict"] = max_tokens
    stop = body.get("stop")
    if stop is not None:
        out["stop"] = [stop] if isinstance(stop, str) else stop
    for key in (
        "temperature",
        "top_p",
        "seed",
        "presence_penalty",
        "frequency_penalty",
        "top_k",
        "min_p",
        "ignore_eos",
        "repeat_penalty",
        "cache_prompt",
    ):
        if body.get(key) is not None:
            out[key] = body[key]
    return out


def _sse(item: Any) -> str:
    return f"data: {item if isinstance(item, str) else json.dumps(item)}\n\n"


def prometheus_text(m: dict[str, Any]) -> str:
    """The metrics snapshot in Prometheus text format, with llama-server's metric names."""
    prompt_rate = m["prompt_tokens"] / m["prompt_seconds"] if m["prompt_seconds"] else 0.0
    gen_rate = m["predicted_tokens"] / m["predicted_seconds"] if m["predicted_seconds"] else 0.0
    metrics = [
        ("counter", "prompt_tokens_total", "Number of prompt tokens processed.", m["prompt_tokens"]),
        ("counter", "prompt_seconds_total", "Prompt process time", m["prompt_seconds"]),
        ("counter", "tokens_predicted_total", "Number of generation tokens processed.", m["predicted_tokens"]),
        ("counter", "tokens_predicted_seconds_total", "Predict process time", m["predicted_seconds"]),
        ("counter", "n_decode_total", "Total number of llama_decode() calls", m["n_decode"]),
        ("counter", "n_draft_tokens_total", "Number of speculative draft tokens", m["draft_tokens"]),
        ("counter", "n_draft_accepted_total", "Number of accepted speculative draft tokens", m["draft_accepted"]),
        ("counter", "requests_finished_total", "Number of finished requests", m["requests_finished"]),
        ("counter", "requests_failed_total", "Number of failed requests", m["requests_failed"]),
        ("gauge", "prompt_tokens_seconds", "Average prompt throughput in tokens/s.", prompt_rate),
        ("gauge", "predicted_tokens_seconds", "Average generation throughput in tokens/s.", gen_rate),
        (
            "gauge",
            "kv_cache_usage_ratio",
            "KV-cache usage. 1 means 100 percent usage.",
            m["kv_cells_used"] / m["n_ctx"] if m["n_ctx"] else 0.0,
        ),
        ("gauge", "kv_cache_tokens", "KV-cache tokens.", m["kv_cells_used"]),
        ("gauge", "requests_processing", "Number of requests processing.", m["requests_processing"]),
        ("gauge", "requests_deferred", "Number of requests deferred.", m["requests_deferred"]),
    ]
    lines = []
    for kind, name, help_text, value in metrics:
        lines += [f"# HELP llamacpp:{name} {help_text}", f"# TYPE llamacpp:{name} {kind}", f"llamacpp:{name} {value}"]
    return "\n".join(lines) + "\n"
