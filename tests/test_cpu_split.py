"""``serve`` keeps its event loop off the model's CPUs when ``-t`` leaves one spare (cpu_split.py)."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest
from http_server import start_server, stop_server

from pyllama_yield.api.cpu_split import split_cpus

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no thread affinity on this platform")


def test_the_event_loop_gets_the_last_cpu_when_the_model_leaves_one():
    split = split_cpus(2, {0, 1, 2, 3})
    assert split is not None and split.model == {0, 1, 2} and split.event_loop == {3}
    assert split_cpus(1, {4, 6}) is not None and split_cpus(1, {4, 6}).event_loop == {6}  # type: ignore[union-attr]
    assert split_cpus(2, {0, 1}) is None  # a ggml thread would lose its CPU
    assert split_cpus(-1, {0, 1, 2}) is None  # -t -1: every CPU is the model's
    assert split_cpus(1, {5}) is None


def thread_cpus(pid: int) -> dict[int, set[int]]:
    """Each thread's allowed CPUs, by thread id."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        for line in (task / "status").read_text().splitlines():
            if line.startswith("Cpus_allowed_list:"):
                out[int(task.name)] = _cpu_list(line.split(":", 1)[1].strip())
    return out


def _cpu_list(text: str) -> set[int]:
    cpus: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


@pytest.mark.parametrize("pin", [True, False])
def test_serve_runs_its_event_loop_and_worker_apart_from_the_model(tiny_model_path, pin):
    """With ``-t 1`` on a machine of two CPUs or more: the main thread (the event loop) and the
    queue's worker on the last CPU, the loop thread on the others; ``--no-pin-event-loop``, or a
    single CPU, leaves every thread where it was."""
    cpus = os.sched_getaffinity(0)
    proc, base = start_server(tiny_model_path, "-t", "1", *([] if pin else ["--no-pin-event-loop"]))
    try:
        assert httpx.post(f"{base}/completion", json={"prompt": "Hi", "n_predict": 2}).status_code == 200
        masks = thread_cpus(proc.pid)
    finally:
        stop_server(proc)
    split = split_cpus(1, cpus) if pin else None
    if split is None:
        assert all(m == cpus for m in masks.values()), masks
        return
    assert masks[proc.pid] == split.event_loop  # the main thread runs uvicorn's event loop
    on_event_loop = [t for t, m in masks.items() if m == split.event_loop]
    assert len(on_event_loop) >= 2, masks  # and the queue's worker beside it
    assert any(m == split.model for m in masks.values()), masks  # the loop thread
