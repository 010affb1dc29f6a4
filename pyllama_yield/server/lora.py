"""The server's LoRA adapters (``--lora``, ``--lora-scaled``): their global scales, which
``POST /lora-adapters`` changes, and the scales a request asks for (its ``lora`` field).

A slot decodes with one set of scales (a tuple, one per adapter). One decode applies one set, so
a step batches only the slots whose set matches (see ``batching.BatchStep``), as llama-server does.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ..llama import Context, Model
from ..lora import LoraAdapter, set_loras

__all__ = ["LoraSet"]

Scales = tuple[float, ...]


class LoraSet:
    """The adapters loaded at start, in command-line order (their ids), with global scales."""

    def __init__(self, model: Model, specs: Sequence[tuple[str | os.PathLike[str], float]] = ()) -> None:
        self.adapters = [LoraAdapter(model, path) for path, _ in specs]
        self.scales: Scales = tuple(float(scale) for _, scale in specs)  # replaced whole: any thread reads it
        self._applied: Scales | None = None

    def __len__(self) -> int:
        return len(self.adapters)

    def describe(self) -> list[dict[str, Any]]:
        """``GET /lora-adapters``: llama-server's entries."""
        out = []
        for i, (adapter, scale) in enumerate(zip(self.adapters, self.scales, strict=True)):
            entry: dict[str, Any] = {
                "id": i,
                "path": str(adapter.path),
                "scale": scale,
                "task_name": adapter.task_name,
                "prompt_prefix": adapter.prompt_prefix,
            }
            tokens = adapter.invocation_tokens
            if tokens:
                entry["alora_invocation_tokens"] = tokens
            out.append(entry)
        return out

    def scales_for(self, config: dict[int, float] | None) -> Scales:
        """A request's ``lora`` (id -> scale; ids not loaded are ignored, adapters not named get
        0), or the global scales when it named none (llama-server's construct_lora_list)."""
        if config is None:
            return self.scales
        return tuple(float(config.get(i, 0.0)) for i in range(len(self.adapters)))

    def set_global(self, config: dict[int, float]) -> None:
        """``POST /lora-adapters``: the scales of requests that do not name their own."""
        self.scales = self.scales_for(config)

    def apply(self, ctx: Context, scales: Scales) -> None:
        """Make ``scales`` apply to the next decode of ``ctx`` (nothing to do when they already do)."""
        if scales == self._applied or not self.adapters:
            return
        set_loras(ctx, list(zip(self.adapters, scales, strict=True)))
        self._applied = scales

    def forget_applied(self) -> None:
        """The context was recreated (after a sleep): it has no adapters set."""
        self._applied = None
