"""The task side: ``server_queue`` with ``yield_to_queue`` (rules Q1-Q7, Y1-Y8)."""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from .fair_share import SLOT_TASKS, FairShare
from .tasks import QueueError, Task, TaskType

__all__ = ["ServerQueue"]


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
        self.fair_share = FairShare()  # which deferred task goes next (its weights settable)

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
                self.fair_share.posted(task)
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
            self.fair_share.deferred(task)
            self._time_last_task = time.monotonic()
            self._cond_tasks.notify_all()

    def pop_deferred_task(self, id_slot: int) -> None:
        """Q3: move the first deferred task that asked for ``id_slot`` (else the next by priority
        and tenants' fair share: fair_share.py) to the front."""
        with self._lock:
            chosen = self.fair_share.pick(self._deferred, id_slot)
            if chosen is not None:
                self._deferred.remove(chosen)
                self._tasks.appendleft(chosen)
            self._time_last_task = time.monotonic()
            self._cond_tasks.notify_all()
            self._wake_worker()

    @property
    def n_deferred(self) -> int:
        with self._lock:
            return len(self._deferred)

    def deferred_tasks(self) -> list[Task]:
        """The deferred tasks, oldest first (a copy)."""
        with self._lock:
            return list(self._deferred)

    def most_urgent_waiting(self) -> int | None:
        """The most urgent priority among the deferred tasks that any slot may take (None: none)."""
        with self._lock:
            return min((t.priority for t in self._deferred if t.id_slot < 0), default=None)

    def waiting(self) -> list[tuple[Task, float]]:
        """The deferred tasks in the order freed slots will take them, each with how long it has
        waited (seconds)."""
        now = time.monotonic()
        with self._lock:
            fair = self.fair_share
            return [(t, now - (fair.waiting_since(t.id) or now)) for t in fair.order(self._deferred)]

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
        self.fair_share.forget(id_target)
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
            if task.type in SLOT_TASKS:
                with self._lock:
                    self.fair_share.handled(task)

    @property
    def worker(self) -> threading.Thread | None:
        """The thread that answers tasks while the loop yields (None outside :meth:`start_loop`)."""
        return self._worker

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
                elif task.type in SLOT_TASKS:
                    self.fair_share.handled(task)
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
