"""One or more tests per rule of the queue contract (Q1-Q7, Y1-Y8, R1-R2)."""

from __future__ import annotations

import threading
import time

import pytest
from harness import TIMEOUT, Driver, LoopThread, Recorder, wait, worker_threads

from pyllama_yield.queue import (
    QueueError,
    ResponseReader,
    Result,
    ServerQueue,
    ServerResponse,
    Task,
    TaskType,
)

C, M, X = TaskType.COMPLETION, TaskType.METRICS, TaskType.CANCEL


def make(decline=lambda t, y: t.type is C) -> tuple[ServerQueue, Recorder, Driver]:
    q = ServerQueue()
    rec = Recorder(decline)
    q.on_new_task(rec)
    return q, rec, Driver(q)


# --- Q ---------------------------------------------------------------------------------------
def test_q1_ids_unique_increasing_and_assigned():
    q = ServerQueue()
    ids = [q.get_new_id() for _ in range(5)]
    assert ids == sorted(set(ids))
    t = Task(M)
    assert q.post(t) == t.id > ids[-1]
    many = [Task(M), Task(M, id=q.get_new_id()), Task(M)]
    got = q.post_many(many)
    assert got == [m.id for m in many] and len(set(got)) == 3 and -1 not in got


def test_q1_post_back_and_front_order():
    q, rec, d = make()
    d.start()
    a, b, c, e, f = (Task(M) for _ in range(5))
    q.post(a)
    q.post(b)
    q.post(c, front=True)
    q.post_many([e, f], front=True)
    d.run()
    assert rec.ids == [e.id, f.id, c.id, a.id, b.id]
    d.stop()


def test_q1_post_wakes_an_idle_loop():
    q = ServerQueue()
    rec = Recorder()
    q.on_new_task(rec)
    running = threading.Event()
    q.on_update_slots(running.set)
    loop = LoopThread(q).start(running)
    q.post(Task(M))  # from another thread, while the loop waits
    rec.wait_handled(1)
    loop.stop()


def test_q2_cancel_removes_queued_and_deferred_tasks():
    q, rec, d = make()
    d.start()
    a, b, late = Task(C), Task(C), Task(C, id_slot=1)
    q.post(a)
    q.post(b)
    q.defer(late)
    q.post(Task(X, id_target=a.id))
    q.post(Task(X, id_target=late.id))
    d.run(lambda: q.pop_deferred_task(1))
    assert a.id not in rec.ids and late.id not in rec.ids and b.id in rec.ids
    assert q.n_deferred == 0
    d.stop()


def test_q2_cancel_reaches_tasks_declined_during_a_yield():
    q, rec, d = make()
    d.start()
    comp = Task(C)
    q.post(comp)

    def work():
        rec.wait_offered(1)  # the worker declined it
        q.post(Task(X, id_target=comp.id))
        rec.wait_handled(1)  # the cancel itself

    d.run(lambda: q.yield_to_queue(work))
    d.run()
    assert comp.id not in rec.ids
    d.stop()


def test_q3_pop_deferred_prefers_the_slot_then_the_oldest():
    q, rec, d = make()
    d.start()
    t0, t1, t2 = Task(C, id_slot=-1), Task(C, id_slot=2), Task(C, id_slot=-1)
    for t in (t0, t1, t2):
        q.defer(t)
    assert q.n_deferred == 3
    d.run(lambda: q.pop_deferred_task(2))
    assert rec.ids == [t1.id]
    d.run(lambda: q.pop_deferred_task(5))
    assert rec.ids == [t1.id, t0.id]
    d.run(lambda: q.pop_deferred_task(5))
    assert rec.ids == [t1.id, t0.id, t2.id]
    d.run(lambda: q.pop_deferred_task(0))  # nothing deferred: a no-op
    d.stop()


def test_q3_pop_deferred_goes_to_the_front():
    q, rec, d = make()
    d.start()
    deferred, queued = Task(C), Task(C)
    q.defer(deferred)
    q.post(queued)

    d.run(lambda: q.pop_deferred_task(0))
    assert rec.ids == [deferred.id, queued.id]
    d.stop()


def test_q4_tasks_are_processed_before_update_slots():
    q = ServerQueue()
    events: list[str] = []
    q.on_new_task(lambda t, y: events.append(f"task{t.id}") or True)
    running = threading.Event()

    def update():
        events.append("update")
        running.set()

    q.on_update_slots(update)
    ids = q.post_many([Task(M), Task(M)])
    loop = LoopThread(q).start(running)
    loop.stop()
    assert events[:3] == [f"task{ids[0]}", f"task{ids[1]}", "update"]


def test_q4_not_yielding_outside_a_yield():
    q, rec, d = make()
    d.start()
    q.post(Task(C))
    d.run()
    ((_, yielding, thread),) = rec.handled
    assert not yielding and thread == d.loop_ident
    d.stop()


def test_q5_idle_sleep_callbacks_in_order_and_reverse():
    q = ServerQueue()
    q.on_new_task(Recorder())
    calls: list[str] = []
    slept = threading.Event()
    for name in ("a", "b", "c"):
        q.on_sleeping_state(lambda s, n=name: calls.append(f"{n}{int(s)}") or (s and n == "c" and slept.set()))
    running = threading.Event()
    q.on_update_slots(running.set)
    loop = LoopThread(q, idle_sleep_ms=20).start(running)
    wait(slept, "idle sleep")
    assert q.is_sleeping
    q.wait_until_no_sleep()
    assert not q.is_sleeping
    assert calls == ["a1", "b1", "c1", "c0", "b0", "a0"]
    loop.stop()


def test_q5_metrics_do_not_reset_the_idle_timer():
    q = ServerQueue()
    before = q._time_last_task
    q.post(Task(M))
    assert q._time_last_task == before
    q.post(Task(C))
    assert q._time_last_task > before


def test_q5_update_slots_time_is_not_idle():
    q, rec, d = make()
    d.start()
    q._time_last_task = time.monotonic()
    stamp = q._time_last_task
    t0 = time.monotonic()
    d.run(lambda: time.sleep(0.05))  # the step itself takes time; that time is not idle
    shifted = q._time_last_task - stamp
    assert shifted >= 0.05 - 1e-3 and q._time_last_task <= time.monotonic()
    assert time.monotonic() - t0 >= 0.05
    d.stop()


def test_q6_terminate_returns_only_after_the_worker_joined():
    q, rec, d = make()
    d.start()
    assert len(worker_threads()) == 1
    d.stop()
    assert worker_threads() == []


def test_q6_process_reports_termination():
    q = ServerQueue()
    q.on_new_task(Recorder())
    q.terminate()
    assert q._process_new_tasks() is True


def test_q7_restart_after_return():
    q, rec, d = make()
    d.start()
    d.stop()
    d2 = Driver(q)
    d2.start()
    q.post(Task(M))
    d2.run()
    assert len(rec.handled) == 1
    d2.stop()


def test_q7_starting_twice_is_an_error():
    q, rec, d = make()
    d.start()
    with pytest.raises(QueueError, match="already running"):
        q.start_loop()
    with pytest.raises(QueueError, match="already running"):
        d.run(q.start_loop)
    d.stop()


# --- Y ---------------------------------------------------------------------------------------
def test_y1_yield_outside_the_loop_is_an_error():
    q = ServerQueue()
    with pytest.raises(QueueError, match="outside start_loop"):
        q.yield_to_queue(lambda: None)


def test_y1_yield_from_another_thread_is_an_error():
    q, rec, d = make()
    d.start()
    with pytest.raises(QueueError, match="off the loop thread"):
        q.yield_to_queue(lambda: None)
    d.stop()


def test_y2_nested_yield_is_an_error_and_the_queue_stays_usable():
    q, rec, d = make()
    d.start()
    with pytest.raises(QueueError, match="nested"):
        d.run(lambda: q.yield_to_queue(lambda: q.yield_to_queue(lambda: None)))
    assert d.run(lambda: q.yield_to_queue(lambda: 42)) == 42
    d.stop()


def test_y3_work_on_loop_thread_tasks_on_worker_including_new_ones():
    q, rec, d = make(decline=lambda t, y: False)
    d.start()
    first = Task(M)
    q.post(first)
    work_thread = []

    def work():
        work_thread.append(threading.get_ident())
        rec.wait_handled(1)
        q.post(Task(M))  # posted during the yield: served during it too
        rec.wait_handled(2)

    d.run(lambda: q.yield_to_queue(work))
    assert work_thread == [d.loop_ident]
    workers = {h[2] for h in rec.handled}
    assert all(h[1] for h in rec.handled) and d.loop_ident not in workers and len(workers) == 1
    d.stop()


class CountingCondition(threading.Condition):
    def __init__(self, lock: threading.Lock) -> None:
        super().__init__(lock)
        self.notified = 0

    def notify(self, n: int = 1) -> None:
        self.notified += 1
        super().notify(n)

    def notify_all(self) -> None:
        self.notified += 1
        super().notify_all()


def test_y3_a_yield_with_nothing_queued_does_not_wake_the_worker():
    """A decode per token is a yield per token: with no task queued, starting and ending it must
    not wake the worker (a thread hop that makes the loop thread wait for the GIL)."""
    q, rec, d = make(decline=lambda t, y: False)
    q._cond_worker = CountingCondition(q._lock)
    d.start()
    for _ in range(20):
        d.run(lambda: q.yield_to_queue(lambda: None))
    assert q._cond_worker.notified == 0
    d.run(lambda: q.yield_to_queue(lambda: (q.post(Task(M)), rec.wait_handled(1))))
    assert q._cond_worker.notified == 1 and rec.handled[0][1]  # a task does wake it
    d.stop()


def test_y3_one_worker_thread_for_all_yields():
    q, rec, d = make(decline=lambda t, y: False)
    d.start()
    before = threading.active_count()
    for _ in range(20):
        q.post(Task(M))
        d.run(lambda: q.yield_to_queue(lambda: rec.wait_handled(1)))
    assert threading.active_count() == before
    assert len({h[2] for h in rec.handled if h[1]}) == 1
    d.stop()


def test_y4_declined_tasks_keep_order():
    q, rec, d = make()
    d.start()
    tasks = [Task(C), Task(M), Task(C), Task(M), Task(C)]
    q.post_many(tasks)

    def work():
        rec.wait_offered(5)
        with rec.cond:  # declined tasks are not offered again during this yield
            assert sorted(rec.offered) == sorted(t.id for t in tasks)

    d.run(lambda: q.yield_to_queue(work))
    comps = [t.id for t in tasks if t.type is C]
    mets = [t.id for t in tasks if t.type is M]
    assert rec.ids == mets + comps
    assert [h[1] for h in rec.handled] == [True, True, False, False, False]
    d.stop()


def test_y4_declined_tasks_go_before_tasks_posted_later():
    q, rec, d = make()
    d.start()
    declined = Task(C)
    q.post(declined)
    later = Task(C)

    def work():
        rec.wait_offered(1)
        q.post(later)  # declined too, after `declined`
        rec.wait_offered(2)

    d.run(lambda: q.yield_to_queue(work))
    assert rec.ids == [declined.id, later.id]
    d.stop()


def test_y4_declining_when_not_yielding_is_an_error():
    q = ServerQueue()
    q.on_new_task(lambda t, y: False)
    q.post(Task(C))
    loop = LoopThread(q)
    loop.thread.start()
    loop.join()
    assert isinstance(loop.error, QueueError) and "declined while not yielding" in str(loop.error)
    assert worker_threads() == []


def test_y5_yield_waits_for_the_task_in_progress_and_then_nothing_runs_on_the_worker():
    q, rec, d = make(decline=lambda t, y: False)
    d.start()
    entered, release = threading.Event(), threading.Event()
    finished = []

    def slow(task, is_yielding):
        if task.id == slow_task.id:
            entered.set()
            release.wait(0.2)  # not synchronisation: gives a premature return the chance to show
            finished.append(task.id)
        return rec(task, is_yielding)

    q.on_new_task(slow)
    slow_task = Task(M)
    q.post(slow_task)

    def work():
        wait(entered)

    d.run(lambda: q.yield_to_queue(work) or list(finished))
    assert finished == [slow_task.id]
    q.post(Task(M))
    d.run()
    assert rec.handled[-1][1] is False and rec.handled[-1][2] == d.loop_ident
    d.stop()


def test_y6_idle_timer_reset_after_the_yield():
    q, rec, d = make()
    d.start()
    q._time_last_task = 0.0
    end = []
    d.run(lambda: q.yield_to_queue(lambda: end.append(time.monotonic())))
    assert q._time_last_task >= end[0]
    d.stop()


def test_y6_long_yield_does_not_trigger_idle_sleep():
    q, rec, d = make()
    slept = []
    q.on_sleeping_state(slept.append)
    d.loop.idle_sleep_ms = 30
    d.start()
    d.run(lambda: q.yield_to_queue(lambda: time.sleep(0.1)))  # a "decode" longer than idle
    assert slept == []  # the loop went straight back to update-slots, not to sleep
    d.stop()


def _raising_callback(rec, exc):
    def cb(task, is_yielding):
        if is_yielding and task.type is M:
            raise exc
        return rec(task, is_yielding)

    return cb


def test_y7_work_exception_wins_over_the_worker_and_declined_come_back():
    q, rec, d = make()
    boom = ValueError("worker")
    q.on_new_task(_raising_callback(rec, boom))
    d.start()
    comp, met = Task(C), Task(M)
    q.post_many([comp, met])

    def work():
        rec.wait_offered(1)
        raise KeyError("work")

    with pytest.raises(KeyError, match="work"):
        d.run(lambda: q.yield_to_queue(work))
    assert comp.id in rec.ids  # declined, put back, then handled after the yield
    d.stop()


def test_y7_worker_exception_reraised_after_declined_are_back():
    q, rec, d = make()
    q.on_new_task(_raising_callback(rec, ValueError("worker")))
    d.start()
    comp, met, after = Task(C), Task(M), Task(C)
    q.post_many([comp, met, after])
    seen_queue = []

    def step():
        try:
            q.yield_to_queue(lambda: rec.wait_offered(1))
        except ValueError:
            seen_queue.extend(t.id for t in q._tasks)
            raise

    with pytest.raises(ValueError, match="worker"):
        d.run(step)
    assert seen_queue == [comp.id, after.id]  # declined first, the rest untouched
    assert rec.ids == [comp.id, after.id]
    d.stop()


def test_y8_terminate_from_the_worker_during_a_yield():
    q = ServerQueue()
    terminated = threading.Event()

    def cb(task, is_yielding):
        q.terminate()
        terminated.set()
        return True

    q.on_new_task(cb)
    work_done = []
    running = threading.Event()

    def update():
        running.set()
        q.yield_to_queue(lambda: (wait(terminated), work_done.append(True)))

    q.on_update_slots(update)
    loop = LoopThread(q)
    loop.thread.start()
    wait(running)
    q.post(Task(M))
    loop.join()
    assert loop.error is None and work_done == [True]
    assert worker_threads() == []


# --- R ---------------------------------------------------------------------------------------
def test_r1_receive_only_registered_ids_with_timeout():
    r = ServerResponse()
    r.add_waiting_task_ids([1, 2])
    r.send(Result(3, "nobody waits"))
    r.send(Result(2, "two"))
    assert r.recv_with_timeout([1], 0.01) is None
    assert r.recv([1, 2]).payload == "two"
    assert r.recv_with_timeout([3], 0.01) is None  # it was dropped


def test_r1_removing_an_id_drops_its_results():
    r = ServerResponse()
    r.add_waiting_task_id(7)
    r.send(Result(7, "x"))
    r.remove_waiting_task_id(7)
    r.add_waiting_task_id(7)
    assert r.recv_with_timeout(7, 0.01) is None


def test_r1_terminate_wakes_waiters_with_an_error():
    r = ServerResponse()
    r.add_waiting_task_id(1)
    errors = []
    started = threading.Event()

    def waiter():
        started.set()
        try:
            r.recv(1)
        except QueueError as exc:
            errors.append(exc)

    t = threading.Thread(target=waiter)
    t.start()
    wait(started)
    r.terminate()
    t.join(TIMEOUT)
    assert not t.is_alive() and len(errors) == 1


def test_r1_broadcast_reaches_every_waiter():
    r = ServerResponse()
    r.add_waiting_task_ids([1, 2])
    r.broadcast(Result(-1, "all"))
    assert {r.recv([1]).id, r.recv([2]).id} == {1, 2}


def test_r2_results_from_the_worker_reach_their_waiters_only():
    q = ServerQueue()
    responses = ServerResponse()
    q.on_new_task(lambda t, y: responses.send(Result(t.id, ("yielding", y))) or True)
    d = Driver(q).start()
    readers = [ResponseReader(q, responses, poll_interval_s=0.05) for _ in range(4)]
    got: dict[int, Result] = {}

    def work():
        for reader in readers:
            reader.post_task(Task(M))
        for reader in readers:
            got[reader.ids[0]] = reader.next()

    d.run(lambda: q.yield_to_queue(work))
    assert all(res.id == rid and res.payload == ("yielding", True) for rid, res in got.items())
    assert len(got) == 4
    d.stop()


# --- ResponseReader --------------------------------------------------------------------------
def test_reader_stop_cancels_unfinished_tasks_at_the_front():
    q, rec, d = make()
    d.start()
    responses = ServerResponse()
    reader = ResponseReader(q, responses, poll_interval_s=0.01)
    q.post(Task(M))
    (tid,) = reader.post_tasks([Task(C)])
    assert reader.next(should_stop=lambda: True) is None
    reader.stop()
    assert not reader.has_next()
    assert q._tasks[0].type is X and q._tasks[0].id_target == tid
    d.run()
    assert tid not in rec.ids
    d.stop()


def test_reader_wait_for_all_and_errors():
    q = ServerQueue()
    responses = ServerResponse()

    def cb(task, is_yielding):
        if task.type is C:
            responses.send(Result(task.id, "partial", is_final=False))
            responses.send(Result(task.id, task.payload, is_error=task.payload == "bad"))
        return True

    q.on_new_task(cb)
    d = Driver(q).start()
    reader = ResponseReader(q, responses)
    reader.post_tasks([Task(C, payload="a"), Task(C, payload="b")])
    d.run()
    batch = reader.wait_for_all()
    assert [r.payload for r in batch.results] == ["a", "b"] and batch.error is None
    bad = ResponseReader(q, responses)
    bad.post_tasks([Task(C, payload="bad"), Task(C, payload="c")])
    d.run()
    batch = bad.wait_for_all()
    assert batch.error is not None and batch.error.payload == "bad"
    with pytest.raises(QueueError):
        bad.post_task(Task(C))
    d.stop()


def test_reader_take_available_takes_every_waiting_result_at_once():
    q = ServerQueue()
    responses = ServerResponse()
    reader = ResponseReader(q, responses, poll_interval_s=0.01)
    (tid,) = reader.post_tasks([Task(C)])
    assert reader.take_available() == []  # never blocks
    for i in range(3):
        responses.send(Result(tid, i, is_final=False))
    responses.send(Result(tid, "done"))
    got = reader.take_available()
    assert [r.payload for r in got] == [0, 1, 2, "done"] and not reader.has_next()
    assert reader.take_available() == []


def test_reader_take_available_ends_at_an_error_and_cancels_the_rest():
    q = ServerQueue()
    responses = ServerResponse()
    reader = ResponseReader(q, responses)
    a, b = reader.post_tasks([Task(C), Task(C)])
    responses.send(Result(a, "bad", is_error=True))
    responses.send(Result(b, "late", is_final=False))
    got = reader.take_available()
    assert [r.payload for r in got] == ["bad"] and reader.stopped
    assert any(t.type is TaskType.CANCEL and t.id_target == b for t in q._tasks)


def test_listener_is_woken_per_result_and_at_stop_and_terminate():
    q = ServerQueue()
    responses = ServerResponse()
    woken = []
    reader = ResponseReader(q, responses)
    (tid,) = reader.post_tasks([Task(C)])
    other = ResponseReader(q, responses)
    (oid,) = other.post_tasks([Task(C)])
    reader.listen(lambda: woken.append("r"))
    responses.send(Result(oid, "not mine", is_final=False))
    responses.send(Result(tid, 1, is_final=False))
    assert woken == ["r"]  # only the reader a result belongs to
    reader.stop()
    assert woken == ["r", "r"]  # a stopped reader must not sleep on
    responses.send(Result(tid, 2))
    assert woken == ["r", "r"]  # withdrawn ids: nothing delivered, nobody woken
    other.listen(lambda: woken.append("o"))
    responses.terminate()
    assert woken[-1] == "o"
    with pytest.raises(QueueError):
        other.take_available()


def test_held_sends_go_out_together_at_flush_and_other_threads_are_not_held():
    """The loop thread's step: results sent while it holds are delivered at flush, each listening
    reader woken once for all of its results; what another thread sends meanwhile (the worker
    answering during a yield) is not held back, and only the holding thread may flush."""
    q = ServerQueue()
    responses = ServerResponse()
    woken: list[str] = []
    a, b = ResponseReader(q, responses), ResponseReader(q, responses)
    (ta,) = a.post_tasks([Task(C)])
    (tb,) = b.post_tasks([Task(C)])
    a.listen(lambda: woken.append("a"))
    worker_done = threading.Event()
    worker_errors: list[BaseException] = []

    def worker() -> None:  # another thread, while the test's thread holds
        responses.send(Result(tb, "from the worker", is_final=False))
        for call in (responses.hold, responses.flush):
            try:
                call()
            except QueueError as exc:
                worker_errors.append(exc)
        worker_done.set()

    responses.hold()
    for i in range(2):
        responses.send(Result(ta, i, is_final=False))
    t = threading.Thread(target=worker)
    t.start()
    assert worker_done.wait(TIMEOUT)
    t.join(TIMEOUT)
    assert len(worker_errors) == 2  # neither hold nor flush from another thread
    assert woken == [] and a.take_available() == []  # held
    assert b.next().payload == "from the worker"  # not held
    responses.flush(keep_holding=True)
    assert woken == ["a"]  # once for both results
    assert [r.payload for r in a.take_available()] == [0, 1]
    responses.send(Result(ta, 2, is_final=False))  # still holding
    assert a.take_available() == []
    responses.flush()
    assert [r.payload for r in a.take_available()] == [2]
    responses.send(Result(ta, "done"))  # no longer holding: at once
    assert [r.payload for r in a.take_available()] == ["done"]


# --- Q3 with many users (fair_share.py) --------------------------------------------------------
class OneSlot:
    """A new-task callback that runs completions on ``n`` slots: a task takes a free one or is
    deferred; ``free()`` (on the loop thread) ends the oldest running task."""

    def __init__(self, q: ServerQueue, n: int = 1) -> None:
        self.q, self.n = q, n
        self.running: list[Task] = []
        self.started: list[str] = []

    def __call__(self, task: Task, is_yielding: bool) -> bool:
        if task.type is not C:
            return True
        if len(self.running) < self.n:
            self.running.append(task)
            self.started.append(f"{task.tenant}{task.payload}")
        else:
            self.q.defer(task)
        return True

    def free(self) -> None:
        self.running.pop(0)
        self.q.pop_deferred_task(0)


def _serve(q: ServerQueue, slots: OneSlot, tasks: list[Task]) -> list[str]:
    d = Driver(q)
    d.start()
    q.post_many(tasks)
    d.run()
    while q.n_deferred:
        d.run(slots.free)
    d.stop()
    return slots.started


def test_q3_a_tenant_with_many_tasks_does_not_make_another_wait_behind_all_of_them():
    q = ServerQueue()
    slots = OneSlot(q)
    q.on_new_task(slots)
    many = [Task(C, tenant="a", payload=i) for i in range(4)]
    # b's one task, posted after a's four: it goes second, not fifth
    assert _serve(q, slots, [*many, Task(C, tenant="b", payload=0)]) == ["a0", "b0", "a1", "a2", "a3"]


def test_q3_tenants_take_turns_by_weight_and_keep_their_own_order():
    q = ServerQueue()
    q.fair_share.weigh = lambda tenant: 2.0 if tenant == "a" else 1.0
    slots = OneSlot(q)
    q.on_new_task(slots)
    tasks = [Task(C, tenant=t, payload=i) for t in "ab" for i in range(4)]
    assert _serve(q, slots, tasks) == ["a0", "b0", "a1", "a2", "b1", "a3", "b2", "b3"]


def test_q3_priority_goes_before_fair_share_and_a_slot_asked_for_before_both():
    q = ServerQueue()
    slots = OneSlot(q)
    q.on_new_task(slots)
    tasks = [
        Task(C, tenant="a", payload=0),
        Task(C, tenant="a", payload=1, priority=5),
        Task(C, tenant="b", payload=2, priority=5),
        Task(C, tenant="a", payload=3, priority=-1),
        Task(C, tenant="c", payload=4, priority=9, id_slot=0),
    ]
    assert _serve(q, slots, tasks) == ["a0", "c4", "a3", "b2", "a1"]


def test_q3_a_cancelled_waiting_task_leaves_no_trace_in_the_choice():
    q = ServerQueue()
    slots = OneSlot(q)
    q.on_new_task(slots)
    d = Driver(q)
    d.start()
    a = [Task(C, tenant="a", payload=i) for i in range(3)]
    q.post_many(a)
    d.run()
    q.post(Task(X, id_target=a[1].id))
    d.run()
    while q.n_deferred:
        d.run(slots.free)
    d.stop()
    assert slots.started == ["a0", "a2"] and q.fair_share.tag(a[1].id) is None
