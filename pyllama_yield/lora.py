"""LoRA adapters (``llama_adapter_lora``): load one for a model, set which apply to a context.

An adapter belongs to its model: llama.cpp frees it with the model. It is never freed on its own
here, because a context may still hold it; a :class:`LoraAdapter` keeps its model alive and
refuses use once the model is closed.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._native import ffi, lib, take_recent_problems
from .llama import ClosedError, Context, Model, ModelLoadError, check_gguf_file
from .llama.errors import with_cause

__all__ = ["LoraAdapter", "set_loras"]


class LoraAdapter:
    """A LoRA adapter GGUF loaded for ``model`` (same architecture, matching tensor shapes)."""

    def __init__(self, model: Model, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        check_gguf_file(self.path)
        take_recent_problems()
        ptr = lib.llama_adapter_lora_init(model.ptr, os.fsencode(self.path))
        if ptr == ffi.NULL:
            raise ModelLoadError(with_cause(f"llama.cpp could not load the LoRA adapter {self.path}"))
        self.model = model
        self._ptr = ptr

    @property
    def ptr(self) -> Any:
        if self.model.closed:
            raise ClosedError("the LoRA adapter's model is closed")
        return self._ptr

    def meta(self, key: str) -> str | None:
        """A scalar GGUF metadata value of the adapter, as text; None when absent."""
        buf = ffi.new("char[]", 1024)
        n = lib.llama_adapter_meta_val_str(self.ptr, key.encode(), buf, len(buf))
        if n < 0:
            return None
        if n >= len(buf):
            buf = ffi.new("char[]", n + 1)
            lib.llama_adapter_meta_val_str(self.ptr, key.encode(), buf, len(buf))
        return ffi.string(buf).decode("utf-8", "replace")

    @property
    def task_name(self) -> str:
        return self.meta("adapter.lora.task_name") or ""

    @property
    def prompt_prefix(self) -> str:
        return self.meta("adapter.lora.prompt_prefix") or ""

    @property
    def invocation_tokens(self) -> list[int]:
        """The tokens that activate an aLoRA (activated LoRA); empty for a plain LoRA."""
        n = lib.llama_adapter_get_alora_n_invocation_tokens(self.ptr)
        tokens = lib.llama_adapter_get_alora_invocation_tokens(self.ptr)
        return [tokens[i] for i in range(n)]


def set_loras(ctx: Context, adapters: Sequence[tuple[LoraAdapter, float]]) -> None:
    """Make exactly these ``(adapter, scale)`` pairs apply to ``ctx``'s next decodes (an empty
    list: none). llama.cpp keeps the set when it is unchanged, so calling it every step is cheap."""
    for adapter, _ in adapters:
        if adapter.model is not ctx.model:
            raise ValueError(f"LoRA adapter {adapter.path} was loaded for another model")
    ptrs = ffi.new("struct llama_adapter_lora *[]", [a.ptr for a, _ in adapters]) if adapters else ffi.NULL
    scales = ffi.new("float[]", [float(s) for _, s in adapters]) if adapters else ffi.NULL
    lib.llama_set_adapters_lora(ctx.ptr, ptrs, len(adapters), scales)
