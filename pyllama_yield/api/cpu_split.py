"""Where ``serve``'s two busy threads run: the model's loop thread (with the ggml threads it
starts) and the event loop (HTTP, rendering, the socket).

Left to the scheduler, the event loop is woken by the loop thread's doorbell onto the loop
thread's own CPU (Linux places a woken thread by its waker while that CPU's caches are warm), so
it waits there for the decode to end instead of running beside it: each token's frame goes out
after the decode, and a request's first token waits behind the next decodes (measured on the
2×64 model at ``-t 1`` on two CPUs: see the commit that brought this). When the model's threads
leave this process a CPU, the event loop (and the queue's worker, which answers while the model
decodes) gets the last one and the model the others; with ``-t`` at every CPU (the default)
nothing is pinned, as a pinned event loop would then take a CPU from a ggml thread that its
whole graph waits for.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass

__all__ = ["CpuSplit", "split_cpus"]

log = logging.getLogger("pyllama_yield.server")


@dataclass(frozen=True)
class CpuSplit:
    model: frozenset[int]  # the loop thread's and the ggml threads it starts
    event_loop: frozenset[int]  # the event loop's and the queue worker's: light, woken often

    def pin_model(self, thread: threading.Thread | None = None) -> None:
        """``thread`` (default: the calling one), and the threads it starts from now on."""
        _pin(thread, self.model)

    def pin_event_loop(self, thread: threading.Thread | None = None) -> None:
        _pin(thread, self.event_loop)


def _pin(thread: threading.Thread | None, cpus: frozenset[int]) -> None:
    tid = threading.get_native_id() if thread is None else thread.native_id
    if tid is None:  # a thread not started
        return
    try:
        os.sched_setaffinity(tid, cpus)
    except OSError as exc:  # a sandbox that forbids it, a thread gone: the threads stay where they are
        log.warning("could not pin thread %s to CPUs %s: %s", tid, sorted(cpus), exc)


def split_cpus(n_model_threads: int, allowed: set[int] | None = None) -> CpuSplit | None:
    """The split for a model computing on ``n_model_threads`` threads (-1 or less: every CPU)
    among the ``allowed`` CPUs (default: this process's), or None when there is no CPU to spare
    or this platform cannot pin threads."""
    if allowed is None:
        if not hasattr(os, "sched_getaffinity"):
            return None
        allowed = os.sched_getaffinity(0)
    cpus = sorted(allowed)
    if n_model_threads < 1 or len(cpus) <= n_model_threads:
        return None
    return CpuSplit(model=frozenset(cpus[:-1]), event_loop=frozenset(cpus[-1:]))
