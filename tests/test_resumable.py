"""Resumable stream sessions (api/resumable.py) without a server: buffering, offsets, expiry, lookup."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

pytest.importorskip("starlette")

from starlette.responses import StreamingResponse  # noqa: E402

from pyllama_yield.api.resumable import OffsetLost, StreamSession, StreamSessions  # noqa: E402

pytestmark = pytest.mark.timeout(30)


async def collect(chunks: AsyncIterator[bytes]) -> bytes:
    return b"".join([c async for c in chunks])


def test_reader_gets_buffered_then_live_bytes_until_finish() -> None:
    async def main() -> bytes:
        session = StreamSession("c")
        session.append(b"data: 1\n\n")
        reader = asyncio.ensure_future(collect(session.read(0)))
        await asyncio.sleep(0)  # the reader drained what was there and now waits
        session.append(b"data: 2\n\n")
        session.finish()
        session.append(b"ignored after the end")
        return await asyncio.wait_for(reader, 5)

    assert asyncio.run(main()) == b"data: 1\n\ndata: 2\n\n"


def test_cap_drops_the_oldest_bytes() -> None:
    async def main() -> None:
        session = StreamSession("c", max_bytes=8)
        session.append(b"0123456789")
        session.append(b"ab")
        assert (session.dropped, session.total_bytes) == (4, 12)
        session.finish()
        assert await collect(session.read(6)) == b"6789ab"
        with pytest.raises(OffsetLost):
            await collect(session.read(3))

    asyncio.run(main())


def test_finished_sessions_expire_and_lookup_matches_model_variants() -> None:
    now = [1000.0]
    sessions = StreamSessions(ttl_s=300, clock=lambda: now[0])

    async def main() -> None:
        for cid in ("conv", "conv::org/model:Q8", "conversation", "other"):
            sessions.resumable(cid, StreamingResponse(iter_events()))
        pumps = [s.pump for s in sessions.lookup(["conv", "conversation", "other"])]
        await asyncio.wait_for(asyncio.gather(*pumps), 5)  # they copied the two events and finished
        found = sorted(s.conversation_id for s in sessions.lookup(["conv"]))
        assert found == ["conv", "conv::org/model:Q8"]  # not "conversation": no prefix guessing
        assert all(s.done for s in sessions.lookup(["conv", "other"]))
        for s in sessions.lookup(["conv", "conversation", "other"]):
            s.completed_at = 900  # ended 100 s ago: still resumable
        assert sessions.get("other") is not None
        now[0] = 1201.0  # 301 s after the end
        assert sessions.get("other") is None and sessions.lookup(["conv"]) == []

    asyncio.run(main())


async def iter_events() -> AsyncIterator[str]:
    yield "data: a\n\n"
    yield "data: b\n\n"


def test_stop_cancels_the_pump_and_closes_the_events() -> None:
    closed = asyncio.Event()

    async def endless() -> AsyncIterator[str]:
        try:
            while True:
                yield "data: x\n\n"
                await asyncio.sleep(0.001)
        finally:
            closed.set()  # what cancels the generation in the real stream

    async def main() -> None:
        sessions = StreamSessions()
        response = sessions.resumable("c", StreamingResponse(endless()))
        reader = asyncio.ensure_future(collect(response.body_iterator))  # type: ignore[arg-type]
        session = sessions.get("c")
        assert session is not None
        while session.total_bytes == 0:  # until the pump copied a first event
            await asyncio.sleep(0)
        sessions.stop("c")
        await asyncio.wait_for(closed.wait(), 5)
        assert (await asyncio.wait_for(reader, 5)).startswith(b"data: x\n\n")
        assert sessions.get("c") is None

    asyncio.run(main())


def test_a_new_request_on_the_conversation_replaces_the_old_one() -> None:
    async def main() -> None:
        sessions = StreamSessions()
        sessions.resumable("c", StreamingResponse(iter_events()))
        first = sessions.get("c")
        sessions.resumable("c", StreamingResponse(iter_events()))
        assert first is not None and first.cancelled and sessions.get("c") is not first
        second = sessions.get("c")
        assert second is not None and second.pump is not None
        await asyncio.wait_for(second.pump, 5)

    asyncio.run(main())
