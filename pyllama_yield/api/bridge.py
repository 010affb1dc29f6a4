"""Between the HTTP event loop and the server context: post tasks, await results, stream SSE.

The event loop never blocks: tokenizing a request and waiting on the result queue run in worker
threads (the binding releases the GIL), so ``/health`` and ``/metrics`` answer during a long
prompt. A client that goes away gets its tasks cancelled.
"""

from __future__ import annotations

import asyncio
import functools
import math
import sys
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import StreamingResponse

from ..queue import ResponseReader, Result, TaskType
from ..server import CompletionParams, CompletionTask, Engine
from ..server.async_reader import AsyncReader, Doorbell
from ..server.errors import failure_of
from ..server.queue_report import QueuePosition
from ..server.results import Indexed, coalesce_steps, expect
from ..settings.keys import ApiKey
from .auth import request_key
from .errors import ApiError, error_json, failure_error, result_error
from .event_stream import EventStream
from .json_out import dumps

__all__ = ["Bridge", "named_event_sse", "sse"]

T = TypeVar("T")
R = TypeVar("R", bound=Indexed)

INLINE_BODY_BYTES = 1024  # a request body up to this size is tokenized on the event loop


def sse(item: Any) -> str:
    return f"data: {item if isinstance(item, str) else dumps(item)}\n\n"


def named_event_sse(item: dict[str, Any]) -> str:
    """An SSE event with a name (Anthropic's and OpenAI Responses' streams): ``{"event", "data"}``."""
    return f"event: {item['event']}\ndata: {dumps(item['data'])}\n\n"


class DisconnectWatch:
    """Sets ``event`` when the client goes away (the ASGI ``http.disconnect`` message)."""

    def __init__(self, request: Request, event: threading.Event | None = None) -> None:
        self.event = event or threading.Event()
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


class Bridge:
    """Blocking work (tokenizing, waiting for results) runs on threads this bridge owns: a wait
    ends when its reader is stopped or the server stops, and :meth:`close` joins them all, so no
    thread outlives the server."""

    def __init__(
        self,
        engine: Engine,
        poll_interval_s: float = 0.25,
        max_threads: int = 512,
        max_queue: int = 256,
        timeout_s: float = 3600,
    ) -> None:
        self.engine = engine
        self.poll_interval_s = poll_interval_s
        self.max_in_flight = engine.n_parallel + max_queue  # completion tasks running or waiting
        self.timeout_s = timeout_s
        self.in_flight = 0  # only touched on the event loop thread
        self.in_flight_by_tenant: Counter[str] = Counter()  # by API key's tenant ("": none)
        self._pool = ThreadPoolExecutor(max_threads, thread_name_prefix="pyllama-http")
        self._doorbell: Doorbell | None = None  # of the first event loop that reads results

    def _reader(self, reader: ResponseReader, on_stop: Callable[[], None] = lambda: None) -> AsyncReader:
        """``reader`` read on the running loop: through the doorbell when this is its loop (the
        server's one loop); another loop (a test client's) is woken without it."""
        loop = asyncio.get_running_loop()
        if self._doorbell is None and sys.platform != "win32":  # add_reader on a pipe: Unix loops
            self._doorbell = Doorbell(loop)
        doorbell = self._doorbell if self._doorbell is not None and self._doorbell.loop is loop else None
        return AsyncReader(reader, self.poll_interval_s, on_stop, doorbell)

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on a bridge thread, awaited without blocking the event loop."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, functools.partial(fn, *args))

    def close(self) -> None:
        """Join every bridge thread; call after the server context stopped (which wakes waiters,
        and rings no doorbell after that)."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self._doorbell is not None:
            self._doorbell.close()
            self._doorbell = None

    async def call(self, task_type: TaskType, payload: Any = None) -> Result:
        """One task, one result (metrics, slot save/restore)."""
        res = await self.try_call(task_type, payload, lambda: False)
        assert res is not None
        return res

    async def try_call(self, task_type: TaskType, payload: Any, should_stop: Callable[[], bool]) -> Result | None:
        """Like :meth:`call`; None when ``should_stop()`` said so before the result came."""
        reader = self.engine.post(task_type, payload, self.poll_interval_s)
        with self._reader(reader) as results:
            batch = await results.next_batch(should_stop)
        if not batch:
            return None
        if batch[0].is_error:
            raise result_error(batch[0])
        return batch[0]

    async def make_tasks(
        self,
        data: dict[str, Any],
        prompt: Any = None,
        params: CompletionParams | None = None,
        *,
        request: Request | None = None,
    ) -> list[CompletionTask]:
        """Validate and tokenize (see :meth:`build`); a bad request is a 400 in llama-server's words."""
        return await self.build(lambda: self.engine.tasks.make_tasks(data, prompt, params=params), request=request)

    async def build(self, fn: Callable[..., T], *args: Any, request: Request | None = None) -> T:
        """Run a task builder of the server context, its errors as HTTP errors: on a bridge
        thread, or right here for a small ``request`` (:meth:`builds_inline`)."""
        try:
            if request is not None and self.builds_inline(request):
                return fn(*args)
            return await self.run(fn, *args)
        except (ValueError, NotImplementedError) as exc:  # refused: its kind picks the status
            raise failure_error(failure_of(exc)) from None

    def builds_inline(self, request: Request) -> bool:
        """Whether a request's tasks are built on the event loop, not a bridge thread: a body of
        at most ``INLINE_BODY_BYTES`` on a server that takes no media (whose files may be read or
        fetched). Tokenizing and templating that much takes about as long as the two thread hops
        it would cost (1 KiB of text: ~0.2 ms here, a hop there and back ~0.15 ms), while a long
        prompt would hold up every other request's events."""
        size = request.headers.get("content-length")
        small = size is not None and size.isdigit() and int(size) <= INLINE_BODY_BYTES
        return small and self.engine.tasks.projector is None

    def submit(self, request: Request, tasks: list[Any]) -> AsyncReader:
        """Post the tasks, if the queue has room for them (else a 503 with Retry-After) and the
        request's API key its ``max_in_flight`` (else a 429), as that key's tenant and priority."""
        if self.in_flight + len(tasks) > self.max_in_flight:
            raise ApiError(
                f"the server is busy ({self.in_flight} requests in flight); retry later",
                503,
                "unavailable_error",
                headers={"Retry-After": "1"},
            )
        key = request_key(request)
        tenant = key.tenant if key else ""
        if key is not None:
            self._check_limits(key, len(tasks))
        reader = self.engine.submit(
            tasks,
            self.poll_interval_s,
            tenant=key.tenant if key else None,
            min_priority=key.priority if key else 0,
        )
        self.in_flight += len(tasks)
        self.in_flight_by_tenant[tenant] += len(tasks)

        def release() -> None:
            self.in_flight -= len(tasks)
            self.in_flight_by_tenant[tenant] -= len(tasks)
            if not self.in_flight_by_tenant[tenant]:
                del self.in_flight_by_tenant[tenant]

        return self._reader(reader, on_stop=release)

    def _check_limits(self, key: ApiKey, n_tasks: int) -> None:
        """An API key's limits (``max_in_flight``, ``tpm``): over one, a 429 with Retry-After."""
        in_flight = self.in_flight_by_tenant[key.tenant]
        if key.max_in_flight and in_flight + n_tasks > key.max_in_flight:
            message = f"{in_flight} requests of this API key are in flight, its limit is {key.max_in_flight}"
            raise _too_many(f"{message}; retry later", 1)
        if key.tpm:
            used, frees_in_s = self.engine.usage.last_minute(key.tenant)
            if used >= key.tpm:
                message = f"this API key used {used} tokens in the last minute, its limit is {key.tpm}"
                raise _too_many(f"{message}; retry in {math.ceil(frees_in_s)} s", math.ceil(frees_in_s))

    async def _events(
        self,
        reader: AsyncReader,
        first: list[Result],
        n_tasks: int,
        expired: Callable[[], bool],
        render: Callable[[Result], list[Any]],
        done: str | None,
        frame: Callable[[Any], str],
        error_frame: Callable[[ApiError], str],
        coalesce: bool,
    ) -> AsyncIterator[str]:
        """A stream's text from its first results on (see :meth:`stream`): one write per burst of
        results, a waiting task's place as an SSE comment, the reader stopped at the end."""
        batch, n_final = first, 0
        try:
            while True:
                out: list[str] = []
                for res in coalesce_steps(batch) if coalesce else batch:
                    if res.is_error:
                        yield "".join(out) + error_frame(result_error(res))
                        return
                    if isinstance(res.payload, QueuePosition):
                        out.append(res.payload.sse_comment())
                        continue
                    out += [frame(item) for item in render(res)]
                    n_final += res.is_final
                if n_final == n_tasks:
                    yield "".join(out) + (sse(done) if done else "")
                    return
                yield "".join(out)  # one write per burst of tokens
                if expired():
                    yield error_frame(self._timeout_error())
                    return
                batch = await reader.next_batch(expired)  # every result already waiting: one write
                if not batch and not expired():
                    return  # the reader was stopped: nothing more will come
        finally:
            reader.stop()  # cancels the request if the client went away mid-stream

    def _timeout_error(self) -> ApiError:
        return ApiError(f"the request took longer than {self.timeout_s:g} s (--timeout)", 503, "unavailable_error")

    def _deadline(self) -> Callable[[], bool]:
        end = time.monotonic() + self.timeout_s
        return lambda: time.monotonic() > end

    async def run_to_end(self, request: Request, tasks: list[Any], kind: type[R]) -> list[R]:
        """Non-streaming: every task's final result (each a ``kind``), in the request's order. A
        disconnect cancels."""
        finals: dict[int, R] = {}
        expired = self._deadline()
        with DisconnectWatch(request) as watch, self.submit(request, tasks) as reader:
            while len(finals) < len(tasks):
                batch = await reader.next_batch(lambda: watch.event.is_set() or expired())
                if not batch and expired():
                    raise self._timeout_error()
                if not batch:  # the client left
                    raise ApiError("client disconnected", 499)
                for res in batch:
                    if res.is_error:
                        raise result_error(res)
                    if res.is_final:
                        finals[res.id] = expect(res, kind)
        return sorted(finals.values(), key=lambda p: p.index)

    async def _first_results(self, reader: AsyncReader, expired: Callable[[], bool]) -> list[Result]:
        """A stream's first results, awaited before its response starts: a request refused by the
        server context (or one that timed out) is then a plain HTTP error."""
        first = await reader.next_batch(expired)
        if not first or first[0].is_error:
            reader.stop()
            if not first:
                raise self._timeout_error()
            raise result_error(first[0])
        return first

    async def stream(
        self,
        request: Request,
        tasks: list[CompletionTask],
        render: Callable[[Result], list[Any]],
        done: str | None,
        frame: Callable[[Any], str] = sse,
        error_frame: Callable[[ApiError], str] = lambda exc: sse({"error": error_json(exc)}),
        media_type: str = "text/event-stream",
        coalesce: bool = False,
    ) -> StreamingResponse:
        """Server-sent events (or, with another ``frame``/``media_type``, another framing such as
        Ollama's NDJSON); ``render`` turns a result into items, ``done`` ends the stream (OpenAI's
        ``[DONE]``; llama-server's native stream has none), ``error_frame`` writes a failure.

        The first result is awaited before the response starts, so a rejected request is a plain
        HTTP error, not an event stream. ``coalesce``: tokens of a task that came together are
        rendered as one (``coalesce_steps``), for renders that cost more than a token's worth."""
        expired = self._deadline()
        sse_stream = media_type == "text/event-stream"
        for t in tasks:  # a waiting task is told its place: an SSE comment (NDJSON has none)
            t.params.report_position = sse_stream
        reader = self.submit(request, tasks)
        first = await self._first_results(reader, expired)
        events = self._events(reader, first, len(tasks), expired, render, done, frame, error_frame, coalesce)

        async def stop_reader() -> None:
            # On the event loop: Starlette would run a plain function on a worker thread (a
            # thread hop per request), and the reader's timer handle belongs to this loop.
            reader.stop()

        return EventStream(
            events,
            media_type=media_type,
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            background=BackgroundTask(stop_reader),  # also when the stream never started
        )


def _too_many(message: str, retry_after_s: int) -> ApiError:
    return ApiError(message, 429, "rate_limit_error", headers={"Retry-After": str(max(1, retry_after_s))})
