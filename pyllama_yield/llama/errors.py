"""The exceptions of the Pythonic layer, and the cause llama.cpp logged for a failure."""

from __future__ import annotations

from .._native import take_recent_problems

__all__ = [
    "ClosedError",
    "DecodeAbortedError",
    "DecodeError",
    "InvalidBatchError",
    "LlamaError",
    "ModelLoadError",
    "NoKvSlotError",
]


class LlamaError(RuntimeError):
    """A llama.cpp call failed; the message carries llama.cpp's own reason when it logged one."""


class ModelLoadError(LlamaError):
    pass


class ClosedError(LlamaError):
    pass


class DecodeError(LlamaError):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


class NoKvSlotError(DecodeError):
    """``llama_decode`` returned 1: no room in the KV cache for the batch."""


class DecodeAbortedError(DecodeError):
    """``llama_decode`` returned 2: the abort callback stopped it."""


class InvalidBatchError(DecodeError):
    """``llama_decode`` returned -1 (or the batch was rejected before reaching C)."""


def with_cause(message: str) -> str:
    """``message`` with what llama.cpp logged since the call began: the first problem is the root
    cause (e.g. which GGUF field is bad), the last one what gave up."""
    problems = [p.strip() for p in take_recent_problems()]
    if not problems:
        return message
    return f"{message}: {problems[0]}" + (f" ({problems[-1]})" if len(problems) > 1 else "")
