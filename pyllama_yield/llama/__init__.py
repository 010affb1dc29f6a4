"""A thin Pythonic layer over the binding: owners of llama.cpp objects, not wrappers of everything.

Each owner frees its C object exactly once (``close()``, context manager, or a finalizer as a
backstop), refuses use after close, and keeps alive what it depends on (a context its model).
Every call into llama.cpp is one cffi call, which releases the GIL: ``Context.decode`` lets other
Python threads run while ggml computes.
"""

from __future__ import annotations

from .batch import Batch
from .context import Context
from .errors import (
    ClosedError,
    DecodeAbortedError,
    DecodeError,
    InvalidBatchError,
    LlamaError,
    ModelLoadError,
    NoKvSlotError,
)
from .model import Model, apply_chat_template, builtin_chat_templates, check_gguf_file
from .sampler import Sampler
from .vocab import Vocab

__all__ = [
    "Batch",
    "ClosedError",
    "Context",
    "DecodeAbortedError",
    "DecodeError",
    "InvalidBatchError",
    "LlamaError",
    "Model",
    "ModelLoadError",
    "NoKvSlotError",
    "Sampler",
    "Vocab",
    "apply_chat_template",
    "builtin_chat_templates",
    "check_gguf_file",
]
