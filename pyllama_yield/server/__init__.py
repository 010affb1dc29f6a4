"""The server: slots and continuous batching on the yielding queue. It knows tasks, never HTTP.

- ``context``: ``ServerContext``, the slots and the batching loop; ``client``: its any-thread side;
- ``params``: every request field (pydantic), resolved into a task's parameters;
- ``task``, ``slot``: what a task carries, what a slot holds;
- ``probs``, ``results``: token probabilities and the payloads a completion sends;
- ``speculative``, ``slot_files``, ``metrics``: draft-model decoding, slot save/restore, counters.
"""

from __future__ import annotations

from .client import ContextOverflowError
from .context import ServerContext
from .params import CompletionParams, TaskParams
from .task import CompletionTask

__all__ = ["CompletionParams", "CompletionTask", "ContextOverflowError", "ServerContext", "TaskParams"]
