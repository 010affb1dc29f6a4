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
