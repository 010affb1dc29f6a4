"""What went wrong with a request, in the engine's words: a kind, never an HTTP status.

The engine sends an error result as ``error_result(id_task, message, kind, **details)``; the HTTP side
picks the status and llama-server's error type for a kind (``api/errors.py``), the in-process
client its exception (``client/answers.py``). Neither choice is made here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ..queue import Result

__all__ = ["EngineFailure", "ErrorKind", "error_result"]


class ErrorKind(Enum):
    INVALID_REQUEST = "invalid_request"  # the request cannot be served as asked
    EXCEED_CONTEXT = "exceed_context"  # its prompt does not fit a slot (details: n_prompt_tokens, n_ctx)
    CANCELLED = "cancelled"  # the caller went away or asked for a stop
    UNAVAILABLE = "unavailable"  # the engine is not running: its model failed to load, or it stopped
    SERVER = "server"  # the engine failed while serving it


@dataclass(frozen=True)
class EngineFailure:
    """The payload of an error result: the message, the kind and the details (e.g.
    ``n_prompt_tokens`` and ``n_ctx`` of an ``EXCEED_CONTEXT``)."""

    message: str
    kind: ErrorKind = ErrorKind.SERVER
    details: dict[str, Any] = field(default_factory=dict)


def error_result(id_task: int, message: str, kind: ErrorKind, **details: Any) -> Result:
    """The result that fails task ``id_task``."""
    return Result(id_task, EngineFailure(message, kind, details), is_error=True)
