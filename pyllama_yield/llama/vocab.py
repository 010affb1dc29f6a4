"""A model's tokenizer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._native import ffi, lib
from .errors import LlamaError
from .owner import Owner

__all__ = ["Vocab"]


class Vocab:
    """Tokenizer of a model; lives as long as its model (any owner of a ``llama_model``: the vocab
    needs its pointer and its lifetime, nothing of ``Model`` itself)."""

    def __init__(self, model: Owner) -> None:
        self.model = model
        self._ptr = lib.llama_model_get_vocab(model.ptr)
        self._n_tokens: int = lib.llama_vocab_n_tokens(self._ptr)
        # token -> its piece, for each value of ``special``: a generating slot asks for one per
        # token, and a vocabulary's pieces never change
        self._pieces: tuple[dict[int, bytes], dict[int, bytes]] = ({}, {})

    @property
    def ptr(self) -> Any:
        self.model.ptr  # raises if the model is closed  # noqa: B018
        return self._ptr

    @property
    def n_tokens(self) -> int:
        self.model.ptr  # raises if the model is closed  # noqa: B018
        return self._n_tokens

    @property
    def bos(self) -> int:
        return lib.llama_vocab_bos(self.ptr)

    @property
    def eos(self) -> int:
        return lib.llama_vocab_eos(self.ptr)

    @property
    def add_bos(self) -> bool:
        return bool(lib.llama_vocab_get_add_bos(self.ptr))

    @property
    def add_eos(self) -> bool:
        return bool(lib.llama_vocab_get_add_eos(self.ptr))

    @property
    def add_sep(self) -> bool:
        return bool(lib.llama_vocab_get_add_sep(self.ptr))

    @property
    def sep(self) -> int:
        return lib.llama_vocab_sep(self.ptr)

    def fim(self, kind: str) -> int:
        """A fill-in-the-middle token: ``pre``, ``suf``, ``mid``, ``pad``, ``rep`` or ``sep``
        (-1 when the vocab has none)."""
        if kind not in ("pre", "suf", "mid", "pad", "rep", "sep"):
            raise ValueError(f"unknown FIM token kind {kind!r}")
        return getattr(lib, f"llama_vocab_fim_{kind}")(self.ptr)

    def is_eog(self, token: int) -> bool:
        return bool(lib.llama_vocab_is_eog(self.ptr, token))

    def eog_tokens(self) -> tuple[int, ...]:
        """Every end-of-generation token. One C call per vocabulary entry (262k for Gemma 3):
        read it once when the model loads, never per request."""
        ptr, is_eog = self.ptr, lib.llama_vocab_is_eog
        return tuple(t for t in range(lib.llama_vocab_n_tokens(ptr)) if is_eog(ptr, t))

    def tokenize(self, text: str | bytes, *, add_special: bool = True, parse_special: bool = False) -> list[int]:
        data = text.encode("utf-8") if isinstance(text, str) else text
        cap = len(data) + 8
        buf = ffi.new("llama_token[]", cap)
        n = lib.llama_tokenize(self.ptr, data, len(data), buf, cap, add_special, parse_special)
        if n < 0:
            if n == -(2**31):
                raise LlamaError("tokenization result does not fit in int32")
            cap = -n
            buf = ffi.new("llama_token[]", cap)
            n = lib.llama_tokenize(self.ptr, data, len(data), buf, cap, add_special, parse_special)
        return list(ffi.unpack(buf, n))

    def token_to_piece(self, token: int, *, special: bool = False) -> bytes:
        pieces = self._pieces[special]
        piece = pieces.get(token)
        if piece is None:
            piece = pieces[token] = self._token_to_piece(token, special)
        return piece

    def _token_to_piece(self, token: int, special: bool) -> bytes:
        self._check_token(token)
        buf = ffi.new("char[]", 64)
        n = lib.llama_token_to_piece(self.ptr, token, buf, 64, 0, special)
        if n < 0:
            buf = ffi.new("char[]", -n)
            n = lib.llama_token_to_piece(self.ptr, token, buf, -n, 0, special)
        return ffi.unpack(buf, n)

    def detokenize(self, tokens: Sequence[int], *, remove_special: bool = False, unparse_special: bool = False) -> str:
        for t in tokens:
            self._check_token(t)
        toks = ffi.new("llama_token[]", list(tokens))
        cap = max(16, 8 * len(tokens))
        buf = ffi.new("char[]", cap)
        n = lib.llama_detokenize(self.ptr, toks, len(tokens), buf, cap, remove_special, unparse_special)
        if n < 0:
            cap = -n
            buf = ffi.new("char[]", cap)
            n = lib.llama_detokenize(self.ptr, toks, len(tokens), buf, cap, remove_special, unparse_special)
        return ffi.unpack(buf, n).decode("utf-8", "replace")

    def _check_token(self, token: int) -> None:
        if not 0 <= token < self.n_tokens:
            raise ValueError(f"token id {token} out of range [0, {self.n_tokens})")
