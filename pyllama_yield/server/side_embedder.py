"""Embeddings from a generation engine, as Ollama computes them for any model (its ``/api/embed``):
a small context of the same model beside the slots' one, made on the first request, with embeddings
on and mean pooling. Its decodes run on the loop thread inside ``yield_to_queue``, between batch
steps, so the slots' caches are never touched and the worker keeps answering meanwhile.
"""

from __future__ import annotations

import functools
from collections import deque
from typing import Any

from ..llama import Batch, Context, DecodeError, Model
from ..queue import Result, ServerQueue
from .embedding import EmbeddingTask, normalize
from .emitter import SlotEmitter
from .errors import ErrorKind
from .metrics import Stats
from .results import EmbeddingVectors

__all__ = ["SideEmbedder"]


class SideEmbedder:
    def __init__(self, model: Model, ctx_args: dict[str, Any], emitter: SlotEmitter, stats: Stats) -> None:
        """``ctx_args``: the slots' context's; the side context takes one sequence of one ubatch."""
        self._model = model
        n = ctx_args["n_ubatch"]
        self._args = {**ctx_args, "n_ctx": n, "n_batch": n, "n_ubatch": n, "n_seq_max": 1, "kv_unified": True}
        self._emitter = emitter
        self._stats = stats
        self._ctx: Context | None = None
        self._batch: Batch | None = None
        self._pending: deque[tuple[int, EmbeddingTask]] = deque()

    @property
    def n_tokens_max(self) -> int:
        """The longest input it embeds (one ubatch)."""
        return int(self._args["n_ubatch"])

    def add(self, id_task: int, task: EmbeddingTask) -> None:
        if task.media:
            raise ValueError("media in embedding inputs need an embeddings server (--embeddings)")
        if len(task.prompt_tokens) > self.n_tokens_max:
            raise ValueError(f"input ({len(task.prompt_tokens)} tokens) is longer than {self.n_tokens_max} tokens")
        self._pending.append((id_task, task))

    @property
    def busy(self) -> bool:
        return bool(self._pending)

    def run(self, queue: ServerQueue) -> None:
        """Embed what waits, each inside a yield (rule S1: the worker answers meanwhile)."""
        while self._pending:
            id_task, task = self._pending.popleft()
            out: list[Any] = []
            try:
                queue.yield_to_queue(functools.partial(self._embed_into, task, out))
            except (DecodeError, ValueError) as exc:
                self._emitter.error(id_task, f"embedding failed: {exc}", ErrorKind.SERVER)
                continue
            vector = normalize(out[0], task.normalize).tolist()
            self._emitter.send(Result(id_task, EmbeddingVectors(task.index, [vector], len(task.prompt_tokens))))
            self._stats.add(requests_finished=1)

    def _embed_into(self, task: EmbeddingTask, out: list[Any]) -> None:
        out.append(self._embed(task))

    def _embed(self, task: EmbeddingTask) -> Any:
        if self._ctx is None:
            self._ctx = Context(self._model, **self._args, embeddings=True, pooling="mean")
            self._batch = Batch(self.n_tokens_max)
        ctx, batch = self._ctx, self._batch
        assert batch is not None
        ctx.seq_rm(0)
        batch.clear()
        batch.add_sequence(task.prompt_tokens, 0, 0, logits_last=True, logits_all=True)
        ctx.decode(batch)
        return ctx.embeddings_seq(0)

    def close(self) -> None:
        """Free the side context (the server sleeps, or stops); it is made again when needed."""
        for owner in (self._batch, self._ctx):
            if owner is not None:
                owner.close()
        self._ctx = self._batch = None
