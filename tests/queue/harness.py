"""Test helpers: run a ServerQueue loop on a thread with every wait bounded."""

from __future__ import annotations

import threading
from collections.abc import Callable

from pyllama_yield.queue import ServerQueue, Task, TaskType

TIMEOUT = 5.0  # every wait in these tests; a deadlock fails in seconds


def wait(event: threading.Event, what: str = "event") -> None:
    assert event.wait(TIMEOUT), f"timed out waiting for {what}"


class LoopThread:
    """Runs ``queue.start_loop()`` on its own thread; ``start()`` returns once the loop runs."""

    def __init__(self, queue: ServerQueue, idle_sleep_ms: int = -1) -> None:
        self.queue = queue
        self.idle_sleep_ms = idle_sleep_ms
        self.error: BaseException | None = None
        self.ident: int | None = None
        self.thread = threading.Thread(target=self._run, name="test-loop", daemon=True)

    def _run(self) -> None:
        self.ident = threading.get_ident()
        try:
            self.queue.start_loop(self.idle_sleep_ms)
        except BaseException as exc:  # reported by join()
            self.error = exc

    def start(self, running: threading.Event) -> LoopThread:
        """``running`` must be set by the test's update-slots callback (the loop's first step)."""
        self.thread.start()
        wait(running, "the loop to start")
        return self

    def join(self) -> None:
        self.thread.join(TIMEOUT)
        assert not self.thread.is_alive(), "start_loop() did not return"

    def stop(self) -> None:
        self.queue.terminate()
        self.join()
        if self.error is not None:
            raise self.error


def worker_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "pyllama-queue-worker"]


class Recorder:
    """A new-task callback that records (task id, is_yielding, thread) and may decline."""

    def __init__(self, decline: Callable[[Task, bool], bool] = lambda t, y: False) -> None:
        self.decline = decline
        self.handled: list[tuple[int, bool, int]] = []
        self.offered: list[int] = []
        self.cond = threading.Condition()

    def __call__(self, task: Task, is_yielding: bool) -> bool:
        with self.cond:
            self.offered.append(task.id)
            if is_yielding and self.decline(task, is_yielding):
                self.cond.notify_all()
                return False
            self.handled.append((task.id, is_yielding, threading.get_ident()))
            self.cond.notify_all()
            return True

    def wait_offered(self, n: int) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.offered) >= n, TIMEOUT), (
                f"only {len(self.offered)} of {n} tasks offered"
            )

    def wait_handled(self, n: int) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.handled) >= n, TIMEOUT), (
                f"only {len(self.handled)} of {n} tasks handled"
            )

    @property
    def ids(self) -> list[int]:
        with self.cond:
            return [h[0] for h in self.handled]


_TICK = object()


class Driver:
    """Drives a loop step by step from the test thread.

    The loop's update-slots callback parks until the test sends it a function; while it is parked,
    posted tasks stay queued, so what the loop sees is fully determined by the test.
    """

    def __init__(self, queue: ServerQueue, idle_sleep_ms: int = -1) -> None:
        import queue as stdqueue

        self.queue = queue
        self._cmds: stdqueue.Queue = stdqueue.Queue()
        self._acks: stdqueue.Queue = stdqueue.Queue()
        self.loop_ident: int | None = None
        queue.on_update_slots(self._update)
        # Ticks wake the loop after a step, whatever callback the test registers (now or later).
        register = queue.on_new_task

        def on_new_task(cb: Callable[[Task, bool], bool]) -> None:
            register(lambda t, y: True if t.payload is _TICK else cb(t, y))

        queue.on_new_task = on_new_task  # type: ignore[method-assign]
        on_new_task(queue._on_new_task)
        self.loop = LoopThread(queue, idle_sleep_ms)

    def _update(self) -> None:
        self.loop_ident = threading.get_ident()
        self._acks.put(("ready", None))
        fn = self._cmds.get(timeout=TIMEOUT)
        try:
            self._acks.put(("done", fn()))
        except BaseException as exc:  # handed to the test thread
            self._acks.put(("error", exc))

    def _ack(self) -> tuple[str, object]:
        return self._acks.get(timeout=TIMEOUT)

    def start(self) -> Driver:
        self.loop.thread.start()
        assert self._ack()[0] == "ready"
        return self

    def run(self, fn: Callable[[], object] = lambda: None) -> object:
        """Run ``fn`` inside update-slots; return after the loop drained the queue once more."""
        self._cmds.put(fn)
        kind, value = self._ack()
        # a tick behind whatever is queued: the loop handles all of it, then parks again
        self.queue.post(Task(TaskType.METRICS, payload=_TICK))
        assert self._ack()[0] == "ready"
        if kind == "error":
            raise value  # type: ignore[misc]
        return value

    def stop(self) -> None:
        self._cmds.put(self.queue.terminate)
        self.loop.join()
        if self.loop.error is not None:
            raise self.loop.error
