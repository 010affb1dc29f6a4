"""The token list a slot file keeps beside the KV cache, in llama-server's packed format, so that
slot files go both ways between it and us, media included.

llama.cpp's state file holds a list of 32-bit tokens. llama-server writes into it, when there are
media or not: ``-1`` (a marker no token has), the format version (1), the tokens (``-1`` in each
medium's cells), the first cell of each medium, then each medium's metadata as mtmd saves it
(``mtmd_input_chunk_save``, no pixels), every list prefixed by its u32 length and the whole padded
to 4 bytes. A list that does not start with ``-1`` is a plain token list (older files).
Here media cells are the content-derived values of ``media.py``, not ``-1``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING

from .media import is_media_cell, media_cell

if TYPE_CHECKING:
    from ..mtmd import Chunk

__all__ = ["pack", "unpack"]

NULL = -1  # LLAMA_TOKEN_NULL
VERSION = 1


def pack(tokens: list[int], chunk_for: Callable[[int], Chunk]) -> list[int]:
    """``tokens`` (media cells as ``media.py`` writes them) in the packed format; ``chunk_for(cell)``
    gives the medium whose cells start there (ValueError when it is not known)."""
    plain: list[int] = []
    starts: list[int] = []
    blobs: list[bytes] = []
    i = 0
    while i < len(tokens):
        if not is_media_cell(tokens[i]):
            plain.append(tokens[i])
            i += 1
            continue
        chunk = chunk_for(tokens[i])
        starts.append(i)
        blobs.append(chunk.save())
        plain += [NULL] * chunk.n_tokens
        i += chunk.n_tokens
    data = struct.pack("<iI", NULL, VERSION) + _vector("i", plain) + _vector("I", starts)
    data += b"".join(struct.pack("<I", len(b)) + b for b in blobs)
    data += bytes(-len(data) % 4)
    return list(struct.unpack(f"<{len(data) // 4}i", data))


def unpack(packed: list[int], load_chunk: Callable[[bytes], Chunk]) -> tuple[list[int], list[Chunk]]:
    """A slot file's token list back to tokens (media cells as ``media.py`` writes them) and the
    media in it (``load_chunk`` reads one). ValueError for a list that is not one of these."""
    if not packed or packed[0] != NULL:
        return list(packed), []  # a plain token list
    reader = _Reader(struct.pack(f"<{len(packed)}i", *packed))
    reader.read("i")  # the marker
    if reader.read("I") != VERSION:
        raise ValueError("Unsupported server tokens state version")
    tokens = reader.vector("i")
    starts = reader.vector("I")
    media = []
    for start in starts:
        chunk = load_chunk(reader.blob())
        cells = tokens[start : start + chunk.n_tokens]
        if len(cells) != chunk.n_tokens or any(t != NULL for t in cells):
            raise ValueError("Invalid tokens in slot save file")
        tokens[start : start + chunk.n_tokens] = [media_cell(chunk.id or "")] * chunk.n_tokens
        media.append(chunk)
    if reader.remaining() >= 4:
        raise ValueError("Trailing data in server tokens state")
    if NULL in tokens:
        raise ValueError("Invalid tokens in slot save file")
    return tokens, media


def _vector(code: str, values: list[int]) -> bytes:
    return struct.pack(f"<I{len(values)}{code}", len(values), *values)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def read(self, code: str) -> int:
        value: int = self._take(struct.calcsize(code), code)[0]
        return value

    def vector(self, code: str) -> list[int]:
        n = self.read("I")
        if n > self.remaining() // struct.calcsize(code):  # before allocating: a corrupt count
            raise ValueError("Unexpected end of server tokens state")
        return list(self._take(n * struct.calcsize(code), f"{n}{code}"))

    def blob(self) -> bytes:
        n = self.read("I")
        if n == 0 or n > self.remaining():
            raise ValueError("Cannot load media chunk from server tokens state")
        self.pos += n
        return self.data[self.pos - n : self.pos]

    def _take(self, size: int, code: str) -> tuple[int, ...]:
        if self.remaining() < size:
            raise ValueError("Unexpected end of server tokens state")
        self.pos += size
        return struct.unpack_from(f"<{code}", self.data, self.pos - size)
