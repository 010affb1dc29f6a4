"""The generation step's one C call (ring the doorbells, decode, sample every plain slot), and the
doorbells: a step's results wake an event loop through a pipe, rung by that call."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest

from pyllama_yield.common import CommonSampler, decode_and_sample, sample_and_accept_many
from pyllama_yield.llama import Batch, Context, InvalidBatchError
from pyllama_yield.queue import ResponseReader, Result, ServerQueue, ServerResponse, Task, TaskType
from pyllama_yield.server.async_reader import AsyncReader, Doorbell

pytestmark = pytest.mark.skipif(os.name == "nt", reason="doorbells are pipes watched by a Unix event loop")


_QUEUE = ServerQueue()  # gives the readers their ids; its loop never runs
RING = (1).to_bytes(8, "little")  # what a ring writes: an eventfd's 1


def _reader(responses: ServerResponse) -> ResponseReader:
    reader = ResponseReader(_QUEUE, responses)
    reader.post_task(Task(TaskType.METRICS))  # never run: the test sends its results itself
    return reader


def _steps(model, fused: bool, doorbells: list[int] = ()) -> list[list[int]]:  # noqa: ANN001
    """Six greedy and seeded tokens for three sequences, decoded and sampled in one call or two."""
    params = [{"temp": 0.0}, {"temp": 1.0, "seed": 5}, {"temp": 0.8, "seed": 6, "top_k": 4}]
    with Context(model, n_ctx=768, n_seq_max=3, n_threads=1) as ctx, Batch(8, 3) as batch:
        samplers = [CommonSampler(model, p) for p in params]
        last, out = [model.vocab.bos] * 3, []
        for pos in range(6):
            batch.clear()
            for seq in range(3):
                batch.add(last[seq], pos, seq, logits=True)
            if fused:
                last = decode_and_sample(ctx, batch, samplers, [0, 1, 2], 1, doorbells)
            else:
                ctx.decode(batch)
                last = sample_and_accept_many(samplers, ctx, [0, 1, 2], 1)
            out.append(last)
        for smp in samplers:
            smp.close()
    return out


def test_one_call_samples_as_decode_then_sample(tiny_model):
    assert _steps(tiny_model, fused=True) == _steps(tiny_model, fused=False)


def test_the_step_rings_each_doorbell_once_per_decode(tiny_model):
    pipes = [os.pipe() for _ in range(2)]
    try:
        for r, _ in pipes:
            os.set_blocking(r, False)
        _steps(tiny_model, fused=True, doorbells=[w for _, w in pipes])
        for r, _ in pipes:
            assert os.read(r, 4096) == RING * 6
    finally:
        for fds in pipes:
            for fd in fds:
                os.close(fd)


def test_a_step_without_samplers_decodes_and_a_failed_decode_raises(tiny_model):
    """No sampler: the outputs are there all the same; a decode that fails raises as decode does."""
    with Context(tiny_model, n_ctx=256, n_batch=32, n_threads=1) as ctx, Batch(32) as batch:
        batch.add_sequence(tiny_model.vocab.tokenize("Once upon a time"))
        assert decode_and_sample(ctx, batch, [], [], 1) == []
        assert ctx.logits().shape == (tiny_model.vocab.n_tokens,)
        batch.clear()
        batch.add(5, 100, 0, logits=True)  # positions must follow on: llama.cpp refuses the batch
        with pytest.raises(InvalidBatchError):
            decode_and_sample(ctx, batch, [], [], 1)


def test_a_full_doorbell_never_blocks_the_step(tiny_model):
    """A pipe nobody drains fills up; the loop thread's decode must go on regardless."""
    r, w = os.pipe()
    os.set_blocking(w, False)
    try:
        while True:  # fill it
            try:
                os.write(w, b"\x00" * 65536)
            except BlockingIOError:
                break
        with Context(tiny_model, n_ctx=256, n_batch=32, n_threads=1) as ctx, Batch(32) as batch:
            batch.add(1, 0, 0, logits=True)
            decode_and_sample(ctx, batch, [], [], 1, [w])
    finally:
        os.close(r)
        os.close(w)


def test_held_results_wake_the_loop_when_the_holder_rings():
    """A deferring flush delivers the results but leaves the ring to the holder: the loop's
    reader wakes only once it is rung (here by ``ring``, in the server by the decode call)."""
    from pyllama_yield.queue import ring

    responses = ServerResponse()
    reader = _reader(responses)
    [task_id] = reader.ids
    rung = threading.Event()
    rings: list[int] = []
    got: list[list[Result]] = []

    async def main() -> None:
        doorbell = Doorbell(asyncio.get_running_loop())
        try:
            with AsyncReader(reader, poll_interval_s=60, doorbell=doorbell) as results:

                def loop_thread() -> None:
                    responses.hold()
                    responses.send(Result(task_id, "partial", is_final=False))
                    responses.flush(keep_holding=True, defer_rings=True)
                    rings.extend(responses.take_rings())
                    rung.set()
                    ring(rings)
                    responses.flush()

                t = threading.Thread(target=loop_thread)
                t.start()
                got.append(await asyncio.wait_for(results.next_batch(), 10))
                t.join(10)
        finally:
            doorbell.close()

    asyncio.run(main())
    assert rung.is_set() and len(rings) == 1
    assert [r.payload for r in got[0]] == ["partial"]


def test_a_flush_rings_what_an_earlier_deferring_flush_left():
    """If the decode never came (a failed step), the next plain flush rings the doorbells."""
    responses = ServerResponse()
    reader = _reader(responses)
    [task_id] = reader.ids
    r, w = os.pipe()
    try:
        reader.listen(lambda: w)
        responses.hold()
        responses.send(Result(task_id, "a", is_final=False))
        responses.flush(keep_holding=True, defer_rings=True)
        os.set_blocking(r, False)
        with pytest.raises(BlockingIOError):
            os.read(r, 64)  # not rung yet
        responses.flush()
        assert os.read(r, 64) == RING
        assert [x.payload for x in reader.take_available()] == ["a"]
    finally:
        os.close(r)
        os.close(w)


def test_many_readers_one_ring_per_delivery():
    """A step's results for many readers of one loop ring its doorbell once."""
    responses = ServerResponse()
    readers = [_reader(responses) for _ in range(8)]
    r, w = os.pipe()
    try:
        for rd in readers:
            rd.listen(lambda: w)
        responses.send_many([Result(rd.ids[0], i, is_final=True) for i, rd in enumerate(readers)])
        os.set_blocking(r, False)
        assert os.read(r, 64) == RING
        assert [[x.payload for x in rd.take_available()] for rd in readers] == [[i] for i in range(8)]
    finally:
        os.close(r)
        os.close(w)
