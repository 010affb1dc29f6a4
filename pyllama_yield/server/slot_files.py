"""Slot tasks: save a slot's KV cache to a file, restore it, erase it (``/slots/{id}``). Each
returns its result; the caller sends it. A bad request raises ``ValueError``."""

from __future__ import annotations

import os
import time
from typing import Any

from ..llama import LlamaError
from ..mtmd import Chunk
from ..queue import Result, Task
from . import token_state
from .kv_caches import KvCaches
from .media import MediaMemory
from .results import SlotErased, SlotFileDone
from .slot import Slot

__all__ = ["SlotFiles"]


class SlotFiles:
    def __init__(
        self, slots: list[Slot], kv: KvCaches, media: MediaMemory, *, n_ctx_slot: int, has_projector: bool
    ) -> None:
        self._slots, self._kv, self._media = slots, kv, media
        self._n_ctx_slot = n_ctx_slot
        self._has_projector = has_projector

    def save(self, task: Task) -> Result:
        """The slot's KV cache and its tokens in llama-server's packed format (``token_state.py``)."""
        slot, path = self._slot_and_path(task)
        t0 = time.perf_counter()

        def chunk_for(cell: int) -> Chunk:
            chunk = self._media.get(cell)
            if chunk is None:
                raise ValueError("Cannot serialize media chunk in server tokens: its medium is no longer known")
            return chunk

        packed = token_state.pack(slot.memory.tokens, chunk_for)
        n_bytes = self._kv.ctx.save_seq_state_file(path, slot.id, packed)
        return _done(task, slot, path, t0, "save", len(slot.memory.tokens), n_bytes)

    def restore(self, task: Task) -> Result:
        slot, path = self._slot_and_path(task)
        t0 = time.perf_counter()
        ctx, n_ctx_slot = self._kv.ctx, self._n_ctx_slot
        ctx.seq_rm(slot.id)
        try:
            # the packed list may be longer than a slot's context (media metadata): the file bounds it
            capacity = max(n_ctx_slot, os.path.getsize(path) // 4) if os.path.isfile(path) else n_ctx_slot
            packed = ctx.load_seq_state_file(path, slot.id, capacity)
            tokens, media = token_state.unpack(packed, Chunk.load)
            if media and not self._has_projector:
                raise ValueError("Cannot restore media tokens without an mmproj")
            if len(tokens) > n_ctx_slot:
                raise ValueError(f"the file holds {len(tokens)} tokens, more than a slot's context ({n_ctx_slot})")
        except (LlamaError, ValueError) as exc:  # another model, cache layout or server: the client's to fix
            self._kv.clear_slot(slot)  # the slot stays usable, empty
            raise ValueError(f"Unable to restore slot: {exc}") from None
        for chunk in media:
            self._media.remember(chunk)
        slot.memory.replace(tokens)
        self._kv.reset_draft(slot, len(tokens))
        return _done(task, slot, path, t0, "restore", len(tokens), os.path.getsize(path))

    def erase(self, task: Task) -> Result:
        slot, _ = self._slot_and_path(task, need_path=False)
        n = len(slot.memory.tokens)
        self._kv.clear_slot(slot)
        return Result(task.id, SlotErased(slot.id, n))

    def _slot_and_path(self, task: Task, need_path: bool = True) -> tuple[Slot, Any]:
        payload = task.payload or {}
        i = payload.get("id_slot", task.id_slot)
        if not isinstance(i, int) or not 0 <= i < len(self._slots):
            raise ValueError(f"id_slot {i!r} out of range [0, {len(self._slots)})")
        slot = self._slots[i]
        if slot.busy:
            raise ValueError(f"slot {i} is busy")
        path = payload.get("filename")
        if need_path and not path:
            raise ValueError("a slot save/restore needs a 'filename'")
        return slot, path


def _done(task: Task, slot: Slot, path: Any, t0: float, action: str, n_tokens: int, n_bytes: int) -> Result:
    ms = (time.perf_counter() - t0) * 1e3
    name = (task.payload or {}).get("name", str(path))  # the name the client gave; the folder stays ours
    return Result(task.id, SlotFileDone(action, slot.id, name, n_tokens, n_bytes, ms))
