"""Saving and restoring a context's state: whole, per sequence, in memory or in files."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._native import ffi, lib
from .errors import LlamaError, with_cause

__all__ = ["ContextState"]

# LLAMA_STATE_SEQ_FLAGS_NONE / _PARTIAL_ONLY (macros: not in the cffi declarations). A partial
# state is only what cannot be rolled back by removing positions: the sliding-window (SWA) cache's
# cells, a recurrent model's state.
_SEQ_FLAGS_NONE = 0
_SEQ_FLAGS_PARTIAL_ONLY = 1


def _seq_flags(partial: bool) -> int:
    return _SEQ_FLAGS_PARTIAL_ONLY if partial else _SEQ_FLAGS_NONE


class ContextState:
    """The state methods of :class:`~pyllama_yield.llama.Context` (a mixin: it needs the context's
    ``ptr`` and ``n_ctx``)."""

    if TYPE_CHECKING:

        @property
        def ptr(self) -> Any: ...

        @property
        def n_ctx(self) -> int: ...

    def state_bytes(self) -> bytes:
        size = lib.llama_state_get_size(self.ptr)
        buf = ffi.new("uint8_t[]", size)
        n = lib.llama_state_get_data(self.ptr, buf, size)
        return ffi.unpack(ffi.cast("char *", buf), n)

    def load_state_bytes(self, data: bytes) -> None:
        n = lib.llama_state_set_data(self.ptr, data, len(data))
        if n == 0:
            raise LlamaError(with_cause("llama.cpp rejected the state data"))

    def seq_state_size(self, seq_id: int, *, partial: bool = False) -> int:
        return lib.llama_state_seq_get_size_ext(self.ptr, seq_id, _seq_flags(partial))

    def seq_state_bytes(self, seq_id: int, size: int | None = None, *, partial: bool = False) -> bytearray:
        """One sequence's state (its KV cells), e.g. to keep a prompt in host memory; ``size``:
        :meth:`seq_state_size` when the caller has it already (llama.cpp walks the cells for it).
        ``partial``: only the part that removing positions cannot roll back (a context checkpoint)."""
        size = self.seq_state_size(seq_id, partial=partial) if size is None else size
        buf = bytearray(size)
        n = lib.llama_state_seq_get_data_ext(self.ptr, ffi.from_buffer(buf), size, seq_id, _seq_flags(partial))
        del buf[n:]
        return buf

    def load_seq_state_bytes(self, data: bytes | bytearray, seq_id: int, *, partial: bool = False) -> None:
        """Put a state from :meth:`seq_state_bytes` (of a context like this one) into ``seq_id``."""
        n = lib.llama_state_seq_set_data_ext(self.ptr, ffi.from_buffer(data), len(data), seq_id, _seq_flags(partial))
        if n != len(data):
            raise LlamaError(with_cause(f"llama.cpp rejected the state of sequence {seq_id}"))

    def save_state_file(self, path: str | os.PathLike[str], tokens: Sequence[int]) -> None:
        toks = ffi.new("llama_token[]", list(tokens))
        if not lib.llama_state_save_file(self.ptr, os.fsencode(path), toks, len(tokens)):
            raise LlamaError(with_cause(f"could not save state to {path}"))

    def save_seq_state_file(self, path: str | os.PathLike[str], seq_id: int, tokens: Sequence[int]) -> int:
        """Save one sequence's KV state and its tokens; returns the bytes written."""
        toks = ffi.new("llama_token[]", list(tokens))
        n = lib.llama_state_seq_save_file(self.ptr, os.fsencode(path), seq_id, toks, len(tokens))
        if n == 0:
            raise LlamaError(with_cause(f"could not save sequence {seq_id} to {path}"))
        return n

    def load_seq_state_file(
        self, path: str | os.PathLike[str], seq_id: int, max_tokens: int | None = None
    ) -> list[int]:
        """Restore a sequence saved with :meth:`save_seq_state_file` into ``seq_id``; returns its tokens."""
        return self._load_state(
            path,
            max_tokens,
            lambda p, toks, cap, n: lib.llama_state_seq_load_file(self.ptr, p, seq_id, toks, cap, n) != 0,
        )

    def load_state_file(self, path: str | os.PathLike[str], max_tokens: int | None = None) -> list[int]:
        """Restore a state saved with :meth:`save_state_file`; returns its tokens."""
        return self._load_state(
            path, max_tokens, lambda p, toks, cap, n: bool(lib.llama_state_load_file(self.ptr, p, toks, cap, n))
        )

    def _load_state(self, path: str | os.PathLike[str], max_tokens: int | None, load: Callable[..., bool]) -> list[int]:
        """Shared by the whole-context and per-sequence loaders: ``load(path, tokens, capacity, n_out)``."""
        if not Path(path).is_file():
            raise FileNotFoundError(f"state file not found: {path}")
        cap = max_tokens if max_tokens is not None else self.n_ctx
        toks = ffi.new("llama_token[]", cap)
        n = ffi.new("size_t *")
        if not load(os.fsencode(path), toks, cap, n):
            raise LlamaError(with_cause(f"could not load state from {path}"))
        return list(ffi.unpack(toks, n[0]))
