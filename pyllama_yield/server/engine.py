"""The engine handle: the one door to a running server context, from any thread.

Both front ends drive the engine through it: the HTTP layer (``api/``) and the in-process
``Llama`` API. It builds tasks from requests on the caller's thread (``task_builder.py``), posts
them and hands back readers of their results, cancels (a reader that stops cancels its tasks), and
reads snapshots; it never touches a slot.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any

import pyllama_yield._build_config as _build_config  # absolute: see _native.py

from .. import rpc
from .._native import hold_on_abort
from ..queue import ResponseReader, Result, Task, TaskType
from .chat_request import ChatPlanner
from .config import EngineConfig
from .context import ServerContext
from .embedding import EmbeddingTask
from .errors import ErrorKind, error_result, raise_for_error
from .results import CompletionFinal, MetricsSnapshot, expect
from .task import CompletionTask
from .task_builder import TaskBuilder, TaskLimits

__all__ = ["Engine"]

log = logging.getLogger("pyllama_yield.server")


class Engine:
    """A model served by slots on a loop thread of its own (:meth:`start`), and what callers on
    any thread may ask of it. ``core`` is the loop side, for tests and diagnostics only."""

    def __init__(self, config: EngineConfig, progress: Callable[[float], object] | None = None) -> None:
        self.config = config
        self.core = core = ServerContext(config, progress)
        # fixed once loaded: read from any thread
        self.model, self.vocab, self.chat = core.model, core.vocab, core.chat
        self.queue, self.responses, self.stats = core.queue, core.responses, core.stats
        self.usage = core.usage  # tokens per tenant in the last minute
        self._loras = core.loras
        self.defaults = config.defaults
        self.n_parallel = core.n_parallel
        self.n_ctx_slot, self.n_ubatch = core.n_ctx_slot, core.n_ubatch
        self.embedding, self.pooling = core.embedding, core.pooling
        self.eog_tokens = core.eog_tokens
        self.projector = core.projector  # --mmproj; its media() and tokenize() are thread-safe
        self.model_name = config.model.name or os.path.basename(config.model.path)
        self.tasks = TaskBuilder(
            core.model,
            core.projector,
            config.defaults,
            TaskLimits(
                n_parallel=core.n_parallel,
                n_ctx_slot=core.n_ctx_slot,
                n_batch=core.n_batch,
                n_ubatch=core.n_ubatch,
                n_predict_max=config.limits.n_predict_max,
                n_probs_max=config.limits.n_probs_max,
                embedding=core.embedding,
                pooling=core.pooling,
            ),
            core.eog_tokens,
        )
        self.chats = ChatPlanner(core.chat, self.tasks, core.projector, config.defaults.reasoning_budget_message or "")
        self.info = self.describe(config.model.path)
        self.failure: str | None = None  # why the engine stopped for good (see _on_abort)
        self._release_abort_hold: Callable[[], None] | None = None

    @classmethod
    def create(
        cls, model_path: str | os.PathLike[str], progress: Callable[[float], object] | None = None, **options: Any
    ) -> Engine:
        """An engine from flat options (see ``EngineConfig.create``)."""
        return cls(EngineConfig.create(model_path, **options), progress)

    # --- lifecycle --------------------------------------------------------------------------
    def start(self) -> Engine:
        """Serve on a dedicated loop thread; returns once the loop runs."""
        if self.config.model.rpc_servers:  # a dead rpc-server fails the requests, not the process
            self._release_abort_hold = hold_on_abort(self._on_abort)
        self.core.start()
        return self

    def stop(self, timeout: float = 60) -> None:
        """Stop the loop, wake every waiter, free llama.cpp objects. An engine that failed
        (:attr:`failure`) frees nothing: a thread of it is parked inside llama.cpp for good."""
        try:
            if self.failure is None:
                self.failure = self._rpc_server_gone()
            if self.failure is None:
                self.core.stop(timeout)
            else:
                self.core.abandon()
        finally:
            if self._release_abort_hold is not None:
                self._release_abort_hold()
                self._release_abort_hold = None

    def _rpc_server_gone(self) -> str | None:
        """Freeing a model whose layers live on an rpc-server talks to that server, and llama.cpp
        aborts inside the free when it is gone (ours would park the stopping thread there, deaf
        to SIGTERM). Such an engine is abandoned instead: its memory goes with the process."""
        for endpoint in self.config.model.rpc_servers:
            if not rpc.listening(endpoint):
                log.error("not freeing the model: its rpc-server at %s is gone", endpoint)
                return f"the model's rpc-server at {endpoint} is gone"
        return None

    def _on_abort(self, message: str) -> None:
        """llama.cpp aborted on one of this engine's threads (e.g. an rpc-server died under a
        decode): every request in flight, and every one from now on, fails with the cause."""
        if self.failure is not None:
            return
        self.failure = f"the model can no longer run: llama.cpp aborted ({message})"
        log.error("%s", self.failure)
        self.responses.fail(error_result(0, self.failure, ErrorKind.UNAVAILABLE))

    def __enter__(self) -> Engine:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def started_at(self) -> float:
        """When the engine was created (Unix time)."""
        return self.stats.t_start

    @property
    def is_sleeping(self) -> bool:
        return self.queue.is_sleeping

    def lora_adapters(self) -> list[dict[str, Any]]:
        """The loaded LoRA adapters with their global scales (llama-server's entries)."""
        return self._loras.describe()

    def set_lora_scales(self, scales: dict[int, float]) -> None:
        """The scales of requests that name none (adapters left out get 0)."""
        self._loras.set_global(scales)

    def wait_until_awake(self) -> None:
        """Wake a sleeping engine (``--sleep-idle-seconds``) and wait until its context is back."""
        self.queue.wait_until_no_sleep()

    def describe(self, model_path: str | os.PathLike[str]) -> dict[str, Any]:
        """What ``/props`` and ``/v1/models`` tell about the served model."""
        return {
            "model_path": str(model_path),
            "model": self.model_name,
            "description": self.model.description(),
            "n_vocab": self.model.n_vocab,
            "n_ctx_train": self.model.n_ctx_train,
            "n_embd": self.model.n_embd,
            "n_params": self.model.n_params,
            "size": self.model.size,
            "n_ctx_slot": self.n_ctx_slot,
            "n_parallel": self.n_parallel,
            "chat_template": self.chat.info["source"],
            "speculative": self.config.draft.path is not None,
            "modalities": {
                "vision": bool(self.projector and self.projector.vision),
                "audio": bool(self.projector and self.projector.audio),
                "video": False,  # mtmd's video path is not built
            },
            "media_marker": self.projector.marker if self.projector else None,
            "system_fingerprint": f"b{_build_config.LLAMA_BUILD_NUMBER}-{_build_config.LLAMA_COMMIT}",
        }

    # --- client side (any thread) -----------------------------------------------------------
    def submit(
        self,
        request: dict[str, Any] | CompletionTask | list[CompletionTask] | list[EmbeddingTask],
        poll_interval_s: float = 0.5,
        *,
        tenant: str | None = None,
        min_priority: int = 0,
    ) -> ResponseReader:
        """Post a completion (a request dict, or tasks from :meth:`make_tasks`); read partial and
        final results from the returned reader. ``tenant``: who the tasks count against when a
        slot frees (None: each completion's ``user``); ``min_priority``: the most urgent priority
        they may have (an API key's)."""
        tasks: list[CompletionTask] | list[EmbeddingTask]
        if isinstance(request, dict):
            tasks = self.tasks.make_tasks(request)
        else:
            tasks = request if isinstance(request, list) else [request]
        reader = ResponseReader(self.queue, self.responses, poll_interval_s)
        self.queue.wait_until_no_sleep()
        reader.post_tasks([_as_task(t, tenant, min_priority) for t in tasks])
        return reader

    def complete(self, request: dict[str, Any] | CompletionTask, timeout_s: float = 300) -> CompletionFinal:
        """Post one completion and wait for its final result (raises on an error result)."""
        with self.submit(request) as reader:
            deadline = time.monotonic() + timeout_s
            while True:
                res = reader.next(lambda: time.monotonic() > deadline)
                if res is None:
                    raise TimeoutError("completion timed out")
                raise_for_error(res)
                if res.is_final:
                    return expect(res, CompletionFinal)

    def post(self, task_type: TaskType, payload: Any = None, poll_interval_s: float = 0.5) -> ResponseReader:
        """Post one task that is not a completion (metrics, slot files); read its result from the reader."""
        reader = ResponseReader(self.queue, self.responses, poll_interval_s)
        reader.post_task(Task(task_type, payload=payload))
        return reader

    def call(self, task_type: TaskType, payload: Any = None, timeout_s: float = 60) -> Result:
        """Post one task and wait for its single result."""
        with self.post(task_type, payload, poll_interval_s=timeout_s) as reader:
            res = reader.next(lambda: True)
            if res is None:
                raise TimeoutError(f"{task_type.name} task timed out")
            return res

    def metrics(self, timeout_s: float = 60) -> dict[str, Any]:
        return expect(self.call(TaskType.METRICS, timeout_s=timeout_s), MetricsSnapshot).values

    def snapshot(self, reset_buckets: bool = False) -> dict[str, Any]:
        """The latest published metrics plus what the queue knows now; safe from any thread.
        ``reset_buckets``: a scrape, which starts a new window for the throughput gauges."""
        return self.stats.snapshot(reset_buckets)


def _as_task(t: CompletionTask | EmbeddingTask, tenant: str | None, min_priority: int) -> Task:
    if isinstance(t, EmbeddingTask):
        return Task(TaskType.EMBEDDING, payload=t, tenant=tenant or "", priority=min_priority)
    p = t.params
    priority = max(p.priority, min_priority)
    return Task(
        TaskType.COMPLETION,
        id_slot=p.id_slot,
        payload=t,
        tenant=p.user if tenant is None else tenant,
        priority=priority,
    )
