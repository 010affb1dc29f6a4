"""The engine in-process, for Python code: ``Llama`` with llama-cpp-python's names and shapes.

``from pyllama_yield import Llama`` (or ``pyllama_yield.client``). Calls from several threads are
batched on one engine; ``acreate_*`` are the asyncio twins.
"""

from __future__ import annotations

from ..server.errors import ContextOverflowError, EngineError
from .grammar import GrammarError, LlamaGrammar, LlamaState
from .llama import Llama

__all__ = ["ContextOverflowError", "EngineError", "GrammarError", "Llama", "LlamaGrammar", "LlamaState"]
