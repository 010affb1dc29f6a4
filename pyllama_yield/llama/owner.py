"""What every owner of a llama.cpp object shares: freeing it exactly once, refusing use after."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from .._native import ffi
from .errors import ClosedError


class Owner:
    """Owns one C object; ``_free`` is called exactly once."""

    _what = "object"

    def __init__(self, ptr: Any, free: Callable[[Any], None]) -> None:
        self._ptr = ptr
        self._finalizer = weakref.finalize(self, free, ptr)

    @property
    def ptr(self) -> Any:
        """The raw cdata pointer, for calls into ``lib`` that this layer does not wrap."""
        if not self._finalizer.alive:
            raise ClosedError(f"{self._what} is closed")
        return self._ptr

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def close(self) -> None:
        self._finalizer()

    def __enter__(self):  # noqa: ANN204 - returns the subclass
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_string(call: Callable[[Any, int], int], size: int = 256) -> str:
    """Call a llama.cpp ``(buf, size) -> needed length`` function, growing the buffer if needed."""
    buf = ffi.new("char[]", size)
    n = call(buf, size)
    if n >= size:
        buf = ffi.new("char[]", n + 1)
        n = call(buf, n + 1)
    return ffi.string(buf).decode("utf-8", "replace") if n >= 0 else ""
