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

from .fair_share import FairShare
from .responses import BatchResponse, ResponseReader, ServerResponse, Wake, ring
from .server_queue import ServerQueue
from .tasks import QueueError, Result, Task, TaskType

__all__ = [
    "BatchResponse",
    "FairShare",
    "QueueError",
    "ResponseReader",
    "Result",
    "ServerQueue",
    "ServerResponse",
    "Task",
    "TaskType",
    "Wake",
    "ring",
]
