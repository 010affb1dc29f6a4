"""The tokens each tenant's completions used in the last minute (their prompt and generated
tokens), for an API key's tokens-per-minute limit: added by the loop thread as a completion ends,
read by the HTTP layer before it admits a request."""

from __future__ import annotations

import threading
import time
from collections import deque

__all__ = ["TenantUsage"]

WINDOW_S = 60.0


class TenantUsage:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spent: dict[str, deque[tuple[float, int]]] = {}  # tenant -> (when, tokens), oldest first

    def add(self, tenant: str, tokens: int) -> None:
        with self._lock:
            self._spent.setdefault(tenant, deque()).append((time.monotonic(), tokens))

    def last_minute(self, tenant: str) -> tuple[int, float]:
        """The tenant's tokens of the last minute, and the seconds until the oldest of them leaves it."""
        now = time.monotonic()
        with self._lock:
            spent = self._spent.get(tenant)
            if not spent:
                return 0, 0.0
            while spent and spent[0][0] <= now - WINDOW_S:
                spent.popleft()
            if not spent:
                del self._spent[tenant]
                return 0, 0.0
            return sum(n for _, n in spent), spent[0][0] + WINDOW_S - now
