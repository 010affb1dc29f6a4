"""The server task queue: a Python port of llama.cpp's ``server_queue`` / ``server_response``.

Pure Python; it does not import the binding. The contract is written down rule by rule
(Q1-Q7, Y1-Y8, R1-R2); the reference is llama.cpp's ``tools/server/server-queue.{h,cpp}``.

The point of the design is :meth:`ServerQueue.yield_to_queue`: ``work()`` (e.g. ``llama_decode``)
runs on the thread that runs :meth:`ServerQueue.start_loop`, so all ggml compute stays on one
thread, while a long-lived worker thread keeps serving queued tasks (metrics, cancels). This only
helps in Python because cffi releases the GIL while ``work()`` is inside C.

Every wait is on a condition variable; nothing polls or sleeps.
"""

from __future__ import annotations

import enum
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BatchResponse",
    "QueueError",
    "ResponseReader",
    "Result",
    "ServerQueue",
    "ServerResponse",
    "Task",
    "TaskType",
]


class QueueError(RuntimeError):
    """Misuse of the queue: nested yield, yield off the loop thread, declining while not yielding,
    starting the loop twice, receiving after the response queue was terminated."""


class TaskType(enum.Enum):
    COMPLETION = "completion"
    EMBEDDING = "embedding"
    CANCEL = "cancel"
    METRICS = "metrics"
    SLOT_SAVE = "slot_save"
    SLOT_RESTORE = "slot_restore"
    SLOT_ERASE = "slot_erase"
    SET_LORA = "set_lora"
    TOKENIZE = "tokenize"
    DETOKENIZE = "detokenize"
    NEXT_RESPONSE = "next_response"  # posted by a busy server to itself: run update-slots again


@dataclass
class Task:
    type: TaskType
    id: int = -1
    id_target: int = -1  # for CANCEL: the task to cancel
    id_slot: int = -1  # the slot the task asks for, -1 for any
    payload: Any = None


@dataclass
class Result:
    id: int
    payload: Any = None
    is_error: bool = False
    is_final: bool = True


def _resets_idle_timer(task: Task) -> bool:
    # metrics scrapes must not keep a server awake
    return task.type is not TaskType.METRICS


NewTaskCallback = Callable[[Task, bool], bool]


class ServerQueue:
    """Tasks in, handled one at a time by the new-task callback; see the module docstring."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # Two conditions on one lock: the loop thread waits for tasks (and for the worker to finish
        # its task at the end of a yield) on the first; the worker waits for a task to serve
        # during a yield on the second, so that a post outside a yield does not wake it.
        self._cond_tasks = threading.Condition(self._lock)
        self._cond_worker = threading.Condition(self._lock)
        self._ids = itertools.count()

        self._running = False
        self._sleeping = False
        self._req_stop_sleeping = False
        self._time_last_task = time.monotonic()

        self._tasks: deque[Task] = deque()
        self._deferred: deque[Task] = deque()
        self._declined: deque[Task] = deque()  # declined during the current yield

        self._loop_thread: int | None = None
        self._worker: threading.Thread | None = None
        self._w_stop = False
        self._w_yielding = False  # work() is still running on the loop thread
        self._w_serving = False  # the worker is inside the new-task callback
        self._w_exception: BaseException | None = None

        self._on_new_task: NewTaskCallback = _no_new_task_callback
        self._on_update_slots: Callable[[], None] = lambda: None
        self._on_sleeping: list[Callable[[bool], None]] = []

    # --- registration (before start_loop) ---------------------------------------------------
    def on_new_task(self, callback: NewTaskCallback) -> None:
        """``callback(task, is_yielding) -> bool``: True when handled; False declines the task,
        allowed only while yielding (the callback then runs on the worker thread)."""
        self._on_new_task = callback

    def on_update_slots(self, callback: Callable[[], None]) -> None:
        self._on_update_slots = callback

    def on_sleeping_state(self, callback: Callable[[bool], None]) -> None:
        """Called with True in registration order when entering sleep, False in reverse on waking."""
        self._on_sleeping.append(callback)

    # --- posting (any thread) ---------------------------------------------------------------
    def get_new_id(self) -> int:
        with self._lock:
            return next(self._ids)

    def post(self, task: Task, front: bool = False) -> int:
        """Q1/Q2: queue a task (at the front when ``front``); returns its id."""
        self.post_many([task], front)
        return task.id

    def post_many(self, tasks: Iterable[Task], front: bool = False) -> list[int]:
        """Q1/Q2: queue several tasks at once; with ``front`` they go first, in the given order."""
        tasks = list(tasks)
        with self._lock:
            reset_timer = False
            for task in tasks:
                if task.id == -1:
                    task.id = next(self._ids)
                if task.type is TaskType.CANCEL:
                    self._drop_pending(task.id_target)
                reset_timer |= _resets_idle_timer(task)
            if front:
                self._tasks.extendleft(reversed(tasks))
            else:
                self._tasks.extend(tasks)
            if reset_timer:
                self._time_last_task = time.monotonic()
            self._cond_tasks.notify_all()
            self._wake_worker()
        return [t.id for t in tasks]

    def _wake_worker(self) -> None:
        # caller holds the lock; the worker only serves during a yield, so only then is it woken
        if self._w_yielding and self._tasks:
            self._cond_worker.notify()

    def defer(self, task: Task) -> None:
        """Q3: park a task until a slot frees (see :meth:`pop_deferred_task`)."""
        with self._lock:
            self._deferred.append(task)
            self._time_last_task = time.monotonic()
            self._cond_tasks.notify_all()

    def pop_deferred_task(self, id_slot: int) -> None:
        """Q3: move the first deferred task that asked for ``id_slot`` (else the oldest) to the front."""
        with self._lock:
            if self._deferred:
                chosen = next((t for t in self._deferred if t.id_slot == id_slot), self._deferred[0])
                self._deferred.remove(chosen)
                self._tasks.appendleft(chosen)
            self._time_last_task = time.monotonic()
            self._cond_tasks.notify_all()
            self._wake_worker()

    @property
    def n_deferred(self) -> int:
        with self._lock:
            return len(self._deferred)

    @property
    def is_sleeping(self) -> bool:
        with self._lock:
            return self._sleeping

    def wait_until_no_sleep(self) -> None:
        """Q5: if the loop sleeps, ask it to wake up and wait until it has."""
        with self._lock:
            if not self._sleeping:
                return
            self._req_stop_sleeping = True
            self._cond_tasks.notify_all()
            self._cond_tasks.wait_for(lambda: not self._sleeping or not self._running)

    def terminate(self) -> None:
        """Q6/Y8: stop the loop; safe from any thread, including a callback on the worker."""
        with self._lock:
            self._running = False
            self._cond_tasks.notify_all()

    def _drop_pending(self, id_target: int) -> None:
        # caller holds the lock; a task declined during a yield can be cancelled too
        for q in (self._tasks, self._deferred, self._declined):
            kept = [t for t in q if t.id != id_target]
            if len(kept) != len(q):
                q.clear()
                q.extend(kept)

    # --- the loop ---------------------------------------------------------------------------
    def _process_new_tasks(self) -> bool:
        """On the loop thread, not yielding: handle queued tasks until none is left; True when
        terminated. (During a yield the worker serves them, see :meth:`_worker_loop`.)"""
        while True:
            with self._lock:
                if not self._running:
                    return True
                if not self._tasks:
                    return False
                task = self._tasks.popleft()
            # no lock here: the callback may post
            if not self._on_new_task(task, False):
                raise QueueError(f"task {task.id} declined while not yielding")

    def start_loop(self, idle_sleep_ms: int = -1) -> None:
        """Q4-Q7: serve tasks and call update-slots until :meth:`terminate`; blocks."""
        with self._lock:
            if self._loop_thread is not None:
                raise QueueError("start_loop() is already running")
            self._loop_thread = threading.get_ident()
            self._running = True
            self._time_last_task = time.monotonic()
            self._w_stop = self._w_yielding = self._w_serving = False
            self._w_exception = None
        self._worker = threading.Thread(target=self._worker_loop, name="pyllama-queue-worker", daemon=True)
        self._worker.start()
        try:
            self._run(idle_sleep_ms)
        finally:
            self._stop_worker()
            with self._lock:
                self._loop_thread = None

    def _run(self, idle_sleep_ms: int) -> None:
        idle_s = idle_sleep_ms / 1000.0
        while True:
            if self._process_new_tasks():
                return
            t_update = time.monotonic()
            self._on_update_slots()
            with self._lock:
                # time spent updating slots is not idle; shift rather than reset, so that tasks
                # which do not reset the timer (metrics) do not delay sleep either
                now = time.monotonic()
                self._time_last_task = min(now, self._time_last_task + (now - t_update))
                if not self._wait_for_tasks(idle_s):
                    return

    def _wait_for_tasks(self, idle_s: float) -> bool:
        """Caller holds the lock. Wait for a task, sleeping when idle; False when terminated."""
        while self._running and not self._tasks:
            if idle_s < 0:
                self._cond_tasks.wait()
                continue
            remaining = self._time_last_task + idle_s - time.monotonic()
            if remaining > 0:
                self._cond_tasks.wait(remaining)
                continue
            self._sleep_until_woken()
            return self._running
        return self._running

    def _sleep_until_woken(self) -> None:
        # caller holds the lock; callbacks run without it so that they may use the queue
        self._sleeping = True
        self._req_stop_sleeping = False
        self._lock.release()
        try:
            for cb in self._on_sleeping:
                cb(True)
        finally:
            self._lock.acquire()
        self._cond_tasks.wait_for(lambda: not self._running or self._req_stop_sleeping)
        if self._running:
            self._lock.release()
            try:
                for cb in reversed(self._on_sleeping):
                    cb(False)
            finally:
                self._lock.acquire()
            self._time_last_task = time.monotonic()
        self._sleeping = False
        self._req_stop_sleeping = False
        self._cond_tasks.notify_all()  # wake wait_until_no_sleep()

    # --- yield ------------------------------------------------------------------------------
    def yield_to_queue(self, work: Callable[[], Any]) -> Any:
        """Y1-Y8: run ``work()`` on this (the loop) thread while the worker serves queued tasks.

        Returns what ``work()`` returns. Tasks the callback declined are back at the front of the
        queue, in their original order, before this returns or raises.
        """
        me = threading.get_ident()
        with self._lock:
            if self._loop_thread != me:
                where = "outside start_loop()" if self._loop_thread is None else "off the loop thread"
                raise QueueError(f"yield_to_queue() called {where}; call it from the loop thread")
            if self._w_yielding:
                raise QueueError("yield_to_queue() cannot be nested")
            self._w_yielding = True
            self._wake_worker()  # with nothing queued the worker sleeps on: no thread hop per yield

        result, error = None, None
        try:
            result = work()  # all ggml compute stays on this thread
        except BaseException as exc:  # re-raised below, after the declined tasks are back
            error = exc

        with self._lock:
            self._w_yielding = False  # the worker takes no further task
            self._cond_tasks.wait_for(lambda: not self._w_serving)  # Y5: it finishes the one it is on
            self._tasks.extendleft(reversed(self._declined))
            self._declined.clear()
            self._time_last_task = time.monotonic()
            worker_error, self._w_exception = self._w_exception, None
        if error is None:
            error = worker_error  # work()'s own exception wins over the worker's
        if error is not None:
            raise error
        return result

    def _worker_loop(self) -> None:
        """Serve queued tasks one at a time while a yield lasts; sleep otherwise. The loop thread
        ends a yield without waking this thread when it is asleep, so only a task costs a hop."""
        while True:
            with self._lock:
                self._cond_worker.wait_for(self._worker_has_work)
                if self._w_stop:
                    return
                task = self._tasks.popleft()
                self._w_serving = True
            error: BaseException | None = None
            handled = True
            try:
                handled = self._on_new_task(task, True)  # no lock here: the callback may post
            except BaseException as exc:  # handed to yield_to_queue (Y7)
                error = exc
            with self._lock:
                if error is not None:
                    self._w_exception = error  # the worker serves nothing more this yield
                elif not handled:
                    self._declined.append(task)  # set aside, else it would be offered again
                self._w_serving = False
                self._cond_tasks.notify_all()  # the loop thread may be waiting to end the yield

    def _worker_has_work(self) -> bool:
        # caller holds the lock
        if self._w_stop:
            return True
        return self._w_yielding and self._running and self._w_exception is None and bool(self._tasks)

    def _stop_worker(self) -> None:
        worker, self._worker = self._worker, None
        if worker is None:
            return
        with self._lock:
            self._w_stop = True
            self._cond_worker.notify_all()
            self._cond_tasks.notify_all()
        worker.join()


def _no_new_task_callback(task: Task, is_yielding: bool) -> bool:
    raise QueueError("no new-task callback registered (ServerQueue.on_new_task)")


class ServerResponse:
    """Results from the loop (or the worker) to whoever waits for them, by task id (R1/R2)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._running = True
        self._waiting: set[int] = set()
        self._results: list[Result] = []
        # id -> wake(): called on the sender's thread when a result for the id comes, when the id
        # is withdrawn, or at terminate. For readers that must not block a thread (an event loop).
        self._listeners: dict[int, Callable[[], None]] = {}
        self._held: list[Result] | None = None  # sends held back by hold(), on one thread
        self._held_by: int | None = None
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
        for wake in wakes:
            wake()

    def listen(self, ids: Iterable[int], wake: Callable[[], None]) -> None:
        """Call ``wake()`` whenever a result for one of ``ids`` arrives (on the sending thread, so
        it must be quick and must not call back into this queue), and once more when the ids are
        withdrawn or the queue terminates. Pair it with :meth:`take_all`."""
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

    def send_many(self, results: Iterable[Result]) -> None:
        """Deliver several results under one lock: each blocked reader is woken once, each
        listening reader once, however many of its results came."""
        wakes: dict[int, Callable[[], None]] = {}  # by id(wake): a reader listens with one callback
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
        for wake in wakes.values():  # a listening reader: no blocked thread to wake
            wake()

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

    def flush(self, keep_holding: bool = False) -> None:
        """Deliver what :meth:`hold` kept back, all at once (each reader woken once); the thread
        goes on holding when ``keep_holding``."""
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
            self.send_many(held)

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
        for wake in wakes:
            wake()

    def terminate(self) -> None:
        """Wake every waiter with :class:`QueueError`."""
        with self._cond:
            self._running = False
            self._cond.notify_all()
            wakes = set(self._listeners.values())
            self._listeners.clear()
        for wake in wakes:
            wake()


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

    def listen(self, wake: Callable[[], None]) -> None:
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
