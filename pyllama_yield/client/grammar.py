"""``LlamaGrammar`` and ``LlamaState``, as llama-cpp-python names them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..common import json_schema_to_grammar
from ..server.sampling import GrammarError

__all__ = ["GrammarError", "LlamaGrammar", "LlamaState"]


class LlamaGrammar:
    """GBNF text with its root rule ``root``; llama.cpp parses it when a request uses it (a
    ``Llama`` checks it before the request is queued)."""

    def __init__(self, grammar: str) -> None:
        if not isinstance(grammar, str) or not grammar.strip():
            raise GrammarError("a grammar must be non-empty GBNF text")
        self._grammar = grammar
        self.root = "root"

    @classmethod
    def from_string(cls, grammar: str, verbose: bool = True) -> LlamaGrammar:
        return cls(grammar)

    @classmethod
    def from_file(cls, file: str | Path, verbose: bool = True) -> LlamaGrammar:
        return cls(Path(file).read_text(encoding="utf-8"))

    @classmethod
    def from_json_schema(cls, json_schema: str | dict[str, Any], verbose: bool = True) -> LlamaGrammar:
        """A grammar for a JSON schema (its text, as llama-cpp-python takes it, or the parsed
        schema), converted by llama.cpp's own converter, as llama-server does."""
        try:
            schema = json.loads(json_schema) if isinstance(json_schema, str) else json_schema
            return cls(json_schema_to_grammar(schema))
        except (ValueError, TypeError) as exc:  # llama.cpp's converter says what it could not do
            raise GrammarError(str(exc)) from None

    def __str__(self) -> str:
        return self._grammar


@dataclass
class LlamaState:
    """What :meth:`Llama.save_state` keeps: each slot's tokens and KV cache (slot 0 under
    llama-cpp-python's names: ``input_ids``, ``n_tokens``, ``llama_state``)."""

    slot_states: list[bytes] = field(default_factory=list)  # llama.cpp's state file of each slot
    seed: int = 0xFFFFFFFF
    slot_tokens: list[list[int]] = field(default_factory=list)

    @property
    def input_ids(self) -> np.ndarray:
        return np.asarray(self.slot_tokens[0] if self.slot_tokens else [], dtype=np.intc)

    @property
    def n_tokens(self) -> int:
        return len(self.slot_tokens[0]) if self.slot_tokens else 0

    @property
    def llama_state(self) -> bytes:
        return self.slot_states[0] if self.slot_states else b""

    @property
    def llama_state_size(self) -> int:
        return sum(len(s) for s in self.slot_states)
