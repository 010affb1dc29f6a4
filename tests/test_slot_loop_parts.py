"""The slot loop's parts built alone, from their collaborators, without a model: each names what it
works with in its constructor, so stand-ins are enough to check what it does."""

from __future__ import annotations

import re
from typing import Any

import pytest

from pyllama_yield.queue import Result, ServerQueue, Task, TaskType
from pyllama_yield.server.emitter import SlotEmitter
from pyllama_yield.server.errors import EngineFailure, ErrorKind
from pyllama_yield.server.kv_caches import KvCaches
from pyllama_yield.server.media import MediaMemory
from pyllama_yield.server.metrics import Stats
from pyllama_yield.server.slot import Slot, SlotMemory, SlotState
from pyllama_yield.server.slot_files import SlotFiles
from pyllama_yield.server.speculative import NoDraft
from pyllama_yield.server.usage import TenantUsage


class FakeContext:
    """Records the KV-cache calls a part makes."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.closed = False

    def seq_rm(self, seq: int, p0: int = -1, p1: int = -1) -> bool:
        self.calls.append(("rm", seq, p0, p1))
        return True

    def seq_add(self, seq: int, p0: int, p1: int, delta: int) -> None:
        self.calls.append(("add", seq, p0, p1, delta))

    def close(self) -> None:
        self.closed = True


class FakeDraft(NoDraft):
    def __init__(self, ctx: FakeContext) -> None:
        self.ctx = ctx

    @property
    def contexts(self) -> tuple[Any, ...]:  # type: ignore[override]
        return (self.ctx,)


class FakeResponses:
    def __init__(self) -> None:
        self.sent: list[Result] = []

    def send(self, result: Result) -> None:
        self.sent.append(result)


def _caches() -> tuple[KvCaches, FakeContext, FakeContext]:
    target, draft = FakeContext(), FakeContext()
    return KvCaches(lambda: target, FakeDraft(draft)), target, draft  # type: ignore[arg-type,return-value]


def test_a_context_shift_moves_both_caches_and_drops_the_checkpoints():
    kv, target, draft = _caches()
    s = Slot(0, memory=SlotMemory(list(range(10))))
    s.memory.checkpoints = ["stale"]  # type: ignore[list-item]
    kv.shift(s, n_keep=2, n_discard=3)
    for ctx in (target, draft):
        assert ctx.calls == [("rm", 0, 2, 5), ("add", 0, 5, 10, -3)]
    assert s.memory.tokens == [0, 1, 5, 6, 7, 8, 9] and s.memory.checkpoints == []


def test_clearing_idle_caches_leaves_busy_slots_alone():
    kv, target, _ = _caches()
    idle, busy, empty = Slot(0, memory=SlotMemory([1, 2])), Slot(1, memory=SlotMemory([3])), Slot(2)
    busy.state = SlotState.GENERATING
    assert kv.clear_idle([idle, busy, empty])
    assert idle.memory.tokens == [] and busy.memory.tokens == [3]
    assert [c[1] for c in target.calls] == [0]
    assert not kv.clear_idle([idle, busy, empty])  # nothing left to free


def test_a_failed_slot_sends_its_error_counts_it_frees_its_cache_and_resumes_a_deferred_task():
    kv, target, _ = _caches()
    queue, responses = ServerQueue(), FakeResponses()
    slots = [Slot(0)]
    stats = Stats(slots, queue, n_ctx_slot=64, n_ctx=64)
    emitter = SlotEmitter(responses, queue, stats, kv, TenantUsage())  # type: ignore[arg-type]
    s = slots[0]
    s.state, s.id_task, s.memory.tokens = SlotState.GENERATING, 7, [1, 2, 3]
    waiting = Task(TaskType.COMPLETION, id_slot=0)
    queue.defer(waiting)
    emitter.fail(s, "decode failed")
    [result] = responses.sent
    assert result.id == 7 and result.is_error
    assert result.payload == EngineFailure("decode failed", ErrorKind.SERVER, {})
    assert stats.snapshot()["requests_failed"] == 1
    assert s.state is SlotState.IDLE and s.memory.tokens == [] and ("rm", 0, -1, -1) in target.calls
    assert queue.n_deferred == 0  # back in the queue for the free slot


@pytest.mark.parametrize(
    ("payload", "busy", "message"),
    [
        ({"id_slot": 3, "filename": "x"}, False, "id_slot 3 out of range [0, 2)"),
        ({"id_slot": 0, "filename": "x"}, True, "slot 0 is busy"),
        ({"id_slot": 1}, False, "a slot save/restore needs a 'filename'"),
    ],
)
def test_slot_files_refuse_a_bad_slot_before_touching_a_cache(payload, busy, message):
    kv, target, _ = _caches()
    slots = [Slot(0), Slot(1)]
    if busy:
        slots[0].state = SlotState.GENERATING
    files = SlotFiles(slots, kv, MediaMemory(), n_ctx_slot=64, has_projector=False)
    with pytest.raises(ValueError, match=re.escape(message)):
        files.save(Task(TaskType.SLOT_SAVE, payload=payload))
    assert target.calls == []


def test_erasing_a_slot_returns_what_it_held():
    kv, _, draft = _caches()
    slots = [Slot(0, memory=SlotMemory([4, 5, 6]))]
    files = SlotFiles(slots, kv, MediaMemory(), n_ctx_slot=64, has_projector=False)
    result = files.erase(Task(TaskType.SLOT_ERASE, id=3, payload={"id_slot": 0}))
    assert result.id == 3 and result.payload.native() == {"id_slot": 0, "n_erased": 3}  # type: ignore[union-attr]
    assert slots[0].memory.tokens == [] and draft.calls == [("rm", 0, -1, -1)]
