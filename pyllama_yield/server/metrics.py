"""The server's counters and the snapshot that ``/metrics`` and ``/slots`` read.

The loop thread publishes a consistent snapshot after every step; the queue's worker hands it
out while a decode runs, so a scrape never waits for the model.

As in llama-server, the throughput gauges cover the window since the previous scrape (a scrape
resets their buckets), and generation rates count decode steps: a request's first token comes
free with its prompt's logits. Going to sleep freezes the snapshot; scrapes while asleep read it
(and reset its buckets), so they neither wake the server nor see the freed context.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..queue import ServerQueue
    from .slot import Slot

__all__ = ["LOOP_PHASES", "PhaseClock", "Stats"]

# where the loop thread's time goes, step by step (``/metrics``: pyllama_yield:loop_seconds_total)
LOOP_PHASES = ("fill", "draft", "decode", "sample", "probs", "stop", "post", "publish", "other")


class PhaseClock:
    """Splits the loop thread's time into ``LOOP_PHASES``: each :meth:`lap` gives the time since
    the previous lap to a phase, so the phases add up to the whole step. Loop thread only."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(LOOP_PHASES, 0.0)
        self._t = time.perf_counter()

    def start(self) -> None:
        self._t = time.perf_counter()

    def lap(self, phase: str) -> None:
        t = time.perf_counter()
        self.seconds[phase] += t - self._t
        self._t = t

    def take(self) -> dict[str, float]:
        """The seconds gathered since the last take, reset to zero."""
        out, self.seconds = self.seconds, dict.fromkeys(LOOP_PHASES, 0.0)
        return out


class Stats:
    """Counters the loop thread adds to, and the snapshot it publishes from the slots."""

    def __init__(self, slots: list[Slot], queue: ServerQueue, *, n_ctx_slot: int, n_ctx: int) -> None:
        self._slots = slots
        self._queue = queue
        self._n_ctx_slot = n_ctx_slot
        self._n_ctx = n_ctx
        self._lock = threading.Lock()
        self._totals: dict[str, float] = dict(
            prompt_tokens=0,
            prompt_seconds=0.0,
            predicted_tokens=0,
            predicted_seconds=0.0,
            n_decode=0,
            draft_tokens=0,
            draft_accepted=0,
            requests_finished=0,
            requests_failed=0,
            prompt_tokens_cached=0,
            n_busy_slots=0,
            draft_steps=0,
            n_tokens_max=0,
        )
        self._buckets = _empty_buckets()
        self._loop_seconds = dict.fromkeys(LOOP_PHASES, 0.0)
        self._snapshot: dict[str, Any] = {}
        self._frozen: dict[str, Any] | None = None  # while asleep
        self._reset_on_wake = False  # a scrape while asleep reported the buckets
        self._published_at = 0.0  # perf_counter() of the last publish
        self.t_start = time.time()

    def add(self, **counts: float) -> None:
        with self._lock:
            for name, n in counts.items():
                self._totals[name] += n

    def add_prompt(self, n_tokens: int, seconds: float) -> None:
        """One decode that evaluated ``n_tokens`` prompt tokens."""
        with self._lock:
            self._totals["prompt_tokens"] += n_tokens
            self._totals["prompt_seconds"] += seconds
            self._buckets["prompt_steps"] += n_tokens
            self._buckets["prompt_seconds_window"] += seconds

    def add_loop(self, seconds: dict[str, float]) -> None:
        """One step's time on the loop thread, by phase (:class:`PhaseClock`)."""
        with self._lock:
            for phase, s in seconds.items():
                self._loop_seconds[phase] += s

    def add_prediction(self, n_tokens: int, seconds: float) -> None:
        """A finished request that generated ``n_tokens`` in ``seconds`` (after its prompt)."""
        steps = max(n_tokens - 1, 0)
        with self._lock:
            self._totals["predicted_tokens"] += n_tokens
            self._totals["predicted_seconds"] += seconds
            self._buckets["predicted_steps"] += steps
            self._buckets["predicted_seconds_window"] += seconds

    def on_sleeping(self, sleeping: bool) -> None:
        """Loop thread, as it goes to sleep (freeze the snapshot) or wakes (thaw it)."""
        if sleeping:
            self.publish()
            with self._lock:
                self._frozen = {**self._snapshot, **self._buckets, "loop_seconds": dict(self._loop_seconds)}
                self._reset_on_wake = False
        else:
            with self._lock:
                self._frozen = None
                if self._reset_on_wake:
                    self._buckets = _empty_buckets()

    def publish(self, unless_within_s: float = 0.0) -> None:
        """Loop thread: a consistent snapshot that the worker can hand out during a decode.
        ``unless_within_s``: skipped when the last one is that recent (a step in which no slot
        started or ended only moves the token counts: at GPU speed, publishing each would cost
        more than the tokens it counts)."""
        t = time.perf_counter()
        if unless_within_s and t - self._published_at < unless_within_s:
            return
        self._published_at = t
        slots = [
            {
                "id": s.id,
                "state": s.state.value,
                "id_task": s.id_task,
                "is_processing": s.busy,
                "n_prompt_tokens": len(s.prompt.tokens),
                "n_decoded": len(s.generated.tokens),
                "n_cached": len(s.memory.tokens),
                "n_ctx": self._n_ctx_slot,
                "tenant": s.tenant,  # ours: whose task it runs
            }
            for s in self._slots
        ]
        with self._lock:
            longest = max((len(s.memory.tokens) for s in self._slots), default=0)
            self._totals["n_tokens_max"] = max(self._totals["n_tokens_max"], longest)
            self._snapshot = {
                "slots": slots,
                "n_slots": len(self._slots),
                "requests_processing": sum(s["is_processing"] for s in slots),
                "n_ctx": self._n_ctx,
                "kv_cache_tokens": sum(s["n_cached"] for s in slots),
                **self._totals,
            }

    def snapshot(self, reset_buckets: bool = False) -> dict[str, Any]:
        """The latest published snapshot plus what the queue knows now; safe from any thread.
        ``reset_buckets``: a scrape, which starts a new window for the throughput gauges."""
        with self._lock:
            if self._frozen is not None:
                snap = dict(self._frozen)
                if reset_buckets:
                    self._frozen.update(_empty_buckets())
                    self._reset_on_wake = True
            else:
                # the loop's phase totals as they are now: they grow after each publish
                snap = {**self._snapshot, **self._buckets, "loop_seconds": dict(self._loop_seconds)}
                if reset_buckets:
                    self._buckets = _empty_buckets()
        waiting = self._queue.waiting()
        snap["requests_deferred"] = len(waiting)
        snap["requests_waiting_by_priority"] = dict(Counter(t.priority for t, _ in waiting))
        snap["uptime_s"] = time.time() - self.t_start
        snap["is_sleeping"] = self._queue.is_sleeping
        return snap


def _empty_buckets() -> dict[str, float]:
    return {"prompt_steps": 0, "prompt_seconds_window": 0.0, "predicted_steps": 0, "predicted_seconds_window": 0.0}
