"""Slot tasks: save a slot's KV cache to a file, restore it, erase it (``/slots/{id}``)."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from ..llama import LlamaError
from ..mtmd import Chunk
from ..queue import Result, Task
from . import token_state
from .slot import Slot

if TYPE_CHECKING:
    from .context import ServerContext


def _slot_and_path(srv: ServerContext, task: Task, need_path: bool = True) -> tuple[Slot, Any]:
    payload = task.payload or {}
    i = payload.get("id_slot", task.id_slot)
    if not isinstance(i, int) or not 0 <= i < srv.n_parallel:
        raise ValueError(f"id_slot {i!r} out of range [0, {srv.n_parallel})")
    slot = srv.slots[i]
    if slot.busy:
        raise ValueError(f"slot {i} is busy")
    path = payload.get("filename")
    if need_path and not path:
        raise ValueError("a slot save/restore needs a 'filename'")
    return slot, path


def _send_done(
    srv: ServerContext, task: Task, slot: Slot, path: Any, t0: float, action: str, counts: dict[str, int]
) -> None:
    ms = (time.perf_counter() - t0) * 1e3
    name = (task.payload or {}).get("name", str(path))  # the name the client gave; the folder stays ours
    result = {"id_slot": slot.id, "filename": name, **counts, "timings": {f"{action}_ms": ms}}
    srv.stats.publish()  # /slots and metrics see the slot's new cache
    srv.responses.send(Result(task.id, result))


def save(srv: ServerContext, task: Task) -> None:
    """The slot's KV cache and its tokens in llama-server's packed format (``token_state.py``)."""
    slot, path = _slot_and_path(srv, task)
    t0 = time.perf_counter()

    def chunk_for(cell: int) -> Chunk:
        chunk = srv.media_seen.get(cell)
        if chunk is None:
            raise ValueError("Cannot serialize media chunk in server tokens: its medium is no longer known")
        return chunk

    packed = token_state.pack(slot.cache_tokens, chunk_for)
    n_bytes = srv.ctx.save_seq_state_file(path, slot.id, packed)
    _send_done(srv, task, slot, path, t0, "save", {"n_saved": len(slot.cache_tokens), "n_written": n_bytes})


def restore(srv: ServerContext, task: Task) -> None:
    slot, path = _slot_and_path(srv, task)
    t0 = time.perf_counter()
    srv.ctx.seq_rm(slot.id)
    try:
        # the packed list may be longer than a slot's context (media metadata): the file bounds it
        capacity = max(srv.n_ctx_slot, os.path.getsize(path) // 4) if os.path.isfile(path) else srv.n_ctx_slot
        packed = srv.ctx.load_seq_state_file(path, slot.id, capacity)
        tokens, media = token_state.unpack(packed, Chunk.load)
        if media and srv.projector is None:
            raise ValueError("Cannot restore media tokens without an mmproj")
        if len(tokens) > srv.n_ctx_slot:
            raise ValueError(f"the file holds {len(tokens)} tokens, more than a slot's context ({srv.n_ctx_slot})")
    except (LlamaError, ValueError) as exc:  # another model, cache layout or server: the client's to fix
        srv.clear_slot_cache(slot)  # the slot stays usable, empty
        raise ValueError(f"Unable to restore slot: {exc}") from None
    for chunk in media:
        srv.remember_media(chunk)
    slot.cache_tokens, slot.checkpoints = tokens, []
    for draft_ctx in srv.drafter.contexts:
        draft_ctx.seq_rm(slot.id)
    srv.drafter.prefill(slot, len(slot.cache_tokens))
    counts = {"n_restored": len(slot.cache_tokens), "n_read": os.path.getsize(path)}
    _send_done(srv, task, slot, path, t0, "restore", counts)


def erase(srv: ServerContext, task: Task) -> None:
    slot, _ = _slot_and_path(srv, task, need_path=False)
    n = len(slot.cache_tokens)
    srv.clear_slot_cache(slot)
    srv.stats.publish()
    srv.responses.send(Result(task.id, {"id_slot": slot.id, "n_erased": n}))
