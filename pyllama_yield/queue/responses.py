"""The result side: ``server_response`` (rules R1-R2) and the reader a request reads its results with."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from .server_queue import ServerQueue
from .tasks import QueueError, Result, Task, TaskType

__all__ = ["BatchResponse", "ResponseReader", "ServerResponse", "Wake", "ring"]

# What a listening reader gives to be woken: called on the sending thread, it marks its reader
# ready and returns the write end of a doorbell (a non-blocking pipe) that the sender must ring
# for the reader's thread to notice, or None when it woke its reader itself.
Wake = Callable[[], int | None]

_RING = (1).to_bytes(8, "little")  # an eventfd's 1: such a doorbell would take it as well as a pipe


def ring(doorbells: Iterable[int]) -> None:
    """Ring each doorbell once: a write to its pipe, which never blocks (a full pipe has been rung
    already, and a doorbell closed meanwhile has no reader left to wake)."""
    for fd in doorbells:
        try:
            os.write(fd, _RING)
        except OSError:
            pass


class ServerResponse:
    """Results from the loop (or the worker) to whoever waits for them, by task id (R1/R2)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._running = True
        self._waiting: set[int] = set()
        self._results: list[Result] = []
        # id -> wake(): called on the sender's thread when a result for the id comes, when the id
        # is withdrawn, or at terminate. For readers that must not block a thread (an event loop).
        self._listeners: dict[int, Wake] = {}
        self._held: list[Result] | None = None  # sends held back by hold(), on one thread
        self._held_by: int | None = None
        self._rings: set[int] = set()  # doorbells a deferring flush left to the holder to ring
        self._failure: Result | None = None  # set by fail(): what every task gets from then on

    def add_waiting_task_id(self, id_task: int) -> None:
        self.add_waiting_task_ids([id_task])

    def add_waiting_task_ids(self, ids: Iterable[int]) -> None:
        with self._cond:
            ids = set(ids)
            self._waiting.update(ids)
            if self._failure is not None:  # nothing will ever run them: they get the failure now
                self._results.extend(_copy_for(i, self._failure) for i in ids)

    def remove_waiting_task_id(self, id_task: int) -> None:
        self.remove_waiting_task_ids([id_task])

    def remove_waiting_task_ids(self, ids: Iterable[int]) -> None:
        """Stop waiting for these ids and drop their results not received yet."""
        ids = set(ids)
        with self._cond:
            self._waiting -= ids
            self._results = [r for r in self._results if r.id not in ids]
            self._cond.notify_all()  # a reader blocked on these ids must not wait for nothing
            wakes = {self._listeners.pop(i) for i in ids if i in self._listeners}
        ring(_call(wakes))

    def listen(self, ids: Iterable[int], wake: Wake) -> None:
        """Call ``wake()`` whenever results for one of ``ids`` arrive (on the sending thread, so
        it must be quick and must not call back into this queue), and once more when the ids are
        withdrawn or the queue terminates; the doorbell it returns, if any, is rung once per
        delivery. Pair it with :meth:`take_all`."""
        with self._cond:
            for i in ids:
                self._listeners[i] = wake

    def take_all(self, ids: Iterable[int]) -> list[Result]:
        """Every result waiting for ``ids``, in arrival order, without blocking."""
        wanted = set(ids)
        with self._cond:
            self._check_running()
            taken = [r for r in self._results if r.id in wanted]
            if taken:
                self._results = [r for r in self._results if r.id not in wanted]
            return taken

    def _take(self, ids: set[int]) -> Result | None:
        for i, r in enumerate(self._results):
            if r.id in ids:
                return self._results.pop(i)
        return None

    def _check_running(self) -> None:
        if not self._running:
            raise QueueError("the response queue was terminated (server shutting down)")

    def recv(self, ids: Iterable[int] | int) -> Result:
        """Block until a result for one of ``ids`` arrives."""
        result = self.recv_with_timeout(ids, None)
        if result is None:
            raise QueueError(f"no longer waiting for task(s) {ids}")
        return result

    def recv_with_timeout(self, ids: Iterable[int] | int, timeout_s: float | None) -> Result | None:
        """Like :meth:`recv`; returns None after ``timeout_s`` seconds without a result, or at once
        when nobody waits for any of ``ids`` any more (their reader was stopped)."""
        wanted = {ids} if isinstance(ids, int) else set(ids)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._cond:
            while True:
                self._check_running()
                result = self._take(wanted)
                if result is not None:
                    return result
                if not wanted & self._waiting:
                    return None
                if deadline is None:
                    self._cond.wait()
                else:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return None
                    self._cond.wait(remaining)

    def send(self, result: Result) -> None:
        """Deliver to the waiter of ``result.id``; dropped when nobody waits for it. Held back
        until :meth:`flush` when this thread called :meth:`hold`."""
        held = self._held
        if held is not None and threading.get_ident() == self._held_by:
            held.append(result)
            return
        self.send_many([result])

    def send_many(self, results: Iterable[Result], defer_rings: bool = False) -> None:
        """Deliver several results under one lock: each blocked reader is woken once, each
        listening reader once, however many of its results came. ``defer_rings``: the doorbells
        are kept for :meth:`take_rings` instead of rung here."""
        wakes: dict[int, Wake] = {}  # by id(wake): a reader listens with one callback
        notify = False
        with self._cond:
            for result in results:
                if result.id not in self._waiting:
                    continue
                self._results.append(result)
                wake = self._listeners.get(result.id)
                if wake is None:
                    notify = True
                else:
                    wakes[id(wake)] = wake
            if notify:
                self._cond.notify_all()
        doorbells = _call(wakes.values())  # listening readers: no blocked thread to wake
        if defer_rings:
            self._rings |= doorbells
        else:
            ring(doorbells)

    def hold(self) -> None:
        """From now on, what this thread sends is held back until :meth:`flush`. The loop thread
        holds a step's results and flushes them just before its next decode, when it releases the
        GIL for milliseconds: a woken reader then runs while the loop thread needs no GIL, instead
        of making it wait in the middle of its step. Results other threads send meanwhile (the
        worker's, during a yield) go out at once."""
        me = threading.get_ident()
        if self._held is None:
            self._held, self._held_by = [], me
        elif self._held_by != me:
            raise QueueError("ServerResponse.hold(): another thread is holding")

    def flush(self, keep_holding: bool = False, defer_rings: bool = False) -> None:
        """Deliver what :meth:`hold` kept back, all at once (each reader woken once); the thread
        goes on holding when ``keep_holding``. With ``defer_rings`` the readers' doorbells are
        left for the holder to ring (:meth:`take_rings`): the loop thread rings them inside its
        next decode call, so that no woken reader takes the GIL before the decode starts. Any
        flush without it rings what an earlier one left."""
        held = self._held
        if held is None:
            return
        if threading.get_ident() != self._held_by:
            raise QueueError("ServerResponse.flush(): only the holding thread may flush")
        if keep_holding:
            self._held = []
        else:
            self._held, self._held_by = None, None
        if held:
            self.send_many(held, defer_rings)
        if not defer_rings and self._rings:
            ring(self.take_rings())

    def take_rings(self) -> list[int]:
        """The doorbells a deferring :meth:`flush` left, now the caller's to ring (holding thread)."""
        rings, self._rings = list(self._rings), set()
        return rings

    def broadcast(self, result: Result) -> None:
        """A copy of ``result`` to every waiting id."""
        self._broadcast(result, sticky=False)

    def fail(self, result: Result) -> None:
        """A copy of ``result`` (an error) to every waiting id, and to every id that waits from now
        on: whatever runs the tasks is gone for good (e.g. an rpc-server died under a decode)."""
        self._broadcast(result, sticky=True)

    def _broadcast(self, result: Result, sticky: bool) -> None:
        with self._cond:
            if sticky:
                self._failure = result
            self._results.extend(_copy_for(i, result) for i in self._waiting)
            self._cond.notify_all()
            wakes = set(self._listeners.values())
        ring(_call(wakes))

    def terminate(self) -> None:
        """Wake every waiter with :class:`QueueError`."""
        with self._cond:
            self._running = False
            self._cond.notify_all()
            wakes = set(self._listeners.values())
            self._listeners.clear()
        ring(_call(wakes))


def _call(wakes: Iterable[Wake]) -> set[int]:
    """Call each wake; the doorbells they ask to have rung."""
    doorbells = set()
    for wake in wakes:
        fd = wake()
        if fd is not None:
            doorbells.add(fd)
    return doorbells


def _copy_for(id_task: int, result: Result) -> Result:
    return Result(id=id_task, payload=result.payload, is_error=result.is_error, is_final=result.is_final)


@dataclass
class BatchResponse:
    is_terminated: bool = False  # should_stop() ended the wait before all results came
    results: list[Result] = field(default_factory=list)  # final results, in posting order
    error: Result | None = None


class ResponseReader:
    """Post tasks and read their results; :meth:`stop` cancels what is still running.

    The port of ``server_response_reader``: ``should_stop`` is asked every ``poll_interval_s``
    while no result arrives (e.g. whether the HTTP client disconnected).
    """

    def __init__(self, queue: ServerQueue, responses: ServerResponse, poll_interval_s: float = 1.0) -> None:
        self.queue = queue
        self.responses = responses
        self.poll_interval_s = poll_interval_s
        self.ids: list[int] = []
        self._finished: set[int] = set()
        self.cancelled = False
        self.stopped = False

    def __enter__(self) -> ResponseReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def post_task(self, task: Task, front: bool = False) -> int:
        return self.post_tasks([task], front)[0]

    def post_tasks(self, tasks: Iterable[Task], front: bool = False) -> list[int]:
        if self.ids:
            raise QueueError("a ResponseReader posts its tasks once")
        tasks = list(tasks)
        for task in tasks:
            if task.id == -1:
                task.id = self.queue.get_new_id()
        self.ids = [t.id for t in tasks]
        self.responses.add_waiting_task_ids(self.ids)  # before posting: no result can be missed
        self.queue.post_many(tasks, front)
        return list(self.ids)

    def has_next(self) -> bool:
        return not self.cancelled and len(self._finished) < len(self.ids)

    def next(self, should_stop: Callable[[], bool] = lambda: False) -> Result | None:
        """The next result (partial or final); None when ``should_stop()`` said so first.
        An error result stops the reader (cancelling the rest) and is returned."""
        pending = set(self.ids) - self._finished
        while True:
            result = self.responses.recv_with_timeout(pending, self.poll_interval_s)
            if result is None:
                if self.stopped or should_stop():
                    return None  # stopped from another thread (client gone), or asked to
                continue
            return self._account(result)

    def listen(self, wake: Wake) -> None:
        """Have ``wake()`` called when a result for this reader comes (or it is stopped, or the
        queue terminates), instead of blocking a thread in :meth:`next`; then :meth:`take_available`."""
        self.responses.listen(self.ids, wake)

    def take_available(self) -> list[Result]:
        """The results that have come, without blocking (accounted as :meth:`next` does: an error
        is the last one and stops the reader). Raises QueueError when the queue has terminated."""
        if self.stopped:
            return []
        results = []
        for result in self.responses.take_all(set(self.ids) - self._finished):
            results.append(self._account(result))
            if result.is_error:
                break
        return results

    def _account(self, result: Result) -> Result:
        if result.is_error:
            self._finished.add(result.id)
            self.stop()  # an error ends the reader: cancel the rest
        elif result.is_final:
            self._finished.add(result.id)
        return result

    def wait_for_all(self, should_stop: Callable[[], bool] = lambda: False) -> BatchResponse:
        """Collect the final result of every task (partial results are skipped)."""
        finals: dict[int, Result] = {}
        while self.has_next():
            result = self.next(should_stop)
            if result is None:
                return BatchResponse(is_terminated=True, results=[finals[i] for i in self.ids if i in finals])
            if result.is_error:
                return BatchResponse(results=[finals[i] for i in self.ids if i in finals], error=result)
            if result.is_final:
                finals[result.id] = result
        return BatchResponse(results=[finals[i] for i in self.ids if i in finals])

    def stop(self) -> None:
        """Stop waiting (a thread blocked in :meth:`next` returns None); post cancel tasks (at the
        front) for tasks that have not finished."""
        self.stopped = True
        self.responses.remove_waiting_task_ids(self.ids)
        if self.has_next():
            self.cancelled = True
            unfinished = [i for i in self.ids if i not in self._finished]
            self.queue.post_many([Task(TaskType.CANCEL, id_target=i) for i in unfinished], front=True)
