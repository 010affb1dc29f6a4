"""The server: slots and continuous batching on the yielding queue. It knows tasks, never HTTP.

- ``engine``: ``Engine``, the handle both front ends use (build tasks, submit, read, cancel, snapshot);
- ``task_builder``: request → tasks on the caller's thread (tokenize, validate, caps, context checks);
- ``config``: ``EngineConfig``, what an engine is built from, frozen;
- ``context``: ``ServerContext``, the slots and the loop side; ``batching``: one step of the loop;
- ``params``: every request field (pydantic), resolved into a task's parameters;
- ``task``, ``slot``: what a task carries, what a slot holds;
- ``probs``, ``results``: token probabilities and the payloads a completion sends;
- ``speculative``, ``slot_files``, ``metrics``: the draft model, slot save/restore, counters.
"""

from __future__ import annotations

from .config import EngineConfig
from .context import ServerContext
from .engine import Engine
from .errors import ContextOverflowError
from .params import CompletionParams
from .task import CompletionTask
from .task_params import TaskParams

__all__ = [
    "CompletionParams",
    "CompletionTask",
    "ContextOverflowError",
    "Engine",
    "EngineConfig",
    "ServerContext",
    "TaskParams",
]
