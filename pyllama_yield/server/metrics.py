"""The server's counters and the snapshot that ``/metrics`` and ``/slots`` read.

The loop thread publishes a consistent snapshot after every step; the queue's worker hands it
out while a decode runs, so a scrape never waits for the model.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .context import ServerContext

__all__ = ["Stats"]


class Stats:
    def __init__(self, srv: ServerContext) -> None:
        self._srv = srv
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
        self._snapshot: dict[str, Any] = {}
        self.t_start = time.time()

    def add(self, **counts: float) -> None:
        with self._lock:
            for name, n in counts.items():
                self._totals[name] += n

    def publish(self) -> None:
        """Loop thread: a consistent snapshot that the worker can hand out during a decode."""
        srv = self._srv
        slots = [
            {
                "id": s.id,
                "state": s.state.value,
                "id_task": s.id_task,
                "is_processing": s.busy,
                "n_prompt_tokens": len(s.prompt_tokens),
                "n_decoded": len(s.generated),
                "n_cached": len(s.cache_tokens),
                "n_ctx": srv.n_ctx_slot,
            }
            for s in srv.slots
        ]
        with self._lock:
            longest = max((s["n_cached"] for s in slots), default=0)
            self._totals["n_tokens_max"] = max(self._totals["n_tokens_max"], longest)
            self._snapshot = {
                "slots": slots,
                "n_slots": srv.n_parallel,
                "requests_processing": sum(s["is_processing"] for s in slots),
                "kv_cells_used": sum(s["n_cached"] for s in slots),
                "n_ctx": srv.n_ctx_total,
                **self._totals,
            }

    def snapshot(self) -> dict[str, Any]:
        """The latest published snapshot plus what the queue knows now; safe from any thread."""
        with self._lock:
            snap = dict(self._snapshot)
        snap["requests_deferred"] = self._srv.queue.n_deferred
        snap["uptime_s"] = time.time() - self.t_start
        snap["is_sleeping"] = self._srv.queue.is_sleeping
        return snap
