"""EventStream: a client that leaves ends the stream (and so the generation) at once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from starlette.background import BackgroundTask

from pyllama_yield.api.event_stream import EventStream

SCOPE = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "method": "POST", "headers": []}


def _run(response: EventStream, leave: asyncio.Event | None) -> list[bytes]:
    """Serve ``response`` to a client that leaves when ``leave`` is set (never if None)."""
    sent: list[bytes] = []

    async def main() -> None:
        async def receive() -> dict:
            if leave is None:
                await asyncio.Event().wait()
            assert leave is not None
            await leave.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict) -> None:
            if message["type"] == "http.response.body":
                sent.append(message["body"])

        await asyncio.wait_for(response(SCOPE, receive, send), 10)

    asyncio.run(main())
    return sent


def test_a_client_that_leaves_closes_the_events_and_the_background_runs():
    leave = asyncio.Event()
    log: list[str] = []

    async def events() -> AsyncIterator[str]:
        try:
            for i in range(10**9):  # a generation that would never end by itself
                if i == 3:
                    leave.set()
                yield f"data: {i}\n\n"
                await asyncio.sleep(0)
        finally:
            log.append("events closed")

    async def background() -> None:
        log.append("background ran")

    sent = _run(EventStream(events(), background=BackgroundTask(background)), leave)
    assert log == ["events closed", "background ran"]
    assert 3 <= len(sent) < 100


def test_a_complete_answer_is_not_cut():
    async def events() -> AsyncIterator[str]:
        for i in range(5):
            yield f"data: {i}\n\n"

    sent = _run(EventStream(events()), None)
    assert sent == [f"data: {i}\n\n".encode() for i in range(5)] + [b""]


def test_a_cancel_from_elsewhere_still_cancels():
    """Only the client's leaving is absorbed; a shutdown's cancellation goes on up."""

    async def main() -> None:
        streaming = asyncio.Event()

        async def events() -> AsyncIterator[str]:
            while True:
                streaming.set()
                yield "data: x\n\n"
                await asyncio.sleep(0.01)

        async def receive() -> dict:
            await asyncio.Event().wait()
            return {}

        async def send(message: dict) -> None:
            pass

        task = asyncio.get_running_loop().create_task(EventStream(events())(SCOPE, receive, send))
        await asyncio.wait_for(streaming.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)

    asyncio.run(main())


def test_tokens_that_came_together_render_as_one_step():
    """A reader that fell behind gets one step per run of a task's tokens: text joined, tokens and
    probabilities in order; other tasks' results and the final one stay apart."""
    from pyllama_yield.queue import Result
    from pyllama_yield.server.probs import TokenProb
    from pyllama_yield.server.results import TokenStep, coalesce_steps

    def step(task: int, text: str, token: int, probs: bool = False) -> Result:
        p = TokenStep(0, text, [token], 0, token, 3, 0, probs=[TokenProb(token, b"", 1.0)] if probs else None)
        return Result(task, p, is_final=False)

    final = Result(1, "the end")
    got = coalesce_steps([step(1, "a", 10), step(1, "b", 11, probs=True), step(2, "x", 20), step(1, "c", 12), final])
    assert [r.id for r in got] == [1, 2, 1, 1]
    first = got[0].payload
    assert isinstance(first, TokenStep)
    assert (first.content, first.tokens, first.tokens_predicted, first.probs) == (
        "ab",
        [10, 11],
        11,
        [TokenProb(11, b"", 1.0)],
    )
    assert got[-1] is final and got[2].payload.content == "c"
