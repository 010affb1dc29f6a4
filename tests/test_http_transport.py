"""A response's head leaves with the first part of its body (``api.http_server.HeadWithBody``)."""

from __future__ import annotations

import asyncio

from pyllama_yield.api.http_server import HeadWithBody

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n"


class RecordingTransport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        assert not self.closed
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def write_eof(self) -> None:
        self.writes.append(b"<eof>")

    def get_extra_info(self, name: str) -> str:
        return f"info:{name}"


def test_a_head_is_sent_with_the_body_that_follows_it():
    async def main() -> list[bytes]:
        wire = RecordingTransport()
        transport = HeadWithBody(wire, asyncio.get_running_loop())  # type: ignore[arg-type]
        transport.write(HEAD)
        transport.write(b"5\r\nhello\r\n")
        transport.write(b"0\r\n\r\n")
        assert transport.get_extra_info("peername") == "info:peername"  # the rest is the transport's
        await asyncio.sleep(0)  # the turn ends: nothing was left to send
        return wire.writes

    assert asyncio.run(main()) == [HEAD + b"5\r\nhello\r\n", b"0\r\n\r\n"]


def test_a_head_without_a_body_in_the_same_turn_leaves_at_its_end_and_before_a_close():
    async def main() -> tuple[list[bytes], list[bytes]]:
        loop = asyncio.get_running_loop()
        alone, closing = RecordingTransport(), RecordingTransport()
        HeadWithBody(alone, loop).write(b"HTTP/1.1 100 Continue\r\n\r\n")  # type: ignore[arg-type]
        assert alone.writes == []
        await asyncio.sleep(0)
        t = HeadWithBody(closing, loop)  # type: ignore[arg-type]
        t.write(HEAD)
        t.close()  # e.g. a response to a client that asked to close the connection
        assert closing.closed
        await asyncio.sleep(0)
        return alone.writes, closing.writes

    assert asyncio.run(main()) == ([b"HTTP/1.1 100 Continue\r\n\r\n"], [HEAD])


def test_writelines_and_eof_keep_the_order_after_a_held_head():
    async def main() -> list[bytes]:
        wire = RecordingTransport()
        transport = HeadWithBody(wire, asyncio.get_running_loop())  # type: ignore[arg-type]
        transport.write(HEAD)
        transport.writelines([b"5\r\n", b"hello\r\n"])
        transport.write(HEAD)
        transport.write_eof()
        return wire.writes

    assert asyncio.run(main()) == [HEAD + b"5\r\nhello\r\n", HEAD, b"<eof>"]
