"""The batch a decode reads: allocated once, refilled every step through numpy views."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from .._native import ffi, lib
from .owner import Owner

__all__ = ["Batch"]


class Batch(Owner):
    """A ``llama_batch`` allocated once and refilled every step.

    ``tokens``, ``pos`` and ``logits`` are numpy views of the C arrays (no copies).
    """

    _what = "batch"

    def __init__(self, capacity: int, n_seq_max: int = 1) -> None:
        if capacity <= 0 or n_seq_max <= 0:
            raise ValueError("Batch capacity and n_seq_max must be positive")
        raw = lib.llama_batch_init(capacity, 0, n_seq_max)
        super().__init__(raw, lib.llama_batch_free)
        self.capacity = capacity
        self.n_seq_max = n_seq_max
        self.tokens = np.frombuffer(ffi.buffer(raw.token, 4 * capacity), dtype=np.int32)
        self.pos = np.frombuffer(ffi.buffer(raw.pos, 4 * capacity), dtype=np.int32)
        self.n_seq_id = np.frombuffer(ffi.buffer(raw.n_seq_id, 4 * capacity), dtype=np.int32)
        self.logits = np.frombuffer(ffi.buffer(raw.logits, capacity), dtype=np.int8)
        # seq_id is an array of per-token pointers (llama.cpp allocates each token's ids apart)
        self._seq = [np.frombuffer(ffi.buffer(raw.seq_id[i], 4 * n_seq_max), dtype=np.int32) for i in range(capacity)]
        self.n_tokens = 0

    @property
    def struct(self) -> Any:
        raw = self.ptr
        raw.n_tokens = self.n_tokens
        return raw

    def clear(self) -> None:
        self.n_tokens = 0

    def add(self, token: int, pos: int, seq_ids: int | Iterable[int] = 0, logits: bool = False) -> None:
        i = self.n_tokens
        if i >= self.capacity:
            raise ValueError(f"batch is full ({self.capacity} tokens)")
        seqs = [seq_ids] if isinstance(seq_ids, int) else list(seq_ids)
        if not 1 <= len(seqs) <= self.n_seq_max:
            raise ValueError(f"a token needs 1..{self.n_seq_max} sequence ids, got {len(seqs)}")
        self.tokens[i] = token
        self.pos[i] = pos
        self.n_seq_id[i] = len(seqs)
        self._seq[i][: len(seqs)] = seqs
        self.logits[i] = logits
        self.n_tokens = i + 1

    def add_sequence(
        self,
        tokens: Sequence[int] | np.ndarray,
        start_pos: int = 0,
        seq_id: int = 0,
        logits_last: bool = True,
        logits_all: bool = False,
    ) -> None:
        """Append a run of tokens of one sequence; only the last one asks for logits by default
        (every one with ``logits_all``)."""
        toks = np.asarray(tokens, dtype=np.int32)
        n, i = len(toks), self.n_tokens
        if i + n > self.capacity:
            raise ValueError(f"{n} tokens do not fit: batch has {self.capacity - i} of {self.capacity} left")
        self.tokens[i : i + n] = toks
        self.pos[i : i + n] = np.arange(start_pos, start_pos + n, dtype=np.int32)
        self.n_seq_id[i : i + n] = 1
        for j in range(i, i + n):
            self._seq[j][0] = seq_id
        self.logits[i : i + n] = 1 if logits_all else 0
        if logits_last and n:
            self.logits[i + n - 1] = 1
        self.n_tokens = i + n
