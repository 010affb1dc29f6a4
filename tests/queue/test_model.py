"""Property test: random interleavings checked against a plain sequential model of the queue."""

from __future__ import annotations

import threading
from collections import deque

from harness import TIMEOUT, Driver, worker_threads
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from pyllama_yield.queue import ServerQueue, Task, TaskType


class WorkError(Exception):
    pass


class WorkerError(Exception):
    pass


class QueueModel(RuleBasedStateMachine):
    """The real queue, driven step by step, against a model made of two deques.

    Tasks carry flags in their payload: ``decline`` (the callback declines it while yielding) and
    ``raise`` (the callback raises on it while yielding, once).
    """

    def __init__(self) -> None:
        super().__init__()
        self.q = ServerQueue()
        self.handled: list[int] = []  # real order of handling (cancel tasks included)
        self.lock = threading.Condition()
        self.raised: set[int] = set()
        self.q.on_new_task(self._callback)
        self.driver = Driver(self.q).start()
        # the model
        self.m_queue: deque[Task] = deque()
        self.m_deferred: deque[Task] = deque()
        self.m_handled: list[int] = []
        self.all_ids: set[int] = set()
        self.cancelled: set[int] = set()

    # the real callback ---------------------------------------------------------------------
    def _callback(self, task: Task, is_yielding: bool) -> bool:
        flags = task.payload or {}
        with self.lock:
            if is_yielding and flags.get("raise") and task.id not in self.raised:
                self.raised.add(task.id)
                self.handled.append(task.id)
                self.lock.notify_all()
                raise WorkerError(task.id)
            if is_yielding and flags.get("decline"):
                self.offered += 1
                self.lock.notify_all()
                return False
            self.handled.append(task.id)
            self.offered += 1
            self.lock.notify_all()
        return True

    offered = 0

    # rules ---------------------------------------------------------------------------------
    def _new(self, decline: bool, raise_: bool, slot: int = -1) -> Task:
        t = Task(TaskType.COMPLETION, id_slot=slot, payload={"decline": decline, "raise": raise_})
        t.id = self.q.get_new_id()
        self.all_ids.add(t.id)
        return t

    @rule(decline=st.booleans(), raise_=st.booleans(), front=st.booleans())
    def post(self, decline: bool, raise_: bool, front: bool) -> None:
        t = self._new(decline, raise_ and not decline)
        self.q.post(t, front=front)
        (self.m_queue.appendleft if front else self.m_queue.append)(t)

    @rule(slot=st.integers(-1, 2))
    def defer(self, slot: int) -> None:
        t = self._new(False, False, slot)
        self.q.defer(t)
        self.m_deferred.append(t)

    @rule(slot=st.integers(-1, 2))
    def pop_deferred(self, slot: int) -> None:
        if self.m_deferred:
            chosen = next((t for t in self.m_deferred if t.id_slot == slot), self.m_deferred[0])
            self.m_deferred.remove(chosen)
            self.m_queue.appendleft(chosen)
        self.q.pop_deferred_task(slot)

    @precondition(lambda self: self.m_queue or self.m_deferred)
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        pending = list(self.m_queue) + list(self.m_deferred)
        target = data.draw(st.sampled_from(pending)).id
        c = Task(TaskType.CANCEL, id_target=target)
        c.id = self.q.get_new_id()
        self.q.post(c)
        self.cancelled.add(target)
        self.m_queue = deque(t for t in self.m_queue if t.id != target)
        self.m_deferred = deque(t for t in self.m_deferred if t.id != target)
        self.m_queue.append(c)
        self.all_ids.add(c.id)

    @rule(work_raises=st.booleans())
    def yield_once(self, work_raises: bool) -> None:
        # model: the worker takes the queue in order; declines set aside, a raise stops it
        expected_error = None
        declined, rest = [], deque(self.m_queue)
        offered_target = 0
        while rest:
            t = rest.popleft()
            flags = t.payload or {}
            if flags.get("raise") and t.id not in self.raised:
                self.m_handled.append(t.id)
                expected_error = WorkerError
                break
            offered_target += 1
            if flags.get("decline"):
                declined.append(t)
            else:
                self.m_handled.append(t.id)
        n_raise = 1 if expected_error else 0
        if work_raises:
            expected_error = WorkError
        self.m_queue = deque(declined) + rest
        with self.lock:
            start_offered, start_raised = self.offered, len(self.raised)

        def work() -> None:
            with self.lock:
                assert self.lock.wait_for(
                    lambda: (
                        self.offered - start_offered >= offered_target and len(self.raised) - start_raised >= n_raise
                    ),
                    TIMEOUT,
                ), "the worker did not serve the queue"
            if work_raises:
                raise WorkError

        error = None
        try:
            self.driver.run(lambda: self.q.yield_to_queue(work))
        except (WorkError, WorkerError) as exc:
            error = type(exc)
        assert error is expected_error
        # driver.run let the loop drain the queue afterwards, not yielding: everything handled
        self._model_drain()

    @rule()
    def step(self) -> None:
        self.driver.run()
        self._model_drain()

    def _model_drain(self) -> None:
        self.m_handled.extend(t.id for t in self.m_queue)
        self.m_queue.clear()

    @invariant()
    def handled_as_the_model_says(self) -> None:
        with self.lock:
            assert self.handled == self.m_handled[: len(self.handled)]

    def teardown(self) -> None:
        try:
            self.driver.run()
            self._model_drain()
            with self.lock:
                assert self.handled == self.m_handled
                assert len(self.handled) == len(set(self.handled)), "a task was handled twice"
                waiting = {t.id for t in self.m_deferred}
                assert set(self.handled) | self.cancelled | waiting == self.all_ids, "a task was lost"
                assert not (set(self.handled) & self.cancelled), "a cancelled task was handled"
        finally:
            self.driver.stop()
            assert worker_threads() == []


QueueModel.TestCase.settings = settings(
    max_examples=60, stateful_step_count=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_queue_matches_sequential_model = QueueModel.TestCase
