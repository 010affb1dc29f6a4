"""What went wrong with a request, in the engine's words: a kind, never an HTTP status.

The engine sends an error result as ``error_result(id_task, message, kind, **details)``; a request
refused before it becomes tasks raises an exception that :func:`failure_of` reads as the same
kind. The HTTP side picks the status and llama-server's error type for a kind (``api/errors.py``,
its one table); a Python caller gets the exception :func:`raise_for_error` picks (this module's
one map).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ..queue import Result
from .results import expect

__all__ = [
    "ContextOverflowError",
    "EngineError",
    "EngineFailure",
    "ErrorKind",
    "RequestError",
    "error_result",
    "failure_of",
    "raise_for_error",
]


class ErrorKind(Enum):
    INVALID_REQUEST = "invalid_request"  # the request cannot be served as asked
    EXCEED_CONTEXT = "exceed_context"  # its prompt does not fit a slot (details: n_prompt_tokens, n_ctx)
    CANCELLED = "cancelled"  # the caller went away or asked for a stop
    UNAVAILABLE = "unavailable"  # the engine is not running: its model failed to load, or it stopped
    NOT_SUPPORTED = "not_supported"  # a feature this server does not have (llama-server's 501)
    UNKNOWN_MODEL = "unknown_model"  # the request names a model the router does not have
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


class RequestError(ValueError):
    """A request refused before it became tasks, of a kind other than a plain bad request."""

    kind = ErrorKind.INVALID_REQUEST

    def details(self) -> dict[str, Any]:
        return {}


class ContextOverflowError(RequestError):
    """A prompt that does not fit a slot's context (llama-server's ``exceed_context_size_error``)."""

    kind = ErrorKind.EXCEED_CONTEXT

    def __init__(self, n_prompt_tokens: int, n_ctx: int) -> None:
        super().__init__(
            f"request ({n_prompt_tokens} tokens) exceeds the available context size ({n_ctx} tokens), try increasing it"
        )
        self.n_prompt_tokens = n_prompt_tokens
        self.n_ctx = n_ctx

    def details(self) -> dict[str, Any]:
        return {"n_prompt_tokens": self.n_prompt_tokens, "n_ctx": self.n_ctx}


def failure_of(exc: ValueError | NotImplementedError) -> EngineFailure:
    """What a request refused while its tasks were built (validating, tokenizing, templating)
    stands for: a feature not built is NOT_SUPPORTED, any other ``ValueError`` a bad request."""
    if isinstance(exc, RequestError):
        return EngineFailure(str(exc), exc.kind, exc.details())
    if isinstance(exc, NotImplementedError):
        return EngineFailure(str(exc), ErrorKind.NOT_SUPPORTED)
    return EngineFailure(str(exc), ErrorKind.INVALID_REQUEST)


class EngineError(RuntimeError):
    """The engine failed a request (a decode error, a full KV cache, a cancelled request);
    ``kind`` says which."""

    def __init__(self, message: str, kind: ErrorKind) -> None:
        super().__init__(message)
        self.kind = kind


def raise_for_error(res: Result) -> None:
    """An error result as a typed exception - the one place an engine error kind becomes a Python
    exception: a bad request is a ``ValueError`` (a prompt over the context a
    ``ContextOverflowError``), a feature not built ``NotImplementedError``, anything else an
    ``EngineError``."""
    if not res.is_error:
        return
    failure = expect(res, EngineFailure)
    if failure.kind is ErrorKind.EXCEED_CONTEXT:
        raise ContextOverflowError(failure.details["n_prompt_tokens"], failure.details["n_ctx"])
    if failure.kind is ErrorKind.INVALID_REQUEST:
        raise ValueError(failure.message)
    if failure.kind is ErrorKind.NOT_SUPPORTED:
        raise NotImplementedError(failure.message)
    raise EngineError(failure.message, failure.kind)
